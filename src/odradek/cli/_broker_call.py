"""One request to one broker over the inter-broker client, for the commands that speak an API
the client does not wrap (`odradek users scram`, `odradek quotas`), with a Java client's (or
librdkafka's) security properties from ``--command-config``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from odradek.cli._clientopts import fail

__all__ = ["call_broker", "connection_factory", "load_properties"]


def load_properties(path: Path | None) -> dict[str, str]:
    """The ``--command-config`` file's keys (empty without one)."""
    if path is None:
        return {}
    from odradek.broker.config import load_properties_file

    return {k: str(v) for k, v in load_properties_file(path).items()}


def _with_librdkafka_keys(props: dict[str, str]) -> dict[str, str]:
    """librdkafka's ``ssl.ca.location`` (a PEM file) as the PEM trust store, unless the
    Java keys are given: one properties file serves kcat, confluent-kafka and odradek."""
    if "ssl.ca.location" in props and "ssl.truststore.location" not in props:
        return {
            **props,
            "ssl.truststore.location": props["ssl.ca.location"],
            "ssl.truststore.type": "PEM",
        }
    return props


def connection_factory(props: dict[str, str], client_id: str) -> Any:
    """A ``SecureConnectionFactory`` for ``security.protocol`` (None: PLAINTEXT); SASL
    credentials from ``sasl.jaas.config``, else librdkafka's ``sasl.username``/``password``."""
    from odradek.broker.inter_broker_client import SecureConnectionFactory
    from odradek.security.jaas import parse_jaas
    from odradek.security.tls import SslSettings, client_context

    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return None
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = client_context(SslSettings.from_lookup(_with_librdkafka_keys(props).get))
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "PLAIN")).upper()
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if "sasl.jaas.config" in props:
            options = parse_jaas(props["sasl.jaas.config"]).options
            username, password = options.get("username"), options.get("password")
    return SecureConnectionFactory(
        protocol, ssl_context, mechanism, username or "", password or "", client_id=client_id
    )


def call_broker(bootstrap: str, props: dict[str, str], request: Any, client_id: str) -> Any:
    """``request``'s response from the first broker of ``bootstrap``; a bad address exits
    with status 2, a failure with status 1 (both with the reason)."""
    from odradek.broker.inter_broker_client import InterBrokerClient, Node

    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if not host or not port.isdigit():
        fail(f"--bootstrap-server: expected host:port, got {bootstrap!r}", 2)

    async def run() -> Any:
        client = InterBrokerClient(-1, connection_factory=connection_factory(props, client_id))
        try:
            return await client.send(Node(-1, host, int(port)), "admin", request)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except Exception as exc:
        fail(f"{bootstrap}: {exc}")
