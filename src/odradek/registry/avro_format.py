"""Avro schemas in the registry: parsing (``avro``), Confluent's stored form, normalization and
reader/writer compatibility (``avro.compatibility``, the checker Karapace uses as well).

The stored form (``canonical``) is what Java Avro's ``Schema.toString()`` prints, which is what
Confluent stores and serves: compact JSON; a primitive without properties is the bare type name
(``{"type":"string"}`` becomes ``"string"``); for a named type ``type``, ``name`` (short),
``namespace`` (only where it differs from the enclosing one), ``doc``, then ``fields`` /
``symbols`` / ``size``, other properties, ``aliases``; for a field ``name``, ``type``, ``doc``,
``default``, ``order`` (when not ascending), ``aliases``, other properties. Two registrations
whose stored forms are equal are the same schema (same id).

``normalized`` (``?normalize=true``) also writes every name fully qualified without
``namespace`` and drops ``doc``, so schemas that differ only in how they spell names or in
documentation become equal.

References (named types defined in other subjects) are parsed first, in order, into the same
name table, so the referring schema may use their names.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import avro.compatibility
import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

__all__ = ["AvroSchema", "parse_avro"]

PRIMITIVES = frozenset(["null", "boolean", "int", "long", "float", "double", "bytes", "string"])
_NAMED = frozenset(["record", "error", "enum", "fixed"])
_RESERVED_FIELD = frozenset(["name", "type", "doc", "default", "order", "aliases"])


_RECORDING = threading.local()
_incompatible = avro.compatibility.incompatible


def _recording_incompatible(
    kind: avro.compatibility.SchemaIncompatibilityType, message: str, location: list[str]
) -> avro.compatibility.SchemaCompatibilityResult:
    """``avro.compatibility.incompatible`` that also notes (kind, message, path) in order: the
    checker's result keeps messages and paths in sets, which loses which belongs to which."""
    found = getattr(_RECORDING, "found", None)
    if found is not None:
        path = "/".join(location)
        found.append((kind.name, message, path[1:] if len(location) > 1 else path))
    return _incompatible(kind, message, location)


avro.compatibility.incompatible = _recording_incompatible  # type: ignore[assignment]

_DESCRIPTIONS = {
    "reader_field_missing_default_value": "The field '{info}' at path '{path}' in the new schema "
    "has no default value and is missing in the old schema",
    "type_mismatch": "The type (path '{path}') of a field in the new schema does not match with "
    "the old schema",
    "name_mismatch": "The name of the schema has changed (path '{path}')",
    "fixed_size_mismatch": "The size of FIXED type field at path '{path}' in the new schema does "
    "not match with the old schema",
    "missing_enum_symbols": "The new schema is missing enum symbols '{info}' at path '{path}' in "
    "the old schema",
    "missing_union_branch": "The new schema is missing a type inside a union field at path "
    "'{path}' in the old schema",
}
"""Confluent's description of each incompatibility (``{info}``: the checker's detail)."""


class AvroSchema:
    schema_type = "AVRO"

    def __init__(self, parsed: avro.schema.Schema, raw: Any, canonical: str) -> None:
        self.parsed = parsed
        self.raw = raw
        self.canonical = canonical

    def normalized(self) -> str:
        return _dumps(_java(self.raw, None, qualify=True))

    def read_compatibility(self, writer: Any) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema ([] = it can),
        each message in Confluent's ``{errorType:..., description:..., additionalInfo:...}`` form."""
        if not isinstance(writer, AvroSchema):
            return ["{errorType:'TYPE_MISMATCH', description:'not an Avro schema'}"]
        found: list[tuple[str, str, str]] = []
        _RECORDING.found = found
        try:
            checker_type: Any = ReaderWriterCompatibilityChecker  # avro's code is untyped
            result = checker_type().get_compatibility(self.parsed, writer.parsed)
        finally:
            _RECORDING.found = None
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        out = []
        for kind, info, path in dict.fromkeys(found):
            text = _DESCRIPTIONS.get(kind, "incompatible at path '{path}'").format(
                info=info, path=path
            )
            out.append(
                f"{{errorType:'{kind.upper()}', description:'{text}', additionalInfo:'{info}'}}"
            )
        return out or ["{errorType:'TYPE_MISMATCH', description:'incompatible'}"]


def parse_avro(text: str, references: Sequence[str] = ()) -> AvroSchema:
    """Parse ``text`` (JSON) with the named types of ``references`` (schema strings, in
    dependency order) known; ``ValueError`` with the parser's reason when invalid."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"Invalid schema {text}, details: {exc}") from None
    names = avro.name.Names(validate_names=True)
    try:
        for ref in references:
            avro.schema.make_avsc_object(json.loads(ref), names)
        parsed = avro.schema.make_avsc_object(raw, names)
    except (avro.errors.AvroException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"Invalid schema {text}, details: {exc}") from None
    return AvroSchema(parsed, raw, _dumps(_java(raw, None, qualify=False)))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _split(name: str, namespace: str | None, enclosing: str | None) -> tuple[str, str | None]:
    """(short name, namespace) of a named type's declaration."""
    if "." in name:
        ns, _, short = name.rpartition(".")
        return short, ns or None
    if namespace is not None:
        return name, namespace or None
    return name, enclosing


def _java(node: Any, enclosing: str | None, *, qualify: bool) -> Any:
    """``node`` re-emitted in Java Avro's ``toString()`` order (see the module docstring)."""
    if isinstance(node, str):
        if node in PRIMITIVES or qualify is False:
            return node
        return node if "." in node or not enclosing else f"{enclosing}.{node}"
    if isinstance(node, list):
        return [_java(x, enclosing, qualify=qualify) for x in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if isinstance(kind, (dict, list)):
        return (
            _java(kind, enclosing, qualify=qualify)
            if len(node) == 1
            else _java_other(node, enclosing, qualify)
        )
    if kind in PRIMITIVES:
        props = {k: v for k, v in node.items() if k != "type"}
        return kind if not props else {"type": kind, **props}
    if kind in _NAMED:
        short, ns = _split(str(node.get("name", "")), node.get("namespace"), enclosing)
        out: dict[str, Any] = {"type": kind}
        if qualify:
            out["name"] = f"{ns}.{short}" if ns else short
        else:
            out["name"] = short
            if ns != enclosing and (ns or enclosing):
                out["namespace"] = ns or ""
        if "doc" in node and not qualify:
            out["doc"] = node["doc"]
        if kind in ("record", "error"):
            out["fields"] = [_java_field(f, ns, qualify) for f in node.get("fields", [])]
        elif kind == "enum":
            out["symbols"] = node.get("symbols")
            if "default" in node:
                out["default"] = node["default"]
        else:
            out["size"] = node.get("size")
        skip = {
            "type",
            "name",
            "namespace",
            "doc",
            "fields",
            "symbols",
            "size",
            "aliases",
            "default",
        }
        for k, v in node.items():
            if k not in skip:
                out[k] = v
        if node.get("aliases"):
            out["aliases"] = node["aliases"]
        return out
    return _java_other(node, enclosing, qualify)


def _java_other(node: dict[str, Any], enclosing: str | None, qualify: bool) -> Any:
    kind = node.get("type")
    out: dict[str, Any] = {
        "type": _java(kind, enclosing, qualify=qualify) if not isinstance(kind, str) else kind
    }
    if kind == "array":
        out["items"] = _java(node.get("items"), enclosing, qualify=qualify)
    elif kind == "map":
        out["values"] = _java(node.get("values"), enclosing, qualify=qualify)
    elif isinstance(kind, str) and kind not in PRIMITIVES and kind not in _NAMED:
        # a reference to a named type written as {"type": "Name"}
        out["type"] = _java(kind, enclosing, qualify=qualify)
    for k, v in node.items():
        if k not in ("type", "items", "values"):
            out[k] = v
    return out


def _java_field(f: Any, enclosing: str | None, qualify: bool) -> Any:
    if not isinstance(f, dict):
        return f
    out: dict[str, Any] = {
        "name": f.get("name"),
        "type": _java(f.get("type"), enclosing, qualify=qualify),
    }
    if "doc" in f and not qualify:
        out["doc"] = f["doc"]
    if "default" in f:
        out["default"] = f["default"]
    if f.get("order", "ascending") != "ascending":
        out["order"] = f["order"]
    if f.get("aliases"):
        out["aliases"] = f["aliases"]
    for k, v in f.items():
        if k not in _RESERVED_FIELD:
            out[k] = v
    return out
