"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka serves them: credentials and
the server side of one exchange, sans I/O.

Credentials are stored as Kafka stores them (``ScramCredentialUtils``): never the password,
the string ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` under the key
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` of the user's config entity (``/config/users/<user>``).
Iterations are 4096..16384 (Kafka's ``ScramMechanism`` bounds).

``ScramServer`` is one exchange: ``client_first(bytes) -> server-first bytes`` then
``client_final(bytes) -> server-final bytes``; any failure raises ``AuthenticationError``
with one message whether the user is unknown or the proof is wrong (an unknown user gets a
salt derived from the name and a per-process secret, so the first answer looks the same).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "AuthenticationError",
    "ScramCredential",
    "ScramServer",
    "scram_credential",
]

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""Kafka's SCRAM mechanism names -> hashlib names."""
MECHANISM_TYPES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""KIP-554's mechanism numbers (DescribeUserScramCredentials / AlterUserScramCredentials)."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

_FAKE_SECRET = secrets.token_bytes(32)


class AuthenticationError(Exception):
    """Authentication failed; the message is what the client is told (Kafka's wording)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """A stored SCRAM credential (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """Kafka's string form, ``salt=..,stored_key=..,server_key=..,iterations=..``."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                base64.b64decode(fields["salt"]),
                base64.b64decode(fields["stored_key"]),
                base64.b64decode(fields["server_key"]),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def salted_password(hash_name: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC-<hash>."""
    return hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


def credential_from_salted(
    hash_name: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential for a salted password (KIP-554's AlterUserScramCredentials sends it)."""
    client_key = _hmac(hash_name, salted, b"Client Key")
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = _hmac(hash_name, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def scram_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for ``password`` (a random 32-byte salt unless given)."""
    hash_name = MECHANISMS[mechanism]
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = salt if salt is not None else os.urandom(32)
    salted = salted_password(hash_name, password.encode("utf-8"), salt, iterations)
    return credential_from_salted(hash_name, salted, salt, iterations)


def _parse_attrs(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in text.split(","):
        if len(item) < 2 or item[1] != "=":
            raise AuthenticationError(f"Invalid SCRAM message attribute {item[:16]!r}")
        out.append((item[0], item[2:]))
    return out


def _saslname(name: str) -> str:
    """RFC 5802's saslname decoding: ``=2C`` -> ``,``, ``=3D`` -> ``=``; any other ``=`` is
    invalid."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationError("Invalid username in SCRAM client-first message")
    out = name.replace("=2C", ",").replace("=3D", "=")
    return out


class ScramServer:
    """One SCRAM exchange, server side. ``lookup(username)`` returns the user's credential for
    this mechanism or None; ``nonce`` makes the server nonce (injected in tests)."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] | None = None,
    ) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self._lookup = lookup
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self.username: str | None = None
        self.authorization_id: str = ""
        self.token_auth = False
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce_full = ""
        self.complete = False

    @property
    def failure_message(self) -> str:
        return (
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )

    def client_first(self, message: bytes) -> bytes:
        """``[gs2-header]n=<user>,r=<nonce>[,extensions]`` -> ``r=..,s=..,i=..``."""
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError("Invalid SCRAM client-first message") from None
        parts = text.split(",", 2)
        if (
            len(parts) != 3
            or parts[0] not in ("n", "y")
            or not (parts[1] == "" or parts[1].startswith("a="))
        ):
            raise AuthenticationError("Invalid SCRAM client-first message")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self.authorization_id = parts[1][2:] if parts[1] else ""
        bare = parts[2]
        attrs = _parse_attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise AuthenticationError("Invalid SCRAM client-first message")
        username = _saslname(attrs[0][1])
        for key, value in attrs[2:]:
            # extensions (Kafka: tokenauth=true for delegation tokens, not served here)
            if key == "t" and value.startswith("okenauth"):
                self.token_auth = True
        if self.token_auth:
            raise AuthenticationError("Delegation token authentication is not supported")
        if self.authorization_id and self.authorization_id != username:
            raise AuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.username = username
        credential = self._lookup(username)
        self._known = credential is not None
        if credential is None:
            # answer as for a real user: a stable salt derived from the name
            salt = _hmac("sha256", _FAKE_SECRET, username.encode("utf-8"))
            credential = ScramCredential(salt, b"", b"", MIN_ITERATIONS)
        self._credential = credential
        self._client_first_bare = bare
        self._nonce_full = attrs[1][1] + self._nonce()
        self._server_first = (
            f"r={self._nonce_full},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        return self._server_first.encode("utf-8")

    def client_final(self, message: bytes) -> bytes:
        """``c=..,r=..,p=..`` -> ``v=<server signature>``; raises AuthenticationError."""
        credential = self._credential
        if credential is None:
            raise AuthenticationError("SCRAM client-final message before client-first")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationError(self.failure_message) from None
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise AuthenticationError("Invalid SCRAM client-final message")
        attrs = dict(_parse_attrs(without_proof))
        try:
            channel = base64.b64decode(attrs.get("c", ""), validate=True)
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise AuthenticationError("Invalid SCRAM client-final message") from None
        # Kafka 3.x's check (endsWith): librdkafka before 2.6.1 sends the client nonce twice
        # (client nonce + the whole server nonce); the server's part must still be all there
        if not attrs.get("r", "").endswith(self._nonce_full):
            raise AuthenticationError("Invalid SCRAM client-final message: nonce mismatch")
        if channel != self._gs2_header.encode("utf-8"):
            raise AuthenticationError("Invalid SCRAM client-final message: channel binding")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if not self._known or len(proof) != len(signature):
            raise AuthenticationError(self.failure_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise AuthenticationError(self.failure_message)
        server_signature = _hmac(self._hash, credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
