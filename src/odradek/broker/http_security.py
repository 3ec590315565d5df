"""What the broker hands its HTTP listeners (the console and ``/metrics`` on ``http.listeners``,
the schema registry on ``schema.registry.listeners``) for TLS and logins.

* **TLS** for an ``https://`` entry: a ``ServerTls`` built from the broker's ``ssl.*`` key store
  (``ssl.keystore.type``/``location``/``password``, ``ssl.key.password`` or the inline PEM keys,
  ``ssl.enabled.protocols``, ``ssl.cipher.suites``); when the plain keys name no key store, those
  of the first SSL or SASL_SSL listener (``listener.name.<l>.ssl.*``). ``ssl.client.auth`` is not
  applied (browsers and scrapers present no certificate). Key and certificate files are reloaded
  on change at the next handshake, as on the Kafka listeners. ``client_ssl`` (the same keys'
  client context: ``ssl.truststore.*``, ``ssl.endpoint.identification.algorithm``) is what the
  registry forwards writes to an ``https`` writer with.
* **Logins** when the broker has an authorizer: an ``HttpAuthenticator`` over the broker's SCRAM
  credentials, its authorizer, and the OAUTHBEARER validator of the first listener that enables
  OAUTHBEARER (bearer tokens are refused without one).
"""

from __future__ import annotations

import dataclasses
import functools
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.broker.endpoints import Endpoints
from odradek.console.listeners import parse_http_endpoints
from odradek.security.acl_store import AclStore
from odradek.security.http_auth import HttpAuthenticator
from odradek.security.sasl import MechanismServer
from odradek.security.tls import ServerTls, SslConfigError, SslSettings, client_context

__all__ = ["HttpSecurity", "http_security"]


@dataclass(frozen=True)
class HttpSecurity:
    tls: ServerTls | None = None
    client_ssl: ssl.SSLContext | None = None
    auth: HttpAuthenticator | None = None
    session_timeout_ms: int = 8 * 3600 * 1000
    skip_paths: tuple[str, ...] = ("/metrics", "/health")


def _settings(cfg: BrokerConfig, endpoints: Endpoints) -> SslSettings:
    def plain(key: str) -> str | None:
        value = cfg.get(key)
        return None if value is None else str(value)

    settings = SslSettings.from_lookup(plain)
    if not (settings.keystore_location or settings.keystore_key):
        for endpoint in endpoints.endpoints:
            if endpoint.tls is not None:
                settings = endpoint.tls.settings
                break
    return dataclasses.replace(settings, client_auth="none")


def http_security(cfg: BrokerConfig, endpoints: Endpoints, acls: AclStore | None) -> HttpSecurity:
    """Raises ConfigError when an ``https://`` listener cannot get a key store."""
    listeners = [
        ("http.listeners", cfg.http_listeners),
        ("schema.registry.listeners", cfg.schema_registry_listeners),
    ]
    tls = client_ssl = None
    for key, text in listeners:
        if tls is None and any(e.tls for e in parse_http_endpoints(text)):
            settings = _settings(cfg, endpoints)
            try:
                tls = ServerTls(settings)
            except SslConfigError as exc:
                raise ConfigError(key, f"https needs the ssl.keystore.* keys: {exc}") from None
            try:
                client_ssl = client_context(settings)
            except SslConfigError:
                client_ssl = None
    auth = None
    if acls is not None:
        token_server: Callable[[], MechanismServer] | None = None
        oauth = [
            ep.sasl
            for ep in endpoints.endpoints
            if ep.sasl is not None and "OAUTHBEARER" in ep.sasl.mechanisms
        ]
        if oauth:
            token_server = functools.partial(oauth[0].new_server, "OAUTHBEARER")

        auth = HttpAuthenticator(
            endpoints.credentials.lookup, lambda: acls.authorizer, token_server
        )
    skip = str(cfg.get("http.authentication.skip.paths") or "")
    return HttpSecurity(
        tls,
        client_ssl,
        auth,
        int(cfg.get("http.session.timeout.ms") or 8 * 3600 * 1000),
        tuple(p.strip() for p in skip.split(",") if p.strip()),
    )
