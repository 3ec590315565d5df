"""SASL/OAUTHBEARER (RFC 7628) with unsecured JWTs, as Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts them (for development only: the
token is not signed).

The client's message is ``n,[a=<authzid>],\\x01auth=Bearer <jwt>\\x01[key=value\\x01...]\\x01``.
The JWT's header must say ``"alg":"none"``; the payload must carry the principal claim
(``unsecuredValidatorPrincipalClaimName``, default ``sub``) and an ``exp`` not in the past
(``unsecuredValidatorAllowableClockSkewMs`` of slack, default 0); with
``unsecuredValidatorRequiredScope`` (comma-separated) the ``scope`` claim must hold each.
A refused token gets RFC 7628's JSON error as challenge (``{"status":"invalid_token"}``);
the client's ``\\x01`` answer to it then fails the exchange, as in Kafka.
The session ends at the token's expiry (KIP-368, with ``connections.max.reauth.ms``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from odradek.security.scram import AuthenticationError

__all__ = ["OAuthBearerUnsecuredServer"]


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class OAuthBearerUnsecuredServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], now_ms: Callable[[], int]) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required_scope = [
            s.strip()
            for s in options.get("unsecuredValidatorRequiredScope", "").split(",")
            if s.strip()
        ]
        self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
        self._now_ms = now_ms
        self.username: str | None = None
        self.complete = False
        self.expires_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, message: bytes) -> bytes:
        if self._error is not None:  # the client's answer to our error challenge
            raise AuthenticationError(self._error)
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("Invalid OAUTHBEARER client first message") from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not gs2.startswith(("n,", "y,")):
            raise AuthenticationError("Invalid OAUTHBEARER client first message")
        params = dict(p.split("=", 1) for p in rest.split("\x01") if "=" in p)
        auth = params.get("auth", "")
        if not auth.startswith("Bearer "):
            raise AuthenticationError("Invalid OAUTHBEARER client first message")
        try:
            claims = self._validate(auth[len("Bearer ") :].strip())
        except (ValueError, KeyError, TypeError) as exc:
            self._error = f"Authentication failed: {exc}"
            return json.dumps({"status": "invalid_token"}).encode()
        authzid = gs2.split(",")[1]
        name = str(claims[self._principal_claim])
        if authzid.startswith("a=") and authzid[2:] != name:
            raise AuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.username = name
        self.complete = True
        return b""

    def _validate(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise ValueError("the token is not a JWT")
        header = json.loads(_b64url(parts[0]))
        if header.get("alg") != "none":
            raise ValueError("unsecured tokens must have alg none")
        claims: dict[str, Any] = json.loads(_b64url(parts[1]))
        if (
            not isinstance(claims.get(self._principal_claim), str)
            or not claims[self._principal_claim]
        ):
            raise ValueError(f"no principal claim {self._principal_claim!r}")
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)):
            raise ValueError("no exp claim")
        expires_ms = int(exp * 1000)
        if expires_ms + self._skew_ms <= self._now_ms():
            raise ValueError("the token has expired")
        scope = claims.get(self._scope_claim, [])
        scopes = scope.split() if isinstance(scope, str) else list(scope)
        missing = [s for s in self._required_scope if s not in scopes]
        if missing:
            raise ValueError(f"the token lacks the required scope {missing}")
        self.expires_ms = expires_ms
        return claims


class JwksValidator:
    """Signed JWTs checked against a JSON Web Key Set, as Kafka's
    ``OAuthBearerValidatorCallbackHandler`` does (``sasl.oauthbearer.*`` keys): the signature
    with the key named by the token's ``kid`` (RS*/ES*/PS* algorithms only, never ``none`` or
    HMAC), ``exp`` required, ``aud`` among ``expected_audience`` and ``iss`` equal to
    ``expected_issuer`` when those are set, ``clock_skew_s`` of leeway; the principal is the
    ``sub_claim``. The key set is read at start (``file://`` or ``http(s)://``, the latter with
    urllib) and read again, in a background thread at most once per ``min_refresh_s``, when a
    token names a key it does not hold; that token is refused meanwhile."""

    ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512")

    def __init__(
        self,
        url: str,
        *,
        expected_audience: tuple[str, ...] = (),
        expected_issuer: str | None = None,
        clock_skew_s: int = 30,
        sub_claim: str = "sub",
        scope_claim: str = "scope",
        min_refresh_s: float = 10.0,
    ) -> None:
        import threading

        self.url = url
        self.expected_audience = expected_audience
        self.expected_issuer = expected_issuer
        self.clock_skew_s = clock_skew_s
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.min_refresh_s = min_refresh_s
        self._lock = threading.Lock()
        self._refreshing = False
        self._last_refresh = 0.0
        self._keys: dict[str, Any] = self._fetch()

    def _fetch(self) -> dict[str, Any]:
        import urllib.request

        import jwt

        with urllib.request.urlopen(self.url, timeout=10) as response:
            data = response.read()
        keys = {}
        for key in jwt.PyJWKSet.from_json(data.decode("utf-8")).keys:
            if key.key_id:
                keys[key.key_id] = key
        return keys

    def _refresh_soon(self) -> None:
        import threading
        import time

        with self._lock:
            if self._refreshing or time.monotonic() - self._last_refresh < self.min_refresh_s:
                return
            self._refreshing = True
            self._last_refresh = time.monotonic()

        def run() -> None:
            try:
                self._keys = self._fetch()
            except Exception as exc:
                import logging

                logging.getLogger("odradek.security").warning(
                    "reading the JWKS at %s failed: %s", self.url, exc
                )
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="odradek-jwks", daemon=True).start()

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms) of a valid token; raises ValueError."""
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise ValueError(f"malformed token: {exc}") from None
        alg = header.get("alg")
        if alg not in self.ALGORITHMS:
            raise ValueError(f"algorithm {alg!r} is not accepted")
        key = self._keys.get(str(header.get("kid")))
        if key is None:
            self._refresh_soon()
            raise ValueError(f"no key {header.get('kid')!r} in the JWKS")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=list(self.expected_audience) or None,
                issuer=self.expected_issuer or None,
                leeway=self.clock_skew_s,
                options={
                    "require": ["exp"],
                    "verify_aud": bool(self.expected_audience),
                    "verify_iat": False,
                },
            )
        except jwt.PyJWTError as exc:
            raise ValueError(str(exc)) from None
        name = claims.get(self.sub_claim)
        if not isinstance(name, str) or not name:
            raise ValueError(f"no principal claim {self.sub_claim!r}")
        expires_ms = int(float(claims["exp"]) * 1000)
        if expires_ms + self.clock_skew_s * 1000 <= now_ms:
            raise ValueError("the token has expired")
        return name, expires_ms


class OAuthBearerJwksServer(OAuthBearerUnsecuredServer):
    """OAUTHBEARER with tokens validated by a ``JwksValidator``."""

    def __init__(self, validator: JwksValidator, now_ms: Callable[[], int]) -> None:
        super().__init__({}, now_ms)
        self._validator = validator
        self._principal_claim = "sub"

    def _validate(self, token: str) -> dict[str, Any]:
        name, expires_ms = self._validator.validate(token, self._now_ms())
        self.expires_ms = expires_ms
        return {self._principal_claim: name}
