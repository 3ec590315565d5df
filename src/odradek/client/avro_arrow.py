"""Confluent-framed Avro values decoded into Arrow columns: the typed-column half of
"Avro by schema id" for analytics (the Spark data source's ``value.format avro``).

``AvroArrowDecoder(registry, reader_schema)`` decodes each value with its writer schema (by the
id in its frame, fetched once) resolved to ``reader_schema`` (usually the subject's latest
version: ``SchemaRegistryClient.latest(subject)``), so records written with older compatible
schemas come out in the latest shape. ``arrow_type`` is the column type:

===========================  ===================================================
Avro                         Arrow
===========================  ===================================================
null/boolean/int/long        null/bool/int32/int64
float/double                 float32/float64
bytes / fixed(n)             binary / fixed_size_binary(n)
string, enum                 string (uuid: string)
array / map                  list / map<string, ...>
record                       struct (the top-level record: the column's struct)
[null, T] / [T, null]        T, nullable
other unions                 string: the value as JSON (no single Arrow type fits)
date                         date32
time-millis / time-micros    time32[ms] / time64[us]
timestamp-millis / -micros   timestamp[ms/us, UTC]
local-timestamp-millis/-us   timestamp[ms/us] (no time zone)
decimal(p, s) on bytes       decimal128(p, s)
===========================  ===================================================

``decode(values, positions)`` returns (array, errors): ``mode="PERMISSIVE"`` (Spark's default)
puts null in the array and the reason in ``errors`` (for a ``_corrupt_record`` column) for a value
that cannot be decoded; ``mode="FAILFAST"`` raises ``SerializationError`` naming the schema id and
the position (``positions[i]``, e.g. ``topic/partition/offset``). ``positions`` is indexed only
for values that fail, so it may be a lazy sequence.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from .avro import AvroDeserializer, SchemaRegistryClient, SerializationError

__all__ = ["AvroArrowDecoder", "arrow_type"]

_PRIMITIVE = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def _decimal_default(scale: int) -> Callable[[Any], Any]:
    """Decimals: a field default comes from fastavro as the JSON string of its bytes (the
    big-endian two's-complement unscaled value, one character per byte), not as a Decimal."""

    def fix(v: Any) -> Any:
        if isinstance(v, str):
            unscaled = int.from_bytes(v.encode("latin-1"), "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-scale)
        return v

    return fix


def _type_and_fix(
    schema: Any, named: dict[str, Any]
) -> tuple[pa.DataType, Callable[[Any], Any] | None]:
    """(Arrow type, converter for decoded values or None when they fit as they are)."""
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema], None
        return _type_and_fix(named[schema], named)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _type_and_fix(branches[0], named)
        return pa.string(), lambda v: None if v is None else json.dumps(v, default=_json_default)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _type_and_fix(kind, named)
    if kind in ("record", "error", "enum", "fixed"):
        name = schema.get("name", "")
        ns = schema.get("namespace")
        named[name] = schema
        if ns and "." not in name:
            named[f"{ns}.{name}"] = schema
    if logical == "decimal" and kind in ("bytes", "fixed"):
        scale = int(schema.get("scale", 0))
        return pa.decimal128(int(schema["precision"]), scale), _decimal_default(scale)
    if logical == "date" and kind == "int":
        return pa.date32(), None
    if logical == "time-millis" and kind == "int":
        return pa.time32("ms"), None
    if logical == "time-micros" and kind == "long":
        return pa.time64("us"), None
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return pa.timestamp("ms" if logical == "timestamp-millis" else "us", tz="UTC"), None
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return pa.timestamp("ms" if logical == "local-timestamp-millis" else "us"), None
    if logical == "uuid" and kind == "string":
        return pa.string(), lambda v: None if v is None else str(v)
    if kind in _PRIMITIVE:
        return _PRIMITIVE[kind], None
    if kind == "enum":
        return pa.string(), None
    if kind == "fixed":
        return pa.binary(int(schema["size"])), None
    if kind == "array":
        item, fix = _type_and_fix(schema["items"], named)
        if fix is None:
            return pa.list_(item), None
        return pa.list_(item), lambda v: None if v is None else [fix(x) for x in v]
    if kind == "map":
        value, fix = _type_and_fix(schema["values"], named)
        if fix is None:
            return pa.map_(pa.string(), value), None
        return pa.map_(
            pa.string(), value
        ), lambda v: None if v is None else {k: fix(x) for k, x in v.items()}
    if kind in ("record", "error"):
        fields, fixes = [], {}
        for f in schema.get("fields", []):
            t, fix = _type_and_fix(f["type"], named)
            fields.append(pa.field(f["name"], t, nullable=True))
            if fix is not None:
                fixes[f["name"]] = fix
        if not fixes:
            return pa.struct(fields), None

        fixed = tuple(fixes.items())

        def fix_record(v: Any) -> Any:
            if v is None:
                return None
            for k, f in fixed:  # in place: the dict is fastavro's fresh output
                if k in v:
                    v[k] = f(v[k])
            return v

        return pa.struct(fields), fix_record
    raise ValueError(f"no Arrow type for Avro schema {schema!r}")


def arrow_type(schema: str | Mapping[str, Any] | list[Any]) -> pa.DataType:
    """The Arrow type of values of the Avro ``schema`` (JSON text or parsed)."""
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    return _type_and_fix(parsed, {})[0]


class AvroArrowDecoder:
    def __init__(
        self,
        registry: str | SchemaRegistryClient,
        reader_schema: str | Mapping[str, Any] | list[Any],
        *,
        mode: str = "PERMISSIVE",
    ) -> None:
        if mode not in ("PERMISSIVE", "FAILFAST"):
            raise ValueError(f"mode must be PERMISSIVE or FAILFAST, not {mode!r}")
        self.mode = mode
        parsed = json.loads(reader_schema) if isinstance(reader_schema, str) else reader_schema
        self.arrow_type, self._fix = _type_and_fix(parsed, {})
        self._de = AvroDeserializer(registry, parsed)

    def decode(
        self, values: Sequence[bytes | None], positions: Sequence[str] | None = None
    ) -> tuple[pa.Array, list[str | None]]:
        out: list[Any] = []
        errors: list[str | None] = []
        for i, data in enumerate(values):
            if data is None:
                out.append(None)
                errors.append(None)
                continue
            try:
                value = self._de.decode(data)
            except SerializationError as first:
                err = first
                if positions is not None:  # decode again for the message naming the position
                    try:
                        self._de.decode(data, None, f" at {positions[i]}")
                    except SerializationError as located:
                        err = located
                if self.mode == "FAILFAST":
                    raise err from None
                out.append(None)
                errors.append(str(err))
                continue
            out.append(self._fix(value) if self._fix is not None else value)
            errors.append(None)
        return pa.array(out, type=self.arrow_type), errors
