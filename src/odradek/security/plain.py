"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainServerCallbackHandler`` checks it: the users are the
``user_<name>="<password>"`` options of the listener's ``PlainLoginModule`` JAAS entry.

The client's one message is ``[authzid] NUL username NUL password``; an authzid other than the
username fails. Wrong user and wrong password get the same message.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.security.scram import AuthenticationError

__all__ = ["PlainServer"]

INVALID = "Authentication failed: Invalid username or password"


class PlainServer:
    """One PLAIN exchange; ``users`` maps user name -> password."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        """The client's message -> the (empty) answer; raises AuthenticationError."""
        parts = message.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationError(INVALID) from None
        if not username:
            raise AuthenticationError("Authentication failed: username not specified")
        if not password:
            raise AuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare against something either way: the time does not tell whether the user exists
        ok = hmac.compare_digest(
            (expected if expected is not None else "\x00" + password).encode(), password.encode()
        )
        if expected is None or not ok:
            raise AuthenticationError(INVALID)
        if authzid and authzid != username:
            raise AuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.username = username
        self.complete = True
        return b""
