"""Avro by schema id in the ``odradek`` data source (``value.format`` / ``key.format`` avro).

Source: the driver resolves the reader schema of each Avro column once (``value.schema``, else
the latest version of the subject, ``<topic>-value`` / ``<topic>-key`` by TopicNameStrategy
unless ``value.subject`` / ``key.subject`` name it) and hands its text to the executors, which
decode each Confluent-framed value with its writer schema (by the id in the frame, fetched once
per process) resolved to the reader schema (``odradek.client.avro_arrow``). The column's Spark
type is the reader schema's, mapped as Spark's ``from_avro`` maps Avro:

=====================================  =================================================
Avro                                   Spark
=====================================  =================================================
boolean/int/long/float/double          boolean/int/bigint/float/double
bytes, fixed                           binary
string, enum, uuid                     string
record / array / map                   struct / array / map<string, ...>
[null, T] / [T, null]                  T, nullable
[int, long] / [float, double]          bigint / double
other unions                           struct<member0, member1, ...> (one nullable field per
                                       non-null branch, the value's branch set)
date                                   date
timestamp-millis / -micros             timestamp
local-timestamp-millis / -micros       timestamp_ntz
decimal(p, s)                          decimal(p, s)
time-millis / time-micros              int / bigint
=====================================  =================================================

Records that do not decode: ``mode`` PERMISSIVE (default) leaves the column null and puts the
reason (naming the schema id and ``topic/partition/offset``) in the ``_corrupt_record`` string
column; FAILFAST fails the task with that message.

Sink: the column (any Spark type; usually a struct) is encoded with a registered schema —
``value.schema`` (Avro JSON, or ``latest``: the subject's latest version), else derived from the
Spark type as Spark's ``to_avro`` does (record ``topLevelRecord``, nullable as ``[T, "null"]``) —
and framed with its id (magic 0 + 4-byte big-endian id).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = [
    "CORRUPT_RECORD",
    "AvroRead",
    "avro_spark_type",
    "decode_batch",
    "encode_column",
    "registry",
    "spark_avro_schema",
]

CORRUPT_RECORD = "_corrupt_record"

_lock = threading.Lock()
RegistryConfig = tuple[tuple[str, str], ...]
"""The registry client's settings (``SchemaRegistryClient(config=...)`` keys), sorted pairs."""
_registries: dict[tuple[str, RegistryConfig], Any] = {}
_decoders: dict[tuple[str, RegistryConfig, str, str], Any] = {}
_serializers: dict[tuple[str, RegistryConfig, str, str, bool], Any] = {}


def registry(url: str, config: RegistryConfig = ()) -> Any:
    """A ``SchemaRegistryClient`` for ``url`` with ``config`` (credentials, TLS), one per
    process and settings (its id cache is shared)."""
    key = (url, tuple(sorted(config)))
    with _lock:
        client = _registries.get(key)
        if client is None:
            # lazy: the client loads in the process that uses it
            from odradek.client.avro import SchemaRegistryClient

            client = _registries[key] = SchemaRegistryClient(url, config=dict(config))
        return client


def _spark_arrow(t: pa.DataType) -> pa.DataType:
    """The Arrow type whose Spark type is the column's: types Spark has no Arrow mapping for
    become the ones from_avro gives (time -> int/bigint, fixed -> binary, ms -> us)."""
    if pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _spark_arrow(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(_spark_arrow(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct(
            [pa.field(t.field(i).name, _spark_arrow(t.field(i).type)) for i in range(t.num_fields)]
        )
    return t


def avro_spark_type(schema: str) -> Any:
    """The Spark type of values of the Avro ``schema`` (JSON text), as the module table."""
    from pyspark.sql.pandas.types import from_arrow_type

    from odradek.client.avro_arrow import arrow_type

    return from_arrow_type(_spark_arrow(arrow_type(schema)), prefer_timestamp_ntz=True)


@dataclass(frozen=True, slots=True)
class AvroRead:
    """What executors need to decode a batch (picklable): registry URL, mode, the reader
    schema text of each Avro column (``"key"`` / ``"value"``) and the registry client's
    settings (credentials, TLS: ``registry``)."""

    url: str
    mode: str
    columns: tuple[tuple[str, str], ...]
    registry_config: RegistryConfig = ()


def _decoder(url: str, schema: str, mode: str, config: RegistryConfig = ()) -> Any:
    key = (url, config, schema, mode)
    with _lock:
        dec = _decoders.get(key)
    if dec is None:
        from odradek.client.avro_arrow import AvroArrowDecoder

        dec = AvroArrowDecoder(registry(url, config), schema, mode=mode)
        with _lock:
            _decoders[key] = dec
    return dec


class _Positions(Sequence[str]):
    """``topic/partition/offset`` of row i, formatted only when asked (for an error)."""

    def __init__(self, topic: str, partition: int, offsets: pa.Array) -> None:
        self.topic, self.partition, self.offsets = topic, partition, offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i: Any) -> Any:
        return f"{self.topic}/{self.partition}/{self.offsets[i].as_py()}"


def decode_batch(
    batch: pa.RecordBatch, topic: str, partition: int, avro: AvroRead, schema: pa.Schema
) -> pa.RecordBatch:
    """The source's raw ``batch`` with its Avro columns decoded, as ``schema`` (exactly the
    Arrow schema of the DataFrame, ``_corrupt_record`` included in PERMISSIVE mode)."""
    positions = _Positions(topic, partition, batch.column("offset"))
    decoded: dict[str, pa.Array] = {}
    corrupt: list[str | None] = [None] * batch.num_rows
    for column, reader_schema in avro.columns:
        array, errors = _decoder(avro.url, reader_schema, avro.mode, avro.registry_config).decode(
            batch.column(column).to_pylist(), positions
        )
        decoded[column] = array
        for i, e in enumerate(errors):
            if e is not None:
                corrupt[i] = e if corrupt[i] is None else f"{corrupt[i]}; {column}: {e}"
    arrays = []
    for f in schema:
        if f.name in decoded:
            a = decoded[f.name]
        elif f.name == CORRUPT_RECORD:
            a = pa.array(corrupt, type=pa.string())
        else:
            a = batch.column(f.name)
        arrays.append(a if a.type == f.type else a.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# -- the sink ------------------------------------------------------------------------------


def spark_avro_schema(dt: Any, name: str = "topLevelRecord", namespace: str = "") -> Any:
    """The Avro schema (parsed JSON) of Spark type ``dt``, as Spark's ``to_avro`` derives it:
    a struct is a record (``topLevelRecord`` at the top, nested ones named after their field in
    the parent's namespace); nullable fields are unions ``[T, "null"]``."""
    from pyspark.sql import types as T

    if isinstance(dt, T.BooleanType):
        return "boolean"
    if isinstance(dt, T.ByteType | T.ShortType | T.IntegerType):
        return "int"
    if isinstance(dt, T.LongType):
        return "long"
    if isinstance(dt, T.FloatType):
        return "float"
    if isinstance(dt, T.DoubleType):
        return "double"
    if isinstance(dt, T.StringType):
        return "string"
    if isinstance(dt, T.BinaryType):
        return "bytes"
    if isinstance(dt, T.DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(dt, T.TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(dt, T.TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(dt, T.DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": dt.precision,
            "scale": dt.scale,
        }
    if isinstance(dt, T.ArrayType):
        item = spark_avro_schema(dt.elementType, name, namespace)
        return {"type": "array", "items": [item, "null"] if dt.containsNull else item}
    if isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise ValueError(f"Avro maps have string keys; cannot encode {dt.simpleString()}")
        value = spark_avro_schema(dt.valueType, name, namespace)
        return {"type": "map", "values": [value, "null"] if dt.valueContainsNull else value}
    if isinstance(dt, T.StructType):
        child_ns = f"{namespace}.{name}" if namespace else name
        fields = []
        for f in dt.fields:
            t = spark_avro_schema(f.dataType, f.name, child_ns)
            fields.append({"name": f.name, "type": [t, "null"] if f.nullable else t})
        record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return record
    raise ValueError(f"no Avro type for Spark type {dt.simpleString()}")


def _fixer(t: pa.DataType) -> Any:
    """A function turning ``to_pylist`` values of ``t`` into what fastavro takes (maps: dicts,
    not lists of pairs), or None when they fit as they are."""
    if pa.types.is_map(t):
        item = _fixer(t.item_type)
        if item is None:
            return lambda v: None if v is None else dict(v)
        return lambda v: None if v is None else {k: item(x) for k, x in v}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _fixer(t.value_type)
        return None if item is None else (lambda v: None if v is None else [item(x) for x in v])
    if pa.types.is_struct(t):
        fixes = {t.field(i).name: _fixer(t.field(i).type) for i in range(t.num_fields)}
        fixes = {k: f for k, f in fixes.items() if f is not None}
        if not fixes:
            return None
        return lambda v: (
            None if v is None else {k: (fixes[k](x) if k in fixes else x) for k, x in v.items()}
        )
    return None


def serializer(
    url: str, subject: str, schema: str, auto_register: bool, config: RegistryConfig = ()
) -> Any:
    """An ``AvroSerializer`` for (subject, schema), one per process."""
    key = (url, config, subject, schema, auto_register)
    with _lock:
        ser = _serializers.get(key)
    if ser is None:
        from odradek.client.avro import AvroSerializer

        ser = AvroSerializer(
            registry(url, config), schema, subject=subject, auto_register=auto_register
        )
        with _lock:
            _serializers[key] = ser
    return ser


def encode_column(array: pa.Array, ser: Any) -> pa.Array:
    """Confluent-framed Avro of each value of ``array`` (null stays null: a tombstone)."""
    fix = _fixer(array.type)
    out: list[bytes | None] = []
    for v in array.to_pylist():
        if v is None:
            out.append(None)
            continue
        out.append(ser(fix(v) if fix is not None else v))
    return pa.array(out, type=pa.binary())


def check_schema(schema: str) -> Mapping[str, Any] | str | list[Any]:
    """Parse ``schema`` with fastavro (ValueError naming the problem)."""
    import fastavro

    try:
        parsed = json.loads(schema)
        fastavro.parse_schema(parsed)
    except Exception as exc:
        raise ValueError(f"invalid Avro schema: {exc}") from None
    return parsed
