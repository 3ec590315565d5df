"""The authenticated identity of a connection, as Kafka names it.

A principal is a ``(principal_type, name)`` pair printed ``"<type>:<name>"``;
Kafka's default builder only ever produces type ``"User"``. A connection on a
PLAINTEXT listener (or an SSL listener without a client certificate) is
``User:ANONYMOUS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

__all__ = ["ANONYMOUS", "KafkaPrincipal"]


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal such as ``User:alice``; immutable and hashable (usable as a key)."""

    principal_type: str
    name: str

    USER_TYPE: ClassVar[str] = "User"
    ANONYMOUS: ClassVar[KafkaPrincipal]

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def from_string(cls, text: str) -> KafkaPrincipal:
        """Parse ``"<type>:<name>"`` (the name may itself contain ``:``)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"expected a principal as <type>:<name>, got {text!r}")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        """The principal ``User:<name>``."""
        return cls(cls.USER_TYPE, name)


KafkaPrincipal.ANONYMOUS = KafkaPrincipal(KafkaPrincipal.USER_TYPE, "ANONYMOUS")

ANONYMOUS = KafkaPrincipal.ANONYMOUS
"""The principal of a connection that did not authenticate (PLAINTEXT, SSL without client auth)."""
