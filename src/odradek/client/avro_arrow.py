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
[int, long] / [float, double]  int64 / float64 (also with null: nullable)
other unions                 struct<member0, member1, ...>: one field per non-null branch,
                             in order, the one the value is set, the others null (as Spark's
                             from_avro); null in the union: the struct is null
date                         date32
time-millis / time-micros    time32[ms] / time64[us]
timestamp-millis / -micros   timestamp[ms/us, UTC]
local-timestamp-millis/-us   timestamp[ms/us] (no time zone)
decimal(p, s) on bytes       decimal128(p, s)
===========================  ===================================================

Which branch of a union a value is: records, enums and fixed by their name (decoded with
fastavro's ``return_named_type`` when the schema has such a union), other branches by the
decoded value's Python type, the first branch in the union that takes it (an ``int`` in a
union with both ``int`` and ``long`` goes to ``int`` when it fits in 32 bits; a ``float`` to the
first of ``float``/``double``; a map and a record, when the writer schema had no union there,
by the record's field names).

``decode(values, positions)`` returns (array, errors): ``mode="PERMISSIVE"`` (Spark's default)
puts null in the array and the reason in ``errors`` (for a ``_corrupt_record`` column) for a value
that cannot be decoded; ``mode="FAILFAST"`` raises ``SerializationError`` naming the schema id and
the position (``positions[i]``, e.g. ``topic/partition/offset``). ``positions`` is indexed only
for values that fail, so it may be a lazy sequence.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
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


def _decimal_default(scale: int) -> Callable[[Any], Any]:
    """Decimals: a field default comes from fastavro as the JSON string of its bytes (the
    big-endian two's-complement unscaled value, one character per byte), not as a Decimal."""

    def fix(v: Any) -> Any:
        if isinstance(v, str):
            unscaled = int.from_bytes(v.encode("latin-1"), "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-scale)
        return v

    return fix


_NAMED = ("record", "error", "enum", "fixed")


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    """``schema`` with a reference to a named type replaced by its definition."""
    if isinstance(schema, str) and schema not in _PRIMITIVE:
        return named.get(schema, named.get(schema.rsplit(".", 1)[-1], schema))
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return _resolve(schema["type"], named)
    return schema


def _kind(schema: Any) -> tuple[str, str | None]:
    """(Avro type, logical type) of a resolved schema."""
    if isinstance(schema, str):
        return schema, None
    if isinstance(schema, list):
        return "union", None
    return str(schema.get("type")), schema.get("logicalType")


def _untag(v: Any) -> Any:
    """The value of fastavro's ``(name, value)`` pair (``return_named_type``), else ``v``."""
    return v[1] if type(v) is tuple else v


_I32 = 1 << 31


def _accepts(schema: Any) -> Callable[[Any], bool]:
    """Whether a decoded (untagged) value can be one of this union branch's values."""
    kind, logical = _kind(schema)
    if logical == "decimal":
        return lambda v: isinstance(v, decimal.Decimal)
    if logical == "date":
        return lambda v: type(v) is datetime.date
    if logical in ("time-millis", "time-micros"):
        return lambda v: isinstance(v, datetime.time)
    if logical in ("timestamp-millis", "timestamp-micros"):
        return lambda v: isinstance(v, datetime.datetime) and v.tzinfo is not None
    if logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return lambda v: isinstance(v, datetime.datetime) and v.tzinfo is None
    if logical == "uuid":
        return lambda v: isinstance(v, uuid.UUID)
    if kind == "boolean":
        return lambda v: type(v) is bool
    if kind == "int":
        return lambda v: type(v) is int and -_I32 <= v < _I32
    if kind == "long":
        return lambda v: type(v) is int
    if kind in ("float", "double"):
        return lambda v: type(v) is float
    if kind == "string":
        return lambda v: isinstance(v, str)
    if kind == "bytes":
        return lambda v: isinstance(v, bytes)
    if kind == "enum":
        symbols = frozenset(schema.get("symbols", ()))
        return lambda v: isinstance(v, str) and v in symbols
    if kind == "fixed":
        size = int(schema.get("size", -1))
        return lambda v: isinstance(v, bytes) and len(v) == size
    if kind == "array":
        return lambda v: isinstance(v, list)
    if kind == "map":
        return lambda v: isinstance(v, dict)
    if kind in ("record", "error"):
        names = frozenset(f["name"] for f in schema.get("fields", ()))
        return lambda v: isinstance(v, dict) and v.keys() == names
    return lambda v: False


def _union(
    schema: list[Any], named: dict[str, Any], tagged: bool
) -> tuple[pa.DataType, Callable[[Any], Any] | None]:
    """Spark's from_avro mapping of a union (module table) and the converter that puts a
    decoded value in its branch's ``member<i>`` field."""
    branches = [b for b in schema if b != "null" and b != {"type": "null"}]
    if not branches:
        return pa.null(), None
    if len(branches) == 1:
        return _type_and_fix(branches[0], named, tagged)
    types_and_fixes = [_type_and_fix(b, named, tagged) for b in branches]  # registers names
    resolved = [_resolve(b, named) for b in branches]
    kinds = [_kind(r) for r in resolved]
    if len(kinds) == 2 and all(lg is None for _k, lg in kinds):
        plain = {k for k, _lg in kinds}
        if plain == {"int", "long"}:
            return pa.int64(), None
        if plain == {"float", "double"}:
            return pa.float64(), None
    fields = [pa.field(f"member{i}", t, nullable=True) for i, (t, _f) in enumerate(types_and_fixes)]
    keys = [f"member{i}" for i in range(len(branches))]
    fixes = [f for _t, f in types_and_fixes]
    by_name: dict[str, int] = {}
    for i, r in enumerate(resolved):
        if _kind(r)[0] in _NAMED:
            name = str(r.get("name", ""))
            ns = r.get("namespace")
            full = f"{ns}.{name}" if ns and "." not in name else name
            by_name.setdefault(full, i)
            by_name.setdefault(full.rsplit(".", 1)[-1], i)
    tests = [_accepts(r) for r in resolved]

    def branch(v: Any) -> tuple[int, Any]:
        if type(v) is tuple:
            name, inner = v
            i = by_name.get(name, by_name.get(str(name).rsplit(".", 1)[-1], -1))
            if i >= 0:
                return i, inner
            v = inner
        for i, test in enumerate(tests):
            if test(v):
                return i, v
        raise ValueError(f"no branch of union {schema!r} takes {v!r}")

    def fix_union(v: Any) -> Any:
        if v is None:
            return None
        i, inner = branch(v)
        f = fixes[i]
        return {keys[i]: f(inner) if f is not None else inner}

    return pa.struct(fields), fix_union


def _needs_tags(schema: Any, seen: set[int] | None = None) -> bool:
    """Whether ``schema`` has a union mapped to member fields with a named branch (its values
    must then be decoded with fastavro's ``return_named_type``)."""
    seen = set() if seen is None else seen
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) > 1 and any(
            (isinstance(b, str) and b not in _PRIMITIVE)
            or (isinstance(b, dict) and b.get("type") in _NAMED)
            for b in branches
        ):
            return True
        return any(_needs_tags(b, seen) for b in branches)
    if isinstance(schema, dict):
        if id(schema) in seen:
            return False
        seen.add(id(schema))
        return any(
            _needs_tags(x, seen)
            for x in (
                schema.get("type"),
                schema.get("items"),
                schema.get("values"),
                *(f.get("type") for f in schema.get("fields", ())),
            )
            if isinstance(x, (list, dict))
        )
    return False


def _type_and_fix(
    schema: Any, named: dict[str, Any], tagged: bool = False
) -> tuple[pa.DataType, Callable[[Any], Any] | None]:
    """(Arrow type, converter for decoded values or None when they fit as they are).
    ``tagged``: values are decoded with ``return_named_type``, so a record, enum or fixed
    value may come as ``(name, value)``: its converter takes the value out."""
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema], None
        return _type_and_fix(named[schema], named, tagged)
    if isinstance(schema, list):
        return _union(schema, named, tagged)
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _type_and_fix(kind, named, tagged)
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
        return pa.string(), _untag if tagged else None
    if kind == "fixed":
        return pa.binary(int(schema["size"])), _untag if tagged else None
    if kind == "array":
        item, fix = _type_and_fix(schema["items"], named, tagged)
        if fix is None:
            return pa.list_(item), None
        return pa.list_(item), lambda v: None if v is None else [fix(x) for x in v]
    if kind == "map":
        value, fix = _type_and_fix(schema["values"], named, tagged)
        if fix is None:
            return pa.map_(pa.string(), value), None
        return pa.map_(
            pa.string(), value
        ), lambda v: None if v is None else {k: fix(x) for k, x in v.items()}
    if kind in ("record", "error"):
        fields, fixes = [], {}
        for f in schema.get("fields", []):
            t, fix = _type_and_fix(f["type"], named, tagged)
            fields.append(pa.field(f["name"], t, nullable=True))
            if fix is not None:
                fixes[f["name"]] = fix
        if not fixes:
            return pa.struct(fields), _untag if tagged else None

        fixed = tuple(fixes.items())

        def fix_record(v: Any) -> Any:
            if v is None:
                return None
            if type(v) is tuple:
                v = v[1]
            for k, f in fixed:  # in place: the dict is fastavro's fresh output
                if k in v:
                    v[k] = f(v[k])
            return v

        return pa.struct(fields), fix_record
    raise ValueError(f"no Arrow type for Avro schema {schema!r}")


def arrow_type(schema: str | Mapping[str, Any] | list[Any]) -> pa.DataType:
    """The Arrow type of values of the Avro ``schema`` (JSON text or parsed)."""
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    return _type_and_fix(parsed, {}, _needs_tags(parsed))[0]


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
        tagged = _needs_tags(parsed)
        self.arrow_type, self._fix = _type_and_fix(parsed, {}, tagged)
        self._de = AvroDeserializer(registry, parsed, named_types=tagged)

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
                if self._fix is not None:
                    value = self._fix(value)
            except (SerializationError, ValueError) as first:
                err = (
                    first
                    if isinstance(first, SerializationError)
                    else SerializationError(f"{first}{' at ' + positions[i] if positions else ''}")
                )
                if positions is not None and isinstance(first, SerializationError):
                    try:  # decode again for the message naming the position
                        self._de.decode(data, None, f" at {positions[i]}")
                    except SerializationError as located:
                        err = located
                if self.mode == "FAILFAST":
                    raise err from None
                out.append(None)
                errors.append(str(err))
                continue
            out.append(value)
            errors.append(None)
        return pa.array(out, type=self.arrow_type), errors
