"""The broker's listeners as security endpoints: for each entry of ``listeners``, its name,
security protocol (``listener.security.protocol.map``), address, advertised address, TLS
(SSL, SASL_SSL) and SASL (SASL_PLAINTEXT, SASL_SSL) settings.

Per-listener keys: ``listener.name.<name lower case>.<key>`` wins over ``<key>``; the JAAS
config of a mechanism is looked up as ``listener.name.<l>.<mechanism lower case>.sasl.jaas.config``,
then ``listener.name.<l>.sasl.jaas.config``, then ``sasl.jaas.config`` (Kafka's order).

Mechanisms: PLAIN (users from the PlainLoginModule's ``user_<name>="<password>"`` options),
SCRAM-SHA-256 and SCRAM-SHA-512 (users from ``ScramCredentials``), OAUTHBEARER with unsecured
JWTs (the ``unsecuredValidator*`` options of the mechanism's JAAS entry). GSSAPI is not served: a
listener whose enabled mechanisms include only GSSAPI fails at start.

``Endpoints.bind`` opens one socket server per listener; ``ListenerGroup`` looks like one
``asyncio.Server`` (``sockets``, ``close``, ``wait_closed``, ``start_serving``) to the broker.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import ssl
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.broker.config import BrokerConfig, ConfigError, Listener, parse_listeners
from odradek.broker.config.security_keys import LISTENER_PREFIX, parse_protocol_map
from odradek.security.credentials import EntityStore, ScramCredentials
from odradek.security.jaas import PLAIN_LOGIN_MODULE, JaasConfigError, parse_jaas
from odradek.security.oauthbearer import (
    JwksValidator,
    OAuthBearerJwksServer,
    OAuthBearerUnsecuredServer,
)
from odradek.security.plain import PlainServer
from odradek.security.sasl import (
    MechanismServer,
    SaslServerAuthenticator,
    ScramMechanismServer,
)
from odradek.security.scram import MECHANISMS, ScramServer
from odradek.security.tls import ServerTls, SslConfigError, SslSettings

__all__ = [
    "AuthCounters",
    "Endpoints",
    "ListenerEndpoint",
    "ListenerGroup",
    "TlsAcceptor",
    "listener_value",
]

log = logging.getLogger("odradek.security")

SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS, "OAUTHBEARER")
INTER_BROKER_MECHANISMS = ("PLAIN", *MECHANISMS)


def listener_value(cfg: BrokerConfig, listener: str, key: str) -> str | None:
    """``listener.name.<listener>.<key>`` if given, else ``key``'s value (None: unset)."""
    explicit = cfg.explicit()
    override = explicit.get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")
    if override is not None:
        return override
    value = cfg.get(key)
    return None if value is None else str(value)


class AuthCounters:
    """Authentication outcomes per (listener, mechanism); each failure is logged once with the
    client's address (never whether the user exists)."""

    def __init__(self) -> None:
        self.succeeded: Counter[tuple[str, str]] = Counter()
        self.failed: Counter[tuple[str, str]] = Counter()

    def authentication_succeeded(self, listener: str, mechanism: str) -> None:
        self.succeeded[(listener, mechanism)] += 1

    def authentication_failed(
        self, listener: str, mechanism: str, client: str, reason: str
    ) -> None:
        self.failed[(listener, mechanism)] += 1
        log.warning(
            "failed authentication on listener %s with mechanism %s from %s: %s",
            listener,
            mechanism,
            client,
            reason,
        )

    def tls_failed(self, listener: str, client: str, reason: str) -> None:
        self.failed[(listener, "SSL")] += 1
        log.warning("failed TLS handshake on listener %s from %s: %s", listener, client, reason)


@dataclass
class SaslListener:
    """One listener's SASL settings."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    credentials: ScramCredentials
    max_receive_size: int
    reauth_ms: int
    counters: AuthCounters
    oauthbearer_options: dict[str, str] = field(default_factory=dict)
    jwks: JwksValidator | None = None
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000)

    def new_server(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism == "OAUTHBEARER":
            if self.jwks is not None:
                return OAuthBearerJwksServer(self.jwks, self.now_ms)
            return OAuthBearerUnsecuredServer(self.oauthbearer_options, self.now_ms)
        return ScramMechanismServer(
            ScramServer(mechanism, lambda user: self.credentials.lookup(mechanism, user))
        )

    def authenticator(
        self, client_host: str, now_ms: Callable[[], int] | None = None
    ) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(
            self.listener,
            self.mechanisms,
            self.new_server,
            client_host=client_host,
            max_receive_size=self.max_receive_size,
            reauth_ms=self.reauth_ms,
            now_ms=now_ms,
            outcomes=self.counters,
        )


@dataclass
class ListenerEndpoint:
    """One listener: what connections accepted on it are told and checked with."""

    name: str
    security_protocol: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    tls: ServerTls | None = None
    sasl: SaslListener | None = None
    bound_port: int = 0
    counters: AuthCounters = field(default_factory=AuthCounters)

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) clients are told for this listener."""
        host = self.advertised_host or self.host
        if not host or host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        port = self.advertised_port if self.advertised_port else self.bound_port or self.port
        return host, port


def _sasl_listener(
    cfg: BrokerConfig, name: str, credentials: ScramCredentials, counters: AuthCounters
) -> SaslListener:
    raw = listener_value(cfg, name, "sasl.enabled.mechanisms") or ""
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    served = tuple(m for m in mechanisms if m in SUPPORTED_MECHANISMS)
    if not served:
        raise ConfigError(
            "sasl.enabled.mechanisms",
            f"listener {name}: none of {', '.join(mechanisms) or '(none)'} is served "
            f"(served: {', '.join(SUPPORTED_MECHANISMS)})",
        )
    plain_users: dict[str, str] = {}
    if "PLAIN" in served:
        jaas = jaas_config(cfg, name, "PLAIN")
        if jaas is None:
            raise ConfigError(
                "sasl.jaas.config",
                f"listener {name}: PLAIN needs listener.name.{name.lower()}.plain.sasl.jaas.config",
            )
        try:
            entry = parse_jaas(jaas)
        except JaasConfigError as exc:
            raise ConfigError("sasl.jaas.config", str(exc)) from None
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError("sasl.jaas.config", f"PLAIN needs {PLAIN_LOGIN_MODULE}")
        plain_users = {
            k[len("user_") :]: v for k, v in entry.options.items() if k.startswith("user_")
        }
    oauth_options: dict[str, str] = {}
    if "OAUTHBEARER" in served:
        jaas = jaas_config(cfg, name, "OAUTHBEARER")
        if jaas is not None:
            try:
                oauth_options = parse_jaas(jaas).options
            except JaasConfigError as exc:
                raise ConfigError("sasl.jaas.config", str(exc)) from None
    jwks = None
    url = listener_value(cfg, name, "sasl.oauthbearer.jwks.endpoint.url")
    if "OAUTHBEARER" in served and url:
        audience = listener_value(cfg, name, "sasl.oauthbearer.expected.audience") or ""
        try:
            jwks = JwksValidator(
                url,
                expected_audience=tuple(a.strip() for a in audience.split(",") if a.strip()),
                expected_issuer=listener_value(cfg, name, "sasl.oauthbearer.expected.issuer"),
                clock_skew_s=int(
                    listener_value(cfg, name, "sasl.oauthbearer.clock.skew.seconds") or 30
                ),
                sub_claim=listener_value(cfg, name, "sasl.oauthbearer.sub.claim.name") or "sub",
                scope_claim=listener_value(cfg, name, "sasl.oauthbearer.scope.claim.name")
                or "scope",
            )
        except Exception as exc:
            raise ConfigError(
                "sasl.oauthbearer.jwks.endpoint.url", f"listener {name}: {exc}"
            ) from None
    return SaslListener(
        name,
        served,
        plain_users,
        credentials,
        int(listener_value(cfg, name, "sasl.server.max.receive.size") or 524288),
        int(listener_value(cfg, name, "connections.max.reauth.ms") or 0),
        counters,
        oauth_options,
        jwks=jwks,
    )


def jaas_config(cfg: BrokerConfig, listener: str, mechanism: str) -> str | None:
    explicit = cfg.explicit()
    for key in (
        f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
        f"{LISTENER_PREFIX}{listener.lower()}.sasl.jaas.config",
    ):
        if key in explicit:
            return explicit[key]
    value = cfg.get("sasl.jaas.config")
    return None if value is None else str(value)


def ssl_settings(cfg: BrokerConfig, listener: str, protocol: str = "SSL") -> SslSettings:
    """The TLS settings of ``listener``. On a SASL_SSL listener ``ssl.client.auth`` counts only
    when listener-prefixed (Kafka's KIP-684): the broker-wide value is for SSL listeners, and
    SASL_SSL clients authenticate with SASL, certificate or not."""

    def get(key: str) -> str | None:
        if protocol == "SASL_SSL" and key == "ssl.client.auth":
            value = cfg.explicit().get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")
            broker_wide = listener_value(cfg, listener, key)
            if value is None and broker_wide and broker_wide.strip().lower() != "none":
                log.warning(
                    "ssl.client.auth applies to SSL listeners only: listener %s (SASL_SSL) "
                    "asks for no client certificate; set listener.name.%s.ssl.client.auth "
                    "for it",
                    listener,
                    listener.lower(),
                )
            return value
        return listener_value(cfg, listener, key)

    return SslSettings.from_lookup(get)


def protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    return parse_protocol_map(cfg.get("listener.security.protocol.map") or "")


def inter_broker_listener(cfg: BrokerConfig) -> tuple[str, str]:
    """(listener name, security protocol) brokers use to reach each other: Kafka's
    inter.broker.listener.name, else the listener named after security.inter.broker.protocol."""
    protocols = protocol_map(cfg)
    name = cfg.get("inter.broker.listener.name")
    if name:
        name = str(name).upper()
        return name, protocols[name]
    protocol = str(cfg.get("security.inter.broker.protocol") or "PLAINTEXT")
    return protocol, protocol


class Endpoints:
    """Every listener of a broker (built from its config at start)."""

    def __init__(self, cfg: BrokerConfig, store: Callable[[], EntityStore | None]) -> None:
        self.config = cfg
        self.credentials = ScramCredentials(store)
        self.counters = AuthCounters()
        protocols = protocol_map(cfg)
        listeners = parse_listeners(cfg.listeners)
        advertised: dict[str, Listener] = {}
        if cfg.advertised_listeners:
            advertised = {
                a.name: a for a in parse_listeners(cfg.advertised_listeners, "advertised.listeners")
            }
        self.endpoints: list[ListenerEndpoint] = []
        for listener in listeners:
            protocol = protocols[listener.name]
            adv = advertised.get(listener.name)
            endpoint = ListenerEndpoint(
                listener.name,
                protocol,
                listener.host,
                listener.port,
                adv.host if adv else None,
                adv.port if adv else None,
                counters=self.counters,
            )
            if protocol in ("SSL", "SASL_SSL"):
                try:
                    endpoint.tls = ServerTls(ssl_settings(cfg, listener.name, protocol))
                except SslConfigError as exc:
                    raise ConfigError("listeners", f"listener {listener.name}: {exc}") from None
                # failed handshakes are counted by TlsAcceptor, which knows the client's address
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                endpoint.sasl = _sasl_listener(cfg, listener.name, self.credentials, self.counters)
            self.endpoints.append(endpoint)

    def registered_address(self) -> tuple[str, int]:
        """The address this broker registers for the other brokers: its inter-broker
        listener's (``BrokerConfig.advertised_listener`` names it), the first otherwise."""
        endpoint = self.by_name(self.config.advertised_listener.name) or self.endpoints[0]
        return endpoint.address

    def by_name(self, name: str) -> ListenerEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.name == name:
                return endpoint
        return None

    async def bind(self, factory: Callable[[ListenerEndpoint], asyncio.Protocol]) -> ListenerGroup:
        """One socket server per listener, not serving yet (``start_serving``)."""
        loop = asyncio.get_running_loop()
        servers: list[asyncio.Server] = []
        try:
            for endpoint in self.endpoints:
                make: Callable[[], asyncio.Protocol]
                if endpoint.tls is None:
                    make = functools.partial(factory, endpoint)
                else:
                    make = functools.partial(TlsAcceptor, endpoint, factory)
                server = await loop.create_server(
                    make,
                    host=endpoint.host or None,
                    port=endpoint.port,
                    reuse_address=True,
                    backlog=1024,
                    start_serving=False,
                )
                if server.sockets:
                    endpoint.bound_port = server.sockets[0].getsockname()[1]
                servers.append(server)
        except BaseException:
            for server in servers:
                server.close()
            raise
        return ListenerGroup(servers)


def _tls_protocol_class(loop: asyncio.AbstractEventLoop) -> Any:
    """The event loop's own TLS protocol (uvloop's, else asyncio's): what ``create_server``
    with ``ssl=`` would wrap each connection in."""
    uvloop = sys.modules.get("uvloop")  # imported by whoever runs the loop on it
    if uvloop is not None and isinstance(loop, uvloop.Loop):
        return importlib.import_module("uvloop.loop").SSLProtocol
    from asyncio.sslproto import SSLProtocol as AsyncioSSLProtocol

    return AsyncioSSLProtocol


class TlsAcceptor(asyncio.Protocol):
    """A connection accepted on a TLS listener: the TLS layer is the loop's own TLS protocol
    (exactly what ``create_server(ssl=...)`` uses), built here so that the client's address is
    known when its handshake fails. On ``connection_made`` the acceptor notes the peer and
    steps aside (``set_protocol``) before any byte is read. A handshake that fails on TLS
    grounds (plaintext or garbage on the port, an unknown CA, no common protocol or cipher) is
    counted and logged once with the client's address (``AuthCounters.tls_failed``, mechanism
    ``SSL``); a client that goes away mid-handshake (EOF) or stays silent past
    ``HANDSHAKE_TIMEOUT_S`` is closed without being counted. The TLS layer closes the socket."""

    HANDSHAKE_TIMEOUT_S = 10.0

    def __init__(
        self, endpoint: ListenerEndpoint, factory: Callable[[ListenerEndpoint], asyncio.Protocol]
    ) -> None:
        assert endpoint.tls is not None
        self.endpoint = endpoint
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[None] = loop.create_future()
        self.tls_protocol: asyncio.BaseProtocol = _tls_protocol_class(loop)(
            loop,
            factory(endpoint),
            endpoint.tls.context,
            self.handshake,
            server_side=True,
            ssl_handshake_timeout=self.HANDSHAKE_TIMEOUT_S,
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if peer else "an unknown address"
        self.handshake.add_done_callback(functools.partial(self._handshake_done, client))
        transport.set_protocol(self.tls_protocol)
        self.tls_protocol.connection_made(transport)

    def _handshake_done(self, client: str, handshake: asyncio.Future[None]) -> None:
        if handshake.cancelled():
            return
        exc = handshake.exception()
        if isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError):
            endpoint = self.endpoint
            endpoint.counters.tls_failed(endpoint.name, client, str(exc.reason or exc))


class ListenerGroup:
    """Several socket servers that the broker starts and stops as one."""

    def __init__(self, servers: list[asyncio.Server]) -> None:
        self.servers = servers

    @property
    def sockets(self) -> tuple[Any, ...]:
        return tuple(s for server in self.servers for s in server.sockets)

    async def start_serving(self) -> None:
        for server in self.servers:
            await server.start_serving()

    def close(self) -> None:
        for server in self.servers:
            server.close()

    async def wait_closed(self) -> None:
        for server in self.servers:
            await server.wait_closed()


def inter_broker_login(cfg: BrokerConfig, name: str) -> tuple[str, str, str]:
    """(mechanism, username, password) this broker logs in with on the inter-broker listener
    ``name``: ``sasl.mechanism.inter.broker.protocol`` and that mechanism's JAAS entry on the
    listener (Kafka's rule). Raises ConfigError when either is missing or not served."""
    mechanism = str(cfg.get("sasl.mechanism.inter.broker.protocol") or "").upper()
    if mechanism not in INTER_BROKER_MECHANISMS:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            f"{mechanism} is not served (served: {', '.join(INTER_BROKER_MECHANISMS)})",
        )
    jaas = jaas_config(cfg, name, mechanism)
    if jaas is None:
        raise ConfigError(
            "sasl.jaas.config",
            f"the inter-broker listener {name} needs "
            f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config "
            "with username and password",
        )
    options = parse_jaas(jaas).options
    return mechanism, options.get("username", ""), options.get("password", "")


def inter_broker_connection_factory(cfg: BrokerConfig, node_id: int) -> Any:
    """The ``ConnectionFactory`` of this broker's inter-broker client, from the inter-broker
    listener's settings: TLS from its ``ssl.*`` keys, SASL with
    ``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password`` of that
    mechanism's JAAS entry on the listener (Kafka's rule). None: PLAINTEXT."""
    from odradek.broker.inter_broker_client import SecureConnectionFactory
    from odradek.security.tls import client_context

    name, protocol = inter_broker_listener(cfg)
    if protocol == "PLAINTEXT":
        return None
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            ssl_context = client_context(ssl_settings(cfg, name))
        except SslConfigError as exc:
            raise ConfigError("inter.broker.listener.name", f"listener {name}: {exc}") from None
    mechanism = username = password = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism, username, password = inter_broker_login(cfg, name)
    return SecureConnectionFactory(
        protocol,
        ssl_context,
        mechanism,
        username or "",
        password or "",
        client_id=f"broker-{node_id}",
    )
