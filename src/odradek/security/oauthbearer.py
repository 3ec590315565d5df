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
