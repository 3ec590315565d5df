"""Compatibility levels and the check Confluent runs before registering a schema.

=========================  ================================================================
level                      the new schema must ...
=========================  ================================================================
BACKWARD (default)         read data written with the latest version
BACKWARD_TRANSITIVE        read data written with every version
FORWARD                    write data the latest version can read
FORWARD_TRANSITIVE         write data every version can read
FULL                       both BACKWARD and FORWARD against the latest version
FULL_TRANSITIVE            both against every version
NONE                       nothing
=========================  ================================================================

Only live (not soft-deleted) versions count. ``check`` returns Confluent's message list: the
incompatibilities against the first version that fails (newest first), then
``{oldSchemaVersion: N}``, ``{oldSchema: '...'}`` and ``{compatibility: 'LEVEL'}``; an empty
list means compatible.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["DEFAULT_LEVEL", "LEVELS", "ParsedSchema", "check"]

LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_LEVEL = "BACKWARD"


class ParsedSchema(Protocol):
    schema_type: str
    canonical: str

    def normalized(self) -> str: ...

    def read_compatibility(self, writer: Any) -> list[str]: ...


def check(level: str, new: ParsedSchema, previous: Sequence[tuple[int, ParsedSchema]]) -> list[str]:
    """Messages explaining why ``new`` breaks ``level`` against ``previous`` ((version, schema),
    newest first); [] when compatible."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[:1]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    for version, old in against:
        if old.schema_type != new.schema_type:
            messages = [
                f"{{errorType:'TYPE_MISMATCH', description:'Incompatible schema type "
                f"{new.schema_type} against {old.schema_type}'}}"
            ]
        else:
            messages = []
            if backward:
                messages += new.read_compatibility(old)
            if forward:
                messages += old.read_compatibility(new)
        if messages:
            return [
                *messages,
                f"{{oldSchemaVersion: {version}}}",
                f"{{oldSchema: '{old.canonical}'}}",
                f"{{compatibility: '{level}'}}",
            ]
    return []
