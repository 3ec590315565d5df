"""The client settings of the broker's own Kafka clients (console, schema registry).

The console's ``ClusterSource`` and the schema registry's ``SchemaStore`` and
``WriterElection`` are odradek.client clients inside the broker process. They reach the
broker the way the other brokers do: through the inter-broker listener
(``inter.broker.listener.name``, else the listener named by ``security.inter.broker.protocol``),
with that listener's security, so that a broker whose only listener is SASL_SSL needs no
PLAINTEXT listener for them. ``internal_client_config(cfg, endpoints)`` turns the broker's
config into the Java client's keys, read as ``inter_broker_connection_factory`` reads them:

* ``security.protocol``: the inter-broker listener's protocol;
* SSL and SASL_SSL: ``ssl.truststore.*`` and ``ssl.keystore.*`` of that listener
  (``listener.name.<l>.ssl.*`` before ``ssl.*``; the key store is presented as the client
  certificate, as the inter-broker client presents it), ``ssl.enabled.protocols``,
  ``ssl.cipher.suites``, ``ssl.endpoint.identification.algorithm``;
* SASL_PLAINTEXT and SASL_SSL: ``sasl.mechanism`` = ``sasl.mechanism.inter.broker.protocol``
  and a ``sasl.jaas.config`` with the ``username``/``password`` of that mechanism's JAAS entry
  on the listener (the broker's own principal, which ACLs or ``super.users`` must allow).

The bootstrap address is that listener's advertised (host, port), so the listener must be
bound first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.endpoints import inter_broker_listener, inter_broker_login, ssl_settings
from odradek.security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE

if TYPE_CHECKING:
    from odradek.broker.config import BrokerConfig
    from odradek.broker.endpoints import Endpoints

__all__ = ["internal_client_config"]

_SSL_KEYS = {
    "keystore_type": "ssl.keystore.type",
    "keystore_location": "ssl.keystore.location",
    "keystore_password": "ssl.keystore.password",
    "key_password": "ssl.key.password",
    "keystore_key": "ssl.keystore.key",
    "keystore_certificate_chain": "ssl.keystore.certificate.chain",
    "truststore_type": "ssl.truststore.type",
    "truststore_location": "ssl.truststore.location",
    "truststore_password": "ssl.truststore.password",
    "truststore_certificates": "ssl.truststore.certificates",
    "enabled_protocols": "ssl.enabled.protocols",
    "cipher_suites": "ssl.cipher.suites",
    "endpoint_identification_algorithm": "ssl.endpoint.identification.algorithm",
}


def _quoted(value: str) -> str:
    """A JAAS option value: double-quoted, backslash and quote escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def internal_client_config(
    cfg: BrokerConfig, endpoints: Endpoints | None, fallback: tuple[str, int]
) -> tuple[tuple[str, int], dict[str, str]]:
    """((host, port) to bootstrap from, Java-client properties) for the broker's internal clients.

    ``fallback`` is the address used when no listener carries the inter-broker listener's name
    (then with no security settings: the PLAINTEXT default). Raises ``ConfigError`` when the
    inter-broker listener's SASL settings are missing, as the inter-broker client does.
    """
    name, protocol = inter_broker_listener(cfg)
    endpoint = None if endpoints is None else endpoints.by_name(name)
    if endpoint is None:
        return fallback, {}
    host, port = endpoint.address
    props: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        settings = ssl_settings(cfg, name)
        for field_name, key in _SSL_KEYS.items():
            value = getattr(settings, field_name)
            if value is None or (key.endswith(".type") and value == "JKS"):
                continue  # unset (JKS is Kafka's default type, which only a set location uses)
            props[key] = str(value)
        if settings.keystore_location is None and settings.keystore_key is None:
            props.pop("ssl.keystore.type", None)
        if settings.truststore_location is None:
            props.pop("ssl.truststore.type", None)
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism, username, password = inter_broker_login(cfg, name)
        module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = (
            f"{module} required username={_quoted(username)} password={_quoted(password)};"
        )
    return (host, port), props
