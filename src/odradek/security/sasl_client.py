"""The client side of SASL, sans I/O: what a broker sends when it connects to another broker
over SASL_PLAINTEXT / SASL_SSL (``sasl.mechanism.inter.broker.protocol``).

``SaslClient(mechanism, username, password)``: ``first()`` is the first token, ``respond
(challenge)`` the next one (None: done); ``check_final(challenge)`` verifies SCRAM's server
signature. The frames are SaslHandshake v1 and SaslAuthenticate v1 (request header v1,
client id ``broker-<id>``), encoded and decoded here with Kafka's layouts::

    SaslHandshake v1     request: mechanism string       response: error int16, mechanisms [string]
    SaslAuthenticate v1  request: auth_bytes bytes       response: error int16, message nullable
                                                                   string, auth_bytes bytes,
                                                                   session_lifetime_ms int64
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from dataclasses import dataclass

from odradek.security.scram import MECHANISMS, AuthenticationError, salted_password

__all__ = ["SaslClient", "decode_authenticate", "decode_handshake", "encode_request"]

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _H.pack(len(data)) + data


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str, body: bytes
) -> bytes:
    """A framed request with header v1."""
    frame = struct.pack(">hhi", api_key, version, correlation_id) + _string(client_id) + body
    return _I.pack(len(frame)) + frame


def handshake_body(mechanism: str) -> bytes:
    return _string(mechanism)


def authenticate_body(token: bytes) -> bytes:
    return _I.pack(len(token)) + token


def decode_handshake(body: bytes) -> tuple[int, list[str]]:
    """A SaslHandshake v1 response body (after the correlation id) -> (error, mechanisms)."""
    (error,) = _H.unpack_from(body, 0)
    (count,) = _I.unpack_from(body, 2)
    pos, mechanisms = 6, []
    for _ in range(max(0, count)):
        (n,) = _H.unpack_from(body, pos)
        mechanisms.append(body[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return error, mechanisms


@dataclass(frozen=True)
class AuthenticateAnswer:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


def decode_authenticate(body: bytes) -> AuthenticateAnswer:
    """A SaslAuthenticate v1 response body (after the correlation id)."""
    (error,) = _H.unpack_from(body, 0)
    (n,) = _H.unpack_from(body, 2)
    pos = 4
    message = None
    if n >= 0:
        message = body[pos : pos + n].decode("utf-8", "replace")
        pos += n
    (size,) = _I.unpack_from(body, pos)
    pos += 4
    token = body[pos : pos + max(0, size)]
    pos += max(0, size)
    lifetime = struct.unpack_from(">q", body, pos)[0] if len(body) >= pos + 8 else 0
    return AuthenticateAnswer(error, message, bytes(token), lifetime)


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class SaslClient:
    """PLAIN or SCRAM-SHA-256/512, client side."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        if mechanism != "PLAIN" and mechanism not in MECHANISMS:
            raise ValueError(f"mechanism {mechanism} is not supported between brokers")
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._server_signature = b""

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            return b"\x00" + self.username.encode() + b"\x00" + self.password.encode()
        self._client_first_bare = f"n={_escape(self.username)},r={self._nonce}"
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes:
        """SCRAM's client-final message for the server-first ``challenge``."""
        hash_name = MECHANISMS[self.mechanism]
        server_first = challenge.decode()
        attrs = dict(item.split("=", 1) for item in server_first.split(","))
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self._nonce):
            raise AuthenticationError("SCRAM server nonce does not extend the client's")
        salted = salted_password(hash_name, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hash_name).digest()
        stored_key = hashlib.new(hash_name, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, hash_name).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", hash_name).digest()
        self._server_signature = hmac.new(server_key, auth_message, hash_name).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check_final(self, challenge: bytes) -> None:
        """Verify SCRAM's server-final ``v=<signature>`` (a broker must not talk to an impostor)."""
        text = challenge.decode()
        if not text.startswith("v=") or not hmac.compare_digest(
            base64.b64decode(text[2:]), self._server_signature
        ):
            raise AuthenticationError("SCRAM server signature does not verify")
