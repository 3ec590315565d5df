"""``KafkaPrincipal``: who a connection is, as Kafka names it (``User:alice``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "KafkaPrincipal"]


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal: its type (``User``) and name; ``str()`` is ``"<type>:<name>"``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
"""The principal of a connection that did not authenticate (PLAINTEXT, SSL without client auth)."""
