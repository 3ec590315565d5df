"""The server side of SASL authentication on one connection, sans I/O (Kafka's
``SaslServerAuthenticator``), driven by the connection and the SaslHandshake /
SaslAuthenticate handlers.

States and what each accepts (anything else closes the connection, as in Kafka)::

    state           accepts                               -> next
    HANDSHAKE       ApiVersions (18)                      -> HANDSHAKE
                    SaslHandshake v1 (17), mechanism ok   -> AUTHENTICATE
                    SaslHandshake v0, mechanism ok        -> AUTHENTICATE (raw tokens)
                    SaslHandshake, unknown mechanism      -> FAILED (answered, then closed)
    AUTHENTICATE    SaslAuthenticate (36) [v1 handshake]  -> AUTHENTICATE | COMPLETE | FAILED
                    a raw token frame [v0 handshake]      -> AUTHENTICATE | COMPLETE | FAILED
    COMPLETE        every request; SaslHandshake again starts a re-authentication (KIP-368)
                    when connections.max.reauth.ms > 0, else ILLEGAL_SASL_STATE
    FAILED          nothing: the connection closes once the answer is written

Raw tokens (handshake v0) are frames of ``int32 size + token`` with no request header, answered
the same way; a failure closes the connection without an answer (what old clients expect).
A frame bigger than ``sasl.server.max.receive.size`` before COMPLETE closes the connection.

A mechanism server (``MechanismServer``) takes client messages and returns challenges; it
raises ``AuthenticationError`` (the message the client sees) and sets ``complete``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.security.principal import KafkaPrincipal
from odradek.security.scram import AuthenticationError, ScramServer

__all__ = [
    "API_VERSIONS",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "AuthenticateResult",
    "MechanismServer",
    "SaslServerAuthenticator",
    "SaslState",
]

log = logging.getLogger("odradek.security")

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18

# Kafka's error codes (Errors.java)
NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class SaslState(enum.Enum):
    HANDSHAKE = "HANDSHAKE"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class MechanismServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    def evaluate(self, message: bytes) -> bytes: ...


class ScramMechanismServer:
    """``ScramServer``'s two steps behind ``evaluate``."""

    def __init__(self, server: ScramServer) -> None:
        self._server = server
        self.mechanism = server.mechanism
        self._step = 0

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def username(self) -> str | None:
        return self._server.username

    def evaluate(self, message: bytes) -> bytes:
        self._step += 1
        if self._step == 1:
            return self._server.client_first(message)
        if self._step == 2:
            return self._server.client_final(message)
        raise AuthenticationError("Unexpected SCRAM message after the exchange completed")


@dataclass(frozen=True, slots=True)
class AuthenticateResult:
    """What a SaslAuthenticate request is answered with."""

    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0


class AuthListener(Protocol):
    """Where outcomes are reported (metrics, logs): once per exchange."""

    def authentication_succeeded(self, listener: str, mechanism: str) -> None: ...

    def authentication_failed(
        self, listener: str, mechanism: str, client: str, reason: str
    ) -> None: ...


class SaslServerAuthenticator:
    """One connection's SASL state (see the module docstring)."""

    def __init__(
        self,
        listener_name: str,
        enabled_mechanisms: Sequence[str],
        new_server: Callable[[str], MechanismServer],
        *,
        client_host: str = "",
        max_receive_size: int = 524288,
        reauth_ms: int = 0,
        now_ms: Callable[[], int] | None = None,
        outcomes: AuthListener | None = None,
    ) -> None:
        self.listener_name = listener_name
        self.enabled_mechanisms = tuple(enabled_mechanisms)
        self._new_server = new_server
        self.client_host = client_host
        self.max_receive_size = max_receive_size
        self.reauth_ms = reauth_ms
        self._now_ms = now_ms or (lambda: 0)
        self._outcomes = outcomes
        self.state = SaslState.HANDSHAKE
        self.raw_tokens = False
        self.mechanism: str | None = None
        self._server: MechanismServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expires_ms: int | None = None
        self.failure: str | None = None

    # -- what the connection asks ---------------------------------------------------------

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def allows(self, api_key: int) -> bool:
        """May a request of ``api_key`` be handled now? (False: close the connection.)"""
        state = self.state
        if state is SaslState.COMPLETE:
            return True
        if state is SaslState.HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if state is SaslState.AUTHENTICATE:
            return not self.raw_tokens and api_key == SASL_AUTHENTICATE
        return False

    def session_expired(self) -> bool:
        """KIP-368: a session past its lifetime may only re-authenticate."""
        expires = self.session_expires_ms
        return expires is not None and self._now_ms() > expires

    # -- SaslHandshake ----------------------------------------------------------------------

    def handshake(self, version: int, mechanism: str) -> tuple[int, tuple[str, ...]]:
        """(error code, enabled mechanisms) for a SaslHandshake request."""
        if self.state is SaslState.COMPLETE:
            if self.reauth_ms <= 0 or version < 1:
                return ILLEGAL_SASL_STATE, self.enabled_mechanisms
            if mechanism != self.mechanism:  # Kafka: re-authentication keeps the mechanism
                self._fail(mechanism, "re-authentication with a different mechanism")
                return UNSUPPORTED_SASL_MECHANISM, self.enabled_mechanisms
        elif self.state is not SaslState.HANDSHAKE:
            return ILLEGAL_SASL_STATE, self.enabled_mechanisms
        if mechanism not in self.enabled_mechanisms:
            self._fail(mechanism, f"unsupported SASL mechanism {mechanism!r}")
            return UNSUPPORTED_SASL_MECHANISM, self.enabled_mechanisms
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.raw_tokens = version == 0
        self.state = SaslState.AUTHENTICATE
        return NONE, self.enabled_mechanisms

    # -- SaslAuthenticate and raw tokens ----------------------------------------------------

    def _complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    def authenticate(self, auth_bytes: bytes) -> AuthenticateResult:
        """One SaslAuthenticate request's token -> its answer."""
        if self.state is not SaslState.AUTHENTICATE or self.raw_tokens:
            if self.state is SaslState.COMPLETE:
                message = "SaslAuthenticate request received after successful authentication"
            else:
                message = f"Unexpected SaslAuthenticate request in state {self.state.value}"
            return AuthenticateResult(ILLEGAL_SASL_STATE, message, b"")
        try:
            challenge = self._evaluate(auth_bytes)
        except AuthenticationError as exc:
            return AuthenticateResult(SASL_AUTHENTICATION_FAILED, str(exc), b"")
        lifetime = 0
        if self._complete() and self.session_expires_ms is not None:
            lifetime = max(0, self.session_expires_ms - self._now_ms())
        return AuthenticateResult(NONE, None, challenge, lifetime)

    def raw_token(self, token: bytes) -> bytes:
        """A raw token frame (after SaslHandshake v0) -> the raw answer; raises
        AuthenticationError (close without answering)."""
        if self.state is not SaslState.AUTHENTICATE or not self.raw_tokens:
            raise AuthenticationError("unexpected raw SASL token")
        return self._evaluate(token)

    def _evaluate(self, message: bytes) -> bytes:
        server = self._server
        assert server is not None and self.mechanism is not None
        if len(message) > self.max_receive_size:
            self._fail(self.mechanism, "SASL token too large")
            raise AuthenticationError("Invalid SASL token size")
        try:
            challenge = server.evaluate(message)
        except AuthenticationError as exc:
            self._fail(self.mechanism, str(exc))
            raise
        except Exception as exc:  # a malformed token must never take the broker down
            self._fail(self.mechanism, f"malformed token ({exc!r})")
            raise AuthenticationError("Authentication failed: malformed SASL token") from None
        if server.complete:
            username = server.username or ""
            previous = self.principal
            principal = KafkaPrincipal.user(username)
            if previous is not None and previous != principal:
                self._fail(self.mechanism, "re-authentication changed the principal")
                raise AuthenticationError(
                    "Cannot change principals during re-authentication from "
                    f"{previous}: {principal}"
                )
            self.principal = principal
            self.state = SaslState.COMPLETE
            self.raw_tokens = False
            self._server = None
            if self.reauth_ms > 0:
                expires = self._now_ms() + self.reauth_ms
                token_expires = getattr(server, "expires_ms", None)  # OAUTHBEARER: the token's
                if isinstance(token_expires, int):
                    expires = min(expires, token_expires)
                self.session_expires_ms = expires
            if self._outcomes is not None:
                self._outcomes.authentication_succeeded(self.listener_name, self.mechanism)
        return challenge

    def _fail(self, mechanism: str, reason: str) -> None:
        self.state = SaslState.FAILED
        self.failure = reason
        if self._outcomes is not None:
            self._outcomes.authentication_failed(
                self.listener_name, mechanism, self.client_host, reason
            )
