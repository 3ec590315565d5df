"""REST routers of the schema registry, one module per Confluent resource.

Each module lists its ``ROUTES``: (method, path pattern, handler). A pattern is a tuple of path
segments where ``{name}`` captures one URL-decoded segment. A handler takes a ``Call`` and
returns the JSON value to answer with status 200, or a ``Raw`` body; it raises
``RegistryError`` for Confluent's error answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..service import SchemaRegistry

__all__ = ["Call", "Handler", "Raw", "Route", "flag", "page"]


@dataclass(slots=True)
class Call:
    registry: SchemaRegistry
    params: dict[str, str]
    query: dict[str, str]
    body: Any = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Raw:
    """A body sent as is (``GET /schemas/ids/{id}/schema`` answers the schema text itself)."""

    body: bytes


Handler = Callable[[Call], Awaitable[Any]]
Route = tuple[str, tuple[str, ...], Handler]


def flag(call: Call, name: str, default: bool = False) -> bool:
    """A boolean query parameter: ``true`` in any case is true (Java's Boolean.parseBoolean)."""
    value = call.query.get(name)
    return default if value is None else value.strip().lower() == "true"


def page(call: Call, items: list[Any]) -> list[Any]:
    """``offset`` and ``limit`` (-1 or absent: all) applied to a list."""
    try:
        offset = max(0, int(call.query.get("offset", "0")))
        limit = int(call.query.get("limit", "-1"))
    except ValueError:
        return items
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def schema_json(rec: Any) -> dict[str, Any]:
    """A subject version as Confluent's ``Schema`` entity (schemaType left out for AVRO)."""
    out: dict[str, Any] = {"subject": rec.subject, "version": rec.version, "id": rec.id}
    if rec.schema_type != "AVRO":
        out["schemaType"] = rec.schema_type
    if rec.references:
        out["references"] = [r.to_json() for r in rec.references]
    out["schema"] = rec.schema
    return out


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
