"""``internal_client_config``: the Java-client settings of the broker's own clients (console,
schema registry), read from the inter-broker listener's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.certs import Certs, make_certs

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.endpoints import Endpoints
from odradek.broker.internal_clients import internal_client_config
from odradek.client._config import ADMIN, parse_config
from odradek.client._security import ClientSecurity
from odradek.security.jaas import parse_jaas

FALLBACK = ("127.0.0.1", 9092)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _config(tmp_path: Path, **settings: object) -> tuple[BrokerConfig, Endpoints]:
    cfg = BrokerConfig.from_properties({"log.dirs": str(tmp_path / "data"), **settings})
    endpoints = Endpoints(cfg, lambda: None)
    for endpoint in endpoints.endpoints:
        endpoint.bound_port = 40000 + len(endpoint.name)
    return cfg, endpoints


def test_plaintext_needs_no_settings(tmp_path: Path) -> None:
    cfg, endpoints = _config(tmp_path, listeners="PLAINTEXT://127.0.0.1:0")
    assert internal_client_config(cfg, endpoints, FALLBACK) == (
        ("127.0.0.1", 40009),
        {"security.protocol": "PLAINTEXT"},
    )


def test_sasl_ssl_inter_broker_listener(tmp_path: Path, certs: Certs) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="pa\\"ss";'
    )
    cfg, endpoints = _config(
        tmp_path,
        listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas,
            "listener.name.internal.ssl.keystore.type": "PEM",
            "listener.name.internal.ssl.keystore.location": str(certs.server_keystore),
            "listener.name.internal.ssl.truststore.type": "PEM",
            "listener.name.internal.ssl.truststore.location": str(certs.ca_pem),
            "ssl.endpoint.identification.algorithm": "",
        },
    )
    address, props = internal_client_config(cfg, endpoints, FALLBACK)
    assert address == ("127.0.0.1", 40008)  # the INTERNAL listener, not the first one
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    options = parse_jaas(props["sasl.jaas.config"]).options
    assert options == {"username": "broker", "password": 'pa"ss'}
    assert props["ssl.truststore.location"] == str(certs.ca_pem)
    assert props["ssl.keystore.location"] == str(certs.server_keystore)
    assert props["ssl.endpoint.identification.algorithm"] == ""
    # odradek.client takes the settings as they are
    parsed = parse_config({"bootstrap.servers": "127.0.0.1:1", **props}, ADMIN, "admin")
    assert ClientSecurity.from_config(parsed) is not None


def test_a_mechanism_brokers_cannot_use_is_a_config_error(tmp_path: Path) -> None:
    """As for the inter-broker client: OAUTHBEARER is not a mechanism between brokers."""
    cfg, endpoints = _config(
        tmp_path,
        listeners="SASL_PLAINTEXT://127.0.0.1:0",
        **{
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"
            ),
        },
    )
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        internal_client_config(cfg, endpoints, FALLBACK)
