"""``ssl.client.auth`` on SASL_SSL listeners, as Kafka (KIP-684): the broker-wide value applies
to SSL listeners only; a SASL_SSL listener asks for a client certificate only when
``listener.name.<listener>.ssl.client.auth`` says so. librdkafka's 0097_ssl_verify relies on it
(an untrusted client certificate on SASL_SSL still connects)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from odradek.testing.embedded import EmbeddedBroker

from .conftest import Certs, listener_addr, server_tls

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'


def _settings(certs: Certs, **extra: str) -> dict[str, Any]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        **server_tls(certs),
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        **extra,
    }


@pytest.fixture
def broker_wide(certs: Certs) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(_settings(certs)) as b:
        yield b


def _connects(certs: Certs, bootstrap: str, protocol: str) -> bool:
    """Whether a client without a certificate gets metadata over ``protocol``."""
    conf = {
        "bootstrap.servers": bootstrap,
        "security.protocol": protocol,
        "ssl.ca.location": str(certs.ca_pem),
    }
    if protocol == "SASL_SSL":
        conf |= {"sasl.mechanisms": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-pw"}
    try:
        return bool(AdminClient(conf).list_topics(timeout=5).brokers)
    except KafkaException:
        return False


def test_broker_wide_client_auth_leaves_sasl_ssl_without_certificates(
    certs: Certs, broker_wide: EmbeddedBroker
) -> None:
    assert _connects(certs, listener_addr(broker_wide, "SASL_SSL"), "SASL_SSL")
    # the SSL listener still requires a certificate
    assert not _connects(certs, listener_addr(broker_wide, "SSL"), "SSL")


def test_listener_prefixed_client_auth_applies_to_sasl_ssl(certs: Certs) -> None:
    settings = _settings(certs, **{"listener.name.sasl_ssl.ssl.client.auth": "required"})
    with EmbeddedBroker(settings) as b:
        assert not _connects(certs, listener_addr(b, "SASL_SSL"), "SASL_SSL")
