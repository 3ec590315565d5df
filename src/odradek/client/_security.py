"""TLS and SASL for odradek.client, configured with the Java client's keys.

``ClientSecurity.from_config(config)`` reads a parsed client config (``_config.COMMON``) once,
when the client is built, and returns None for ``security.protocol=PLAINTEXT`` (the
connection then does exactly what it did before: no extra work per connection or request).
Otherwise it holds:

* for SSL and SASL_SSL, one ``ssl.SSLContext`` from ``odradek.security.tls.client_context``:
  the trust store (``ssl.truststore.location`` with ``ssl.truststore.type`` PEM or PKCS12 and
  ``ssl.truststore.password``, or inline PEM ``ssl.truststore.certificates``; without one, the
  system's CAs) verifies the broker; ``ssl.endpoint.identification.algorithm`` ``https`` (the
  default) also checks the broker's host name, empty turns that off; the key store
  (``ssl.keystore.*``: PEM file, KIP-651 inline ``ssl.keystore.key`` +
  ``ssl.keystore.certificate.chain``, or PKCS12) is the client certificate. A store whose type
  is not given is PKCS12 when its file name ends in ``.p12``/``.pfx``, else PEM (the Java
  client's default, JKS, is Java's own format and is refused);
* for SASL_PLAINTEXT and SASL_SSL, ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
  OAUTHBEARER) and the credentials from ``sasl.jaas.config`` (parsed by
  ``odradek.security.jaas``): ``PlainLoginModule`` / ``ScramLoginModule`` with ``username``
  and ``password``; ``OAuthBearerLoginModule`` with ``unsecuredLoginStringClaim_sub`` (an
  unsecured JWT, as Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler`` makes it) unless
  ``sasl.oauthbearer.token`` (odradek's key: a JWT string, or a callable returning one, called
  at every authentication) gives the token.

``authenticate(conn)`` runs on every new connection, after ApiVersions (which a SASL listener
answers before authentication, as Kafka's clients do it): SaslHandshake v1, then
SaslAuthenticate v1 tokens from ``odradek.security.sasl_client.SaslClient`` (SCRAM's server
signature is verified). A refusal raises ``SaslAuthenticationError`` with the broker's message;
it is not retriable, so callers see it at once instead of a timeout. A reconnect authenticates
again (every connection goes through ``BrokerConnection.open``), and an open connection
re-authenticates before the session lifetime the broker told runs out (KIP-368, in ``_conn``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ConfigError, SaslAuthenticationError, UnsupportedVersionError

__all__ = ["ClientSecurity", "unsecured_jwt"]

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


class Connection(Protocol):
    """What the SASL exchange uses of ``_conn.BrokerConnection``."""

    host: str
    port: int
    client_id: str
    broker_versions: dict[int, tuple[int, int]]

    def next_correlation_id(self) -> int: ...

    def send_frame(
        self, api_key: int, version: int, parts: Sequence[bytes | memoryview], corr: int, *,
        expect_response: bool = True, raw: bool = False,
    ) -> asyncio.Future[Any] | None: ...

    async def wait(self, fut: asyncio.Future[Any], corr: int, timeout: float | None = None) -> Any: ...


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(options: Mapping[str, str], now_s: float) -> str:
    """An unsecured JWT (``{"alg":"none"}``, empty signature) from the JAAS options of
    ``OAuthBearerLoginModule``, as Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler``:
    ``unsecuredLoginStringClaim_<name>="value"``, ``unsecuredLoginNumberClaim_<name>="1"``,
    ``unsecuredLoginListClaim_<name>=",a,b"`` (the first character separates the items),
    ``unsecuredLoginPrincipalClaimName`` (default ``sub``, which must be given),
    ``unsecuredLoginLifetimeSeconds`` (default 3600) for ``exp``; ``iat`` is now."""
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    lifetime = int(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    claims: dict[str, Any] = {"iat": int(now_s), "exp": int(now_s) + lifetime}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key[len("unsecuredLoginStringClaim_") :]] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            number = float(value)
            claims[key[len("unsecuredLoginNumberClaim_") :]] = int(number) if number.is_integer() else number
        elif key.startswith("unsecuredLoginListClaim_") and value:
            claims[key[len("unsecuredLoginListClaim_") :]] = [v for v in value[1:].split(value[0]) if v]
    if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim]:
        raise ValueError(f"unsecuredLoginStringClaim_{principal_claim} is required")
    header = _b64url(json.dumps({"alg": "none"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{header}.{payload}."


def _store_type(explicit: str | None, location: str | None, key: str) -> str:
    if explicit is not None:
        if explicit == "JKS":
            raise ConfigError(f"{key}=JKS is Java's own format: use PEM or PKCS12")
        return explicit
    if location and location.lower().endswith((".p12", ".pfx")):
        return "PKCS12"
    return "PEM"


def _ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    from odradek.security.tls import SslConfigError, SslSettings, client_context

    settings = SslSettings(
        keystore_type=_store_type(config.get("ssl.keystore.type"), config.get("ssl.keystore.location"), "ssl.keystore.type"),
        keystore_location=config.get("ssl.keystore.location"),
        keystore_password=config.get("ssl.keystore.password"),
        key_password=config.get("ssl.key.password"),
        keystore_key=config.get("ssl.keystore.key"),
        keystore_certificate_chain=config.get("ssl.keystore.certificate.chain"),
        truststore_type=_store_type(config.get("ssl.truststore.type"), config.get("ssl.truststore.location"), "ssl.truststore.type"),
        truststore_location=config.get("ssl.truststore.location"),
        truststore_password=config.get("ssl.truststore.password"),
        truststore_certificates=config.get("ssl.truststore.certificates"),
        enabled_protocols=config.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3",
        cipher_suites=config.get("ssl.cipher.suites") or "",
        # Java's default (https) unless given; only an explicit empty value turns the check off
        endpoint_identification_algorithm=(
            "https" if config.get("ssl.endpoint.identification.algorithm") is None
            else str(config["ssl.endpoint.identification.algorithm"])
        ),
    )
    for key in ("ssl.truststore.location", "ssl.keystore.location"):
        location = config.get(key)
        if location and not os.path.isfile(location):
            raise ConfigError(f"{key}: no such file {location}")
    try:
        return client_context(settings)
    except SslConfigError as exc:
        raise ConfigError(str(exc)) from None
    except (ValueError, OSError) as exc:  # PKCS12 that does not open (wrong password, not a store)
        raise ConfigError(f"ssl: {exc}") from None


@dataclass(frozen=True)
class ClientSecurity:
    """What a connection needs beyond a TCP socket (see the module docstring)."""

    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""
    token: Callable[[], str] | None = None  # OAUTHBEARER

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClientSecurity | None:
        """The security of a parsed client config; None for PLAINTEXT. Raises ``ConfigError``
        naming the key for anything missing or unusable (files are read here, once)."""
        protocol = str(config.get("security.protocol") or "PLAINTEXT").upper()
        if protocol == "PLAINTEXT":
            return None
        context = _ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context)
        mechanism = str(config.get("sasl.mechanism") or "GSSAPI").upper()
        if mechanism not in _MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism {mechanism} is not supported (use {', '.join(_MECHANISMS)})"
            )
        given_token = config.get("sasl.oauthbearer.token")
        jaas_text = config.get("sasl.jaas.config")
        if mechanism == "OAUTHBEARER" and given_token is not None:
            if callable(given_token):
                return cls(protocol, context, mechanism, token=given_token)
            text = str(given_token)
            return cls(protocol, context, mechanism, token=lambda: text)
        if not jaas_text:
            raise ConfigError(f"security.protocol={protocol} needs sasl.jaas.config")
        from odradek.security.jaas import JaasConfigError, parse_jaas

        try:
            entry = parse_jaas(str(jaas_text))
        except JaasConfigError as exc:
            raise ConfigError(f"sasl.jaas.config: {exc}") from None
        expected = _LOGIN_MODULES[mechanism]
        if entry.login_module != expected:
            raise ConfigError(
                f"sasl.jaas.config: sasl.mechanism={mechanism} needs {expected}, not {entry.login_module}"
            )
        options = dict(entry.options)
        if mechanism == "OAUTHBEARER":
            try:
                unsecured_jwt(options, time.time())
            except ValueError as exc:
                raise ConfigError(f"sasl.jaas.config: {exc}") from None
            return cls(protocol, context, mechanism, token=lambda: unsecured_jwt(options, time.time()))
        username, password = options.get("username"), options.get("password")
        if not username or password is None:
            raise ConfigError(f"sasl.jaas.config: {expected} needs username=\"..\" password=\"..\"")
        return cls(protocol, context, mechanism, username, password)

    async def authenticate(self, conn: Connection) -> int:
        """The SASL exchange on a new connection, or again on an open one (KIP-368); returns
        the session lifetime the broker told (ms; 0: none). Nothing for SSL: TLS is the
        socket's."""
        if self.mechanism is None:
            return 0
        from odradek.security import sasl_client as sc
        from odradek.security.scram import AuthenticationError

        where = f"{conn.host}:{conn.port}"
        for api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            lo, hi = conn.broker_versions.get(api_key, (0, -1))
            if not lo <= 1 <= hi:
                raise UnsupportedVersionError(f"broker {where} does not serve {('SaslHandshake', 'SaslAuthenticate')[api_key == SASL_AUTHENTICATE]} v1")

        async def call(api_key: int, body: bytes) -> bytes:
            corr = conn.next_correlation_id()
            frame = sc.encode_request(api_key, 1, corr, conn.client_id, body)
            fut = conn.send_frame(api_key, 1, [frame], corr, raw=True)
            assert fut is not None
            answer: bytes = await conn.wait(fut, corr)
            return answer[4:]  # after the correlation id (response header v0)

        error, mechanisms = sc.decode_handshake(await call(SASL_HANDSHAKE, sc.handshake_body(self.mechanism)))
        if error:
            raise SaslAuthenticationError(
                f"broker {where} does not enable SASL mechanism {self.mechanism} "
                f"(it enables {', '.join(mechanisms) or 'none'})",
                error,
            )
        if self.mechanism == "OAUTHBEARER":
            assert self.token is not None
            token = self.token()
            first = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
            answer = sc.decode_authenticate(await call(SASL_AUTHENTICATE, sc.authenticate_body(first)))
            if not answer.error_code and answer.auth_bytes:
                # RFC 7628: an error challenge ({"status":"invalid_token"}) is answered with
                # \x01, and the broker then fails the exchange with its message
                detail = answer.auth_bytes.decode("utf-8", "replace")
                answer = sc.decode_authenticate(await call(SASL_AUTHENTICATE, sc.authenticate_body(b"\x01")))
                if not answer.error_code:
                    raise SaslAuthenticationError(f"authentication to {where} failed: {detail}")
            self._check(answer, where)
            return answer.session_lifetime_ms
        client = sc.SaslClient(self.mechanism, self.username, self.password)
        answer = sc.decode_authenticate(await call(SASL_AUTHENTICATE, sc.authenticate_body(client.first())))
        self._check(answer, where)
        if self.mechanism == "PLAIN":
            return answer.session_lifetime_ms
        try:
            final = client.respond(answer.auth_bytes)
        except (AuthenticationError, ValueError, KeyError) as exc:
            raise SaslAuthenticationError(f"authentication to {where} failed: {exc}") from None
        answer = sc.decode_authenticate(await call(SASL_AUTHENTICATE, sc.authenticate_body(final)))
        self._check(answer, where)
        try:
            client.check_final(answer.auth_bytes)
        except (AuthenticationError, ValueError) as exc:
            raise SaslAuthenticationError(f"authentication to {where} failed: {exc}") from None
        return answer.session_lifetime_ms

    @staticmethod
    def _check(answer: Any, where: str) -> None:
        if answer.error_code:
            message = answer.error_message or "no reason given"
            raise SaslAuthenticationError(f"authentication to {where} failed: {message}", answer.error_code)
