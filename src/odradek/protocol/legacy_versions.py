"""Request versions Kafka 3.9 serves and kio 0.6.5 cannot decode (KIP-896 dropped them in 4.0).

One table, :data:`LEGACY`, maps each (api key, old version) to

* the old version's request and response layouts, written as small field lists (the old
  versions are all non-flexible: int16-length strings, int32-length arrays and bytes, no
  tagged fields), field names being kio's (snake_case, ``timeout`` for ``timeoutMs`` and
  so on, so one name serves both sides);
* the *target*: the lowest version kio has, whose request class the existing handler takes;
* a fix-up per direction where the versions differ in meaning, not only in fields.

Decoding reads the old body into plain dicts, fills the target's fields the old version
lacks with Kafka's defaults, and builds kio's entity of the target version, so the handler
runs unchanged and answers with the target's response class. Encoding turns that response
into dicts, applies the fix-up (dropping fields, moving or mapping error codes as Kafka does
for that version) and writes the old layout. A table and two generic walkers read better
than one hand-written class per version: a version is a dozen lines of data, and every rule
that is not plain data is a named function next to its entry.

What each old version means (Kafka 3.9's behaviour, and where odradek differs):

* Produce v0-v2 -> v3: no transactional id. Records are magic 0/1 message sets, converted to
  one v2 batch per partition here (legacy_records.message_set_to_batch); a partition whose
  message set is corrupt goes to the handler with no records and is answered with the
  conversion's error (CORRUPT_MESSAGE 2, INVALID_RECORD 87, UNSUPPORTED_COMPRESSION_TYPE 76).
  The response drops throttle time (v0) and log append time (v0-v1).
* Fetch v0-v3 -> v4 with READ_UNCOMMITTED and max_bytes 2^31-1 (v0-v2). The response drops
  last stable offset and aborted transactions and throttle time (v0); records are
  down-converted lazily to magic 0 (v0-v1) or magic 1 (v2-v3)
  (legacy_records.LazyDownConversion); KAFKA_STORAGE_ERROR becomes NOT_LEADER_OR_FOLLOWER,
  a zstd batch UNSUPPORTED_COMPRESSION_TYPE.
* ListOffsets v0 -> v1: max_num_offsets is kept aside; the answer is ``old_style_offsets`` =
  [offset] (or [] when there is none or max_num_offsets is 0). For -1 (latest) and -2
  (earliest) that is what Kafka answers with max_num_offsets 1, what every client sends.
  Kafka answers a timestamp >= 0 from segment modification times (several offsets); odradek
  answers it with v1's exact lookup (one offset).
* OffsetCommit v0-v1 -> v2: v0 is a commit without generation or member (a simple consumer,
  generation -1, member ""); v1's per-partition commit timestamp is dropped (Kafka only used
  it for expiry) and retention is the broker default (-1).
* OffsetFetch v0 -> v1 (the same fields; v0 read ZooKeeper in Kafka, odradek serves both
  from the group coordinator). Versions below 2 cannot carry a top-level error: OffsetFetch
  v1's partitions already hold it, so nothing moves.
* CreateTopics v0-v1 -> v2: v0 has no validate_only (false); the response drops error
  messages (v0) and throttle time (v0-v1).
* DeleteTopics v0 -> v1: the response drops throttle time.
* OffsetForLeaderEpoch v0-v1 -> v2 with current_leader_epoch -1 (no fencing, as Kafka does
  for those versions); the response drops throttle time, and the leader epoch (v0).
* DescribeConfigs v0 -> v1: include_synonyms false; the response's per-config ``is_default``
  is config_source == DEFAULT_CONFIG (5), as Kafka computes it; synonyms are dropped.

Entry points: :func:`legacy_codec` returns a :class:`LegacyCodec` (``decode`` and
``encode_response``) for an (api key, version) in :data:`LEGACY`; :data:`LEGACY_VERSIONS`
lists the old versions per api key.

Broker integration (odradek.broker.connection does this): when a version is below the API's
``min_request_version`` and ``legacy_codec(key, version)`` has a codec, parse the request
header as v1, decode the body with ``codec.decode(frame, pos) -> (legacy, size)``, call the
API's handler with ``legacy.request`` (its ``__version__`` is the target;
``ctx.header.api_version`` stays the client's), send nothing when the handler returns None
(Produce acks=0), else write response header v0 and the parts of
``codec.encode_response(response, legacy, records_source_of=...)`` (Fetch: LazyDownConversion
parts, whose ``chunks()`` are written as the socket drains; ``records_source_of`` turns a
storage region into a ``read(position, size)``). The API's ``error_response`` answer goes
through ``encode_response`` the same way. ApiVersions advertises every API from 0.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import typing
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from odradek.protocol.errors import InvalidRequestError
from odradek.protocol.legacy_records import (
    LazyDownConversion,
    RecordsSource,
    UnsupportedCompressionTypeError,
    message_set_to_batch,
    records_magic,
)
from odradek.protocol.records import CorruptRecordError, InvalidRecordError

__all__ = [
    "LEGACY",
    "LEGACY_VERSIONS",
    "Array",
    "LegacyCodec",
    "LegacyRequest",
    "legacy_codec",
    "read_body",
    "write_body",
]

# ---------------------------------------------------------------------------------------------
# Layouts: a body is a sequence of (name, type); a type is a primitive name or an Array.


@dataclasses.dataclass(frozen=True)
class Array:
    """int32 count (-1 = null when ``nullable``), then the elements: a primitive or a layout."""

    of: Any
    nullable: bool = False


Layout = Sequence[tuple[str, Any]]

_STRUCTS = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "bool": struct.Struct(">?"),
}
_I16 = _STRUCTS["int16"]
_I32 = _STRUCTS["int32"]
_MAX_COUNT = 1 << 20


def _read_value(kind: Any, buf: memoryview, pos: int) -> tuple[Any, int]:
    if isinstance(kind, str):
        fixed = _STRUCTS.get(kind)
        if fixed is not None:
            return fixed.unpack_from(buf, pos)[0], pos + fixed.size
        if kind in ("string", "nullable_string"):
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            if n < 0:
                if n == -1 and kind == "nullable_string":
                    return None, pos
                raise InvalidRequestError(f"invalid string length {n}")
            if pos + n > len(buf):
                raise InvalidRequestError("truncated string")
            return str(buf[pos : pos + n], "utf-8"), pos + n
        if kind == "records":
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
            if n < 0:
                if n != -1:
                    raise InvalidRequestError(f"invalid records length {n}")
                return None, pos
            if pos + n > len(buf):
                raise InvalidRequestError("truncated records")
            return bytes(buf[pos : pos + n]), pos + n
        raise AssertionError(kind)
    if isinstance(kind, Array):
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
        if count < 0:
            if count == -1 and kind.nullable:
                return None, pos
            raise InvalidRequestError(f"invalid array length {count}")
        if count > _MAX_COUNT:
            raise InvalidRequestError(f"array length {count} is too large")
        items = []
        for _ in range(count):
            item, pos = _read_value(kind.of, buf, pos)
            items.append(item)
        return items, pos
    out: dict[str, Any] = {}
    for name, sub in kind:
        out[name], pos = _read_value(sub, buf, pos)
    return out, pos


def _write_value(kind: Any, value: Any, out: list[bytes]) -> None:
    if isinstance(kind, str):
        fixed = _STRUCTS.get(kind)
        if fixed is not None:
            out.append(fixed.pack(value))
        elif kind in ("string", "nullable_string"):
            if value is None:
                out.append(b"\xff\xff")
            else:
                raw = value.encode()
                out.append(_I16.pack(len(raw)))
                out.append(raw)
        elif kind == "records":
            if value is None:
                out.append(b"\xff\xff\xff\xff")
            else:
                out.append(_I32.pack(len(value)))
                out.append(bytes(value))
        else:
            raise AssertionError(kind)
    elif isinstance(kind, Array):
        if value is None:
            out.append(b"\xff\xff\xff\xff")
            return
        out.append(_I32.pack(len(value)))
        for item in value:
            _write_value(kind.of, item, out)
    else:
        for name, sub in kind:
            _write_value(sub, value[name], out)


def read_body(
    layout: Layout, data: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[dict[str, Any], int]:
    """Read a body laid out as ``layout``; return it as a dict and the position after it.
    InvalidRequestError when truncated or malformed."""
    buf = data if isinstance(data, memoryview) else memoryview(data)
    try:
        value, end = _read_value(layout, buf, pos)
    except UnicodeDecodeError:
        raise InvalidRequestError("string is not UTF-8") from None
    except struct.error as exc:
        raise InvalidRequestError(f"truncated request ({exc})") from None
    return value, end


def write_body(layout: Layout, value: dict[str, Any]) -> bytes:
    """Write ``value`` (a dict with at least the layout's names) as ``layout``."""
    out: list[bytes] = []
    _write_value(layout, value, out)
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# kio entities <-> dicts


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _element_class(hint: Any) -> type | None:
    """The entity class inside ``tuple[Entity, ...]`` (or its Optional), else None."""
    for arg in typing.get_args(hint) or ():
        if dataclasses.is_dataclass(arg):
            return arg  # type: ignore[return-value]
        inner = _element_class(arg)
        if inner is not None:
            return inner
    return None


def _to_kio_value(f: dataclasses.Field[Any], hint: Any, value: Any) -> Any:
    kafka_type = f.metadata.get("kafka_type")
    if value is None:
        return None
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64":
        if value < 0:
            return None
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    if kafka_type == "error_code":
        return ErrorCode(value)
    if isinstance(value, list):
        element = _element_class(hint)
        if element is not None:
            return tuple(build_entity(element, item) for item in value)
        return tuple(value)
    return value


def build_entity(cls: type, values: dict[str, Any]) -> Any:
    """kio entity ``cls`` from ``values`` (names absent fall back to the field's default)."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = _to_kio_value(f, hints[f.name], values[f.name])
    return cls(**kwargs)


def entity_to_dict(entity: Any) -> dict[str, Any]:
    """A kio entity as a dict of plain values (ms for timedeltas and datetimes, -1 for a
    null datetime, int for error codes, lists of dicts for nested entities)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type == "datetime_i64":
            value = -1 if value is None else int(value.timestamp() * 1000)
        elif isinstance(value, datetime.timedelta):
            value = int(value / datetime.timedelta(milliseconds=1))
        elif isinstance(value, tuple):
            value = [entity_to_dict(v) if dataclasses.is_dataclass(v) else v for v in value]
        elif isinstance(value, ErrorCode):
            value = int(value.value)
        out[f.name] = value
    return out


# ---------------------------------------------------------------------------------------------
# The decoded request


@dataclasses.dataclass(slots=True)
class LegacyRequest:
    """An old-version request as the broker passes it on.

    ``request`` is kio's entity of ``target_version`` (what the handler takes); ``version``
    the version the client sent; ``body`` the old body as read (dicts), which the response
    encoder consults (ListOffsets v0's max_num_offsets, Fetch's fetch offsets);
    ``partition_errors`` maps (topic, partition) to an error code the response must carry
    instead of the handler's (Produce v0-v2 message sets that could not be converted).
    """

    api_key: int
    version: int
    target_version: int
    request: Any
    body: dict[str, Any]
    partition_errors: dict[tuple[str, int], int] = dataclasses.field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Per-API fix-ups

RecordsSourceOf = Callable[[Any], tuple[RecordsSource, int]]
"""Turns a Fetch response's records object (bytes, memoryview, or the broker's FileRegion)
into (source, length) for LazyDownConversion; the broker supplies it for file regions."""


def _bytes_source(records: Any) -> tuple[RecordsSource, int]:
    if isinstance(records, (bytes, bytearray, memoryview)):
        return records, len(records)
    raise TypeError(f"no records source for {type(records).__name__}: pass records_source_of")


def _produce_request(body: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    for topic in body["topic_data"]:
        for partition in topic["partition_data"]:
            records = partition["records"]
            if records is None or records_magic(records) == 2:
                continue
            try:
                partition["records"] = message_set_to_batch(records)
            except UnsupportedCompressionTypeError:
                code = ErrorCode.unsupported_compression_type
            except CorruptRecordError:
                code = ErrorCode.corrupt_message
            except InvalidRecordError:
                code = ErrorCode.invalid_record
            else:
                continue
            legacy.partition_errors[(topic["name"], partition["index"])] = int(code.value)
            partition["records"] = None
    return {**body, "transactional_id": None}


def _produce_response(out: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    errors = legacy.partition_errors
    if errors:
        for topic in out["responses"]:
            for partition in topic["partition_responses"]:
                code = errors.get((topic["name"], partition["index"]))
                if code is not None:
                    partition["error_code"] = code
                    partition["base_offset"] = -1
    return out


def _list_offsets_response(out: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    wanted = {
        (t["name"], p["partition_index"]): p["max_num_offsets"]
        for t in legacy.body["topics"]
        for p in t["partitions"]
    }
    for topic in out["topics"]:
        for partition in topic["partitions"]:
            limit = wanted.get((topic["name"], partition["partition_index"]), 1)
            offset = partition["offset"]
            has = offset >= 0 and partition["error_code"] == 0 and limit > 0
            partition["old_style_offsets"] = [offset] if has else []
    return out


def _offset_commit_request(body: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    body.setdefault("generation_id_or_member_epoch", -1)
    body.setdefault("member_id", "")
    body["retention_time"] = -1
    return body


def _offset_for_leader_epoch_request(body: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    for topic in body["topics"]:
        for partition in topic["partitions"]:
            partition["current_leader_epoch"] = -1  # v0-v1 cannot fence: no check
    return body


def _describe_configs_response(out: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    for result in out["results"]:
        for config in result["configs"]:
            config["is_default"] = config.get("config_source") == 5  # DEFAULT_CONFIG
    return out


# ---------------------------------------------------------------------------------------------
# The table


class LegacyEntry(NamedTuple):
    target_version: int
    request: Layout
    response: Layout
    request_fixup: Callable[[dict[str, Any], LegacyRequest], dict[str, Any]] | None = None
    response_fixup: Callable[[dict[str, Any], LegacyRequest], dict[str, Any]] | None = None


_THROTTLE = ("throttle_time", "int32")

_ACL_ENTRY_V0: Layout = (
    ("principal", "string"),
    ("host", "string"),
    ("operation", "int8"),
    ("permission_type", "int8"),
)

_PRODUCE_REQUEST: Layout = (
    ("acks", "int16"),
    ("timeout", "int32"),
    (
        "topic_data",
        Array(
            (
                ("name", "string"),
                ("partition_data", Array((("index", "int32"), ("records", "records")))),
            )
        ),
    ),
)


def _produce_response_layout(version: int) -> Layout:
    partition: list[tuple[str, Any]] = [
        ("index", "int32"),
        ("error_code", "int16"),
        ("base_offset", "int64"),
    ]
    if version >= 2:
        partition.append(("log_append_time", "int64"))
    layout: list[tuple[str, Any]] = [
        ("responses", Array((("name", "string"), ("partition_responses", Array(tuple(partition))))))
    ]
    if version >= 1:
        layout.append(_THROTTLE)
    return tuple(layout)


_FETCH_PARTITIONS = Array(
    (
        ("topic", "string"),
        (
            "partitions",
            Array(
                (
                    ("partition", "int32"),
                    ("fetch_offset", "int64"),
                    ("partition_max_bytes", "int32"),
                )
            ),
        ),
    )
)


def _fetch_request_layout(version: int) -> Layout:
    layout: list[tuple[str, Any]] = [
        ("replica_id", "int32"),
        ("max_wait", "int32"),
        ("min_bytes", "int32"),
    ]
    if version >= 3:
        layout.append(("max_bytes", "int32"))
    layout.append(("topics", _FETCH_PARTITIONS))
    return tuple(layout)


def _fetch_response_layout(version: int) -> Layout:
    partition = Array(
        (
            ("partition_index", "int32"),
            ("error_code", "int16"),
            ("high_watermark", "int64"),
            ("records", "records"),
        )
    )
    layout: list[tuple[str, Any]] = [
        ("responses", Array((("topic", "string"), ("partitions", partition))))
    ]
    if version >= 1:
        layout.insert(0, _THROTTLE)
    return tuple(layout)


def _fetch_request(body: dict[str, Any], legacy: LegacyRequest) -> dict[str, Any]:
    body.setdefault("max_bytes", 0x7FFFFFFF)
    body["isolation_level"] = 0
    return body


_OFFSET_COMMIT_PARTITION_V0 = (
    ("partition_index", "int32"),
    ("committed_offset", "int64"),
    ("committed_metadata", "nullable_string"),
)
_OFFSET_COMMIT_PARTITION_V1 = (
    ("partition_index", "int32"),
    ("committed_offset", "int64"),
    ("commit_timestamp", "int64"),
    ("committed_metadata", "nullable_string"),
)
_OFFSET_COMMIT_RESPONSE: Layout = (
    (
        "topics",
        Array(
            (
                ("name", "string"),
                ("partitions", Array((("partition_index", "int32"), ("error_code", "int16")))),
            )
        ),
    ),
)
_CREATE_TOPICS_TOPIC = Array(
    (
        ("name", "string"),
        ("num_partitions", "int32"),
        ("replication_factor", "int16"),
        ("assignments", Array((("partition_index", "int32"), ("broker_ids", Array("int32"))))),
        ("configs", Array((("name", "string"), ("value", "nullable_string")))),
    )
)
_DESCRIBE_CONFIGS_RESPONSE_V0: Layout = (
    _THROTTLE,
    (
        "results",
        Array(
            (
                ("error_code", "int16"),
                ("error_message", "nullable_string"),
                ("resource_type", "int8"),
                ("resource_name", "string"),
                (
                    "configs",
                    Array(
                        (
                            ("name", "string"),
                            ("value", "nullable_string"),
                            ("read_only", "bool"),
                            ("is_default", "bool"),
                            ("is_sensitive", "bool"),
                        )
                    ),
                ),
            )
        ),
    ),
)

LEGACY: dict[tuple[int, int], LegacyEntry] = {
    **{
        (0, v): LegacyEntry(
            3, _PRODUCE_REQUEST, _produce_response_layout(v), _produce_request, _produce_response
        )
        for v in range(3)
    },
    **{
        (1, v): LegacyEntry(4, _fetch_request_layout(v), _fetch_response_layout(v), _fetch_request)
        for v in range(4)
    },
    (2, 0): LegacyEntry(
        1,
        (
            ("replica_id", "int32"),
            (
                "topics",
                Array(
                    (
                        ("name", "string"),
                        (
                            "partitions",
                            Array(
                                (
                                    ("partition_index", "int32"),
                                    ("timestamp", "int64"),
                                    ("max_num_offsets", "int32"),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        (
            (
                "topics",
                Array(
                    (
                        ("name", "string"),
                        (
                            "partitions",
                            Array(
                                (
                                    ("partition_index", "int32"),
                                    ("error_code", "int16"),
                                    ("old_style_offsets", Array("int64")),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
        None,
        _list_offsets_response,
    ),
    (8, 0): LegacyEntry(
        2,
        (
            ("group_id", "string"),
            (
                "topics",
                Array((("name", "string"), ("partitions", Array(_OFFSET_COMMIT_PARTITION_V0)))),
            ),
        ),
        _OFFSET_COMMIT_RESPONSE,
        _offset_commit_request,
    ),
    (8, 1): LegacyEntry(
        2,
        (
            ("group_id", "string"),
            ("generation_id_or_member_epoch", "int32"),
            ("member_id", "string"),
            (
                "topics",
                Array((("name", "string"), ("partitions", Array(_OFFSET_COMMIT_PARTITION_V1)))),
            ),
        ),
        _OFFSET_COMMIT_RESPONSE,
        _offset_commit_request,
    ),
    (9, 0): LegacyEntry(
        1,
        (
            ("group_id", "string"),
            ("topics", Array((("name", "string"), ("partition_indexes", Array("int32"))))),
        ),
        (
            (
                "topics",
                Array(
                    (
                        ("name", "string"),
                        (
                            "partitions",
                            Array(
                                (
                                    ("partition_index", "int32"),
                                    ("committed_offset", "int64"),
                                    ("metadata", "nullable_string"),
                                    ("error_code", "int16"),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    ),
    **{
        (19, v): LegacyEntry(
            2,
            (("topics", Array(_CREATE_TOPICS_TOPIC.of)), ("timeout", "int32"))
            + ((("validate_only", "bool"),) if v >= 1 else ()),
            (
                (
                    "topics",
                    Array(
                        (("name", "string"), ("error_code", "int16"))
                        + ((("error_message", "nullable_string"),) if v >= 1 else ())
                    ),
                ),
            ),
        )
        for v in range(2)
    },
    (20, 0): LegacyEntry(
        1,
        (("topic_names", Array("string")), ("timeout", "int32")),
        (("responses", Array((("name", "string"), ("error_code", "int16")))),),
    ),
    (35, 0): LegacyEntry(  # DescribeLogDirs v0: v1's layout (v1 only throttles first)
        1,
        (
            (
                "topics",
                Array((("topic", "string"), ("partitions", Array("int32"))), nullable=True),
            ),
        ),
        (
            _THROTTLE,
            (
                "results",
                Array(
                    (
                        ("error_code", "int16"),
                        ("log_dir", "string"),
                        (
                            "topics",
                            Array(
                                (
                                    ("name", "string"),
                                    (
                                        "partitions",
                                        Array(
                                            (
                                                ("partition_index", "int32"),
                                                ("partition_size", "int64"),
                                                ("offset_lag", "int64"),
                                                ("is_future_key", "bool"),
                                            )
                                        ),
                                    ),
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    ),
    (34, 0): LegacyEntry(  # AlterReplicaLogDirs v0: v1's layout (v1 only throttles first)
        1,
        (
            (
                "dirs",
                Array(
                    (
                        ("path", "string"),
                        ("topics", Array((("name", "string"), ("partitions", Array("int32"))))),
                    )
                ),
            ),
        ),
        (
            _THROTTLE,
            (
                "results",
                Array(
                    (
                        ("topic_name", "string"),
                        (
                            "partitions",
                            Array((("partition_index", "int32"), ("error_code", "int16"))),
                        ),
                    )
                ),
            ),
        ),
    ),
    (32, 0): LegacyEntry(
        1,
        (
            (
                "resources",
                Array(
                    (
                        ("resource_type", "int8"),
                        ("resource_name", "string"),
                        ("configuration_keys", Array("string", nullable=True)),
                    )
                ),
            ),
        ),
        _DESCRIBE_CONFIGS_RESPONSE_V0,
        None,
        _describe_configs_response,
    ),
    **{
        (23, v): LegacyEntry(
            2,
            (
                (
                    "topics",
                    Array(
                        (
                            ("topic", "string"),
                            (
                                "partitions",
                                Array((("partition", "int32"), ("leader_epoch", "int32"))),
                            ),
                        )
                    ),
                ),
            ),
            (
                (
                    "topics",
                    Array(
                        (
                            ("topic", "string"),
                            (
                                "partitions",
                                Array(
                                    (("error_code", "int16"), ("partition", "int32"))
                                    + ((("leader_epoch", "int32"),) if v >= 1 else ())
                                    + (("end_offset", "int64"),)
                                ),
                            ),
                        )
                    ),
                ),
            ),
            _offset_for_leader_epoch_request,
        )
        for v in range(2)
    },
    # the ACL APIs' v0: v1 without pattern types (LITERAL; a v0 answer names no other)
    (29, 0): LegacyEntry(
        1,
        (
            ("resource_type_filter", "int8"),
            ("resource_name_filter", "nullable_string"),
            ("principal_filter", "nullable_string"),
            ("host_filter", "nullable_string"),
            ("operation", "int8"),
            ("permission_type", "int8"),
        ),
        (
            _THROTTLE,
            ("error_code", "int16"),
            ("error_message", "nullable_string"),
            (
                "resources",
                Array(
                    (
                        ("resource_type", "int8"),
                        ("resource_name", "string"),
                        ("acls", Array(_ACL_ENTRY_V0)),
                    )
                ),
            ),
        ),
    ),
    (30, 0): LegacyEntry(
        1,
        (
            (
                "creations",
                Array((("resource_type", "int8"), ("resource_name", "string"), *_ACL_ENTRY_V0)),
            ),
        ),
        (
            _THROTTLE,
            (
                "results",
                Array((("error_code", "int16"), ("error_message", "nullable_string"))),
            ),
        ),
    ),
    (31, 0): LegacyEntry(
        1,
        (
            (
                "filters",
                Array(
                    (
                        ("resource_type_filter", "int8"),
                        ("resource_name_filter", "nullable_string"),
                        ("principal_filter", "nullable_string"),
                        ("host_filter", "nullable_string"),
                        ("operation", "int8"),
                        ("permission_type", "int8"),
                    )
                ),
            ),
        ),
        (
            _THROTTLE,
            (
                "filter_results",
                Array(
                    (
                        ("error_code", "int16"),
                        ("error_message", "nullable_string"),
                        (
                            "matching_acls",
                            Array(
                                (
                                    ("error_code", "int16"),
                                    ("error_message", "nullable_string"),
                                    ("resource_type", "int8"),
                                    ("resource_name", "string"),
                                    *_ACL_ENTRY_V0,
                                )
                            ),
                        ),
                    )
                ),
            ),
        ),
    ),
}
"""(api key, old version) -> how to serve it through the target version's handler."""

LEGACY_VERSIONS: dict[int, range] = {}
for _key, _version in LEGACY:
    _old = LEGACY_VERSIONS.get(_key)
    LEGACY_VERSIONS[_key] = range(0, max(_version + 1, _old.stop if _old else 0))
"""api key -> the old versions served here (always 0 .. lowest kio version - 1)."""


# ---------------------------------------------------------------------------------------------
# The codec


class LegacyCodec:
    """Decode one old request version into kio's target version; encode the response back.

    Old versions are never flexible: request header v1, response header v0.
    """

    header_version = 1
    response_header_version = 0

    def __init__(self, api_key: int, version: int, entry: LegacyEntry) -> None:
        self.api_key = api_key
        self.version = version
        self.entry = entry
        self.target_class = load_request_schema(api_key, entry.target_version)

    def decode(self, frame: bytes | bytearray | memoryview, pos: int) -> tuple[LegacyRequest, int]:
        """Read the old body at ``frame[pos:]``; return the LegacyRequest and the bytes read.
        InvalidRequestError when the body is malformed or has trailing bytes."""
        body, end = read_body(self.entry.request, frame, pos)
        if end != len(frame):
            raise InvalidRequestError(f"{len(frame) - end} trailing bytes after the request body")
        legacy = LegacyRequest(self.api_key, self.version, self.entry.target_version, None, body)
        values = dict(body)
        if self.entry.request_fixup is not None:
            values = self.entry.request_fixup(values, legacy)
        try:
            legacy.request = build_entity(self.target_class, values)
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"invalid request: {exc}") from None
        return legacy, end - pos

    def encode_response(
        self,
        response: Any,
        legacy: LegacyRequest,
        *,
        records_source_of: RecordsSourceOf = _bytes_source,
    ) -> tuple[list[Any], int]:
        """The old version's response body for the handler's ``response`` as (parts, size):
        bytes, and for Fetch one :class:`LazyDownConversion` per partition with records
        (its ``chunks()`` yield exactly ``len()`` bytes). ``response`` is what the handler
        returned: a kio entity of the target version, or the target version's body already
        encoded (bytes, an object with ``parts`` as odradek.broker.registry.EncodedResponse, or
        a ``(parts, size)`` pair; Produce and OffsetCommit have hand-written encoders), which
        is read back with kio first. Fetch's v4 body is walked part by part instead, so its
        records objects are never copied before down-conversion."""
        if self.api_key == 1:
            return self._encode_fetch(response, legacy, records_source_of)
        if not hasattr(response, "__version__"):  # not a kio entity: an encoded body
            response = self._read_target_response(response)
        values = entity_to_dict(response)
        if self.entry.response_fixup is not None:
            values = self.entry.response_fixup(values, legacy)
        body = write_body(self.entry.response, values)
        return [body], len(body)

    def _read_target_response(self, response: Any) -> Any:
        if isinstance(response, (bytes, bytearray, memoryview)):
            parts: Sequence[Any] = (response,)
        else:
            parts = response.parts if hasattr(response, "parts") else response[0]
        body = b"".join(bytes(part) for part in parts)
        reader = entity_reader(load_response_schema(self.api_key, self.entry.target_version))
        entity, size = reader(body, 0)
        if size != len(body):
            raise ValueError(f"{len(body) - size} trailing bytes after the target response")
        return entity

    def _encode_fetch(
        self, response: Any, legacy: LegacyRequest, records_source_of: RecordsSourceOf
    ) -> tuple[list[Any], int]:
        parts = response.parts if hasattr(response, "parts") else response[0]
        decoded = parse_fetch_v4_parts(parts)
        to_magic = 0 if self.version <= 1 else 1
        offsets = {
            (t["topic"], p["partition"]): p["fetch_offset"]
            for t in legacy.body["topics"]
            for p in t["partitions"]
        }
        out: list[Any] = []
        size = 0
        head: list[bytes] = []
        if self.version >= 1:
            head.append(_I32.pack(decoded["throttle_time"]))
        head.append(_I32.pack(len(decoded["responses"])))
        for topic in decoded["responses"]:
            name = topic["topic"].encode()
            head.append(_I16.pack(len(name)) + name)
            head.append(_I32.pack(len(topic["partitions"])))
            for p in topic["partitions"]:
                code = p["error_code"]
                if code == ErrorCode.kafka_storage_error.value:
                    code = ErrorCode.not_leader_or_follower.value
                records = p["records"]
                lazy = None
                if records is not None and len(records) > 0 and code == 0:
                    source, length = records_source_of(records)
                    first_offset = offsets.get((topic["topic"], p["partition_index"]), -1)
                    try:
                        lazy = LazyDownConversion(source, length, to_magic, first_offset)
                    except UnsupportedCompressionTypeError:
                        code = ErrorCode.unsupported_compression_type.value
                    except (CorruptRecordError, InvalidRecordError):
                        code = ErrorCode.corrupt_message.value
                head.append(struct.pack(">ihq", p["partition_index"], code, p["high_watermark"]))
                length = 0 if lazy is None else len(lazy)
                head.append(_I32.pack(length))
                if length:
                    chunk = b"".join(head)
                    out.append(chunk)
                    out.append(lazy)
                    size += len(chunk) + length
                    head = []
        if head:
            chunk = b"".join(head)
            out.append(chunk)
            size += len(chunk)
        return out, size


def parse_fetch_v4_parts(parts: Sequence[Any]) -> dict[str, Any]:
    """Read a non-flexible Fetch v4 response body given as parts: bytes for the fixed fields,
    each non-empty records field a part of its own (odradek.protocol.fetch_response's output).
    Records objects come back untouched."""
    reader = _PartReader(parts)
    out: dict[str, Any] = {"throttle_time": reader.unpack(_I32), "responses": []}
    for _ in range(reader.unpack(_I32)):
        name = reader.take(reader.unpack(_I16)).decode()
        partitions = []
        for _ in range(reader.unpack(_I32)):
            index, code, hw, _lso = reader.unpack_many(struct.Struct(">ihqq"))
            aborted = reader.unpack(_I32)
            for _ in range(max(aborted, 0)):
                reader.take(16)
            length = reader.unpack(_I32)
            records = reader.records(length) if length > 0 else None
            partitions.append(
                {
                    "partition_index": index,
                    "error_code": code,
                    "high_watermark": hw,
                    "records": records,
                }
            )
        out["responses"].append({"topic": name, "partitions": partitions})
    return out


class _PartReader:
    def __init__(self, parts: Sequence[Any]) -> None:
        self.parts = list(parts)
        self.index = 0
        self.buf = b""
        self.pos = 0

    def _fill(self, n: int) -> None:
        while len(self.buf) - self.pos < n:
            if self.index >= len(self.parts):
                raise ValueError("Fetch response parts end early")
            part = self.parts[self.index]
            self.index += 1
            self.buf = self.buf[self.pos :] + bytes(part)
            self.pos = 0

    def take(self, n: int) -> bytes:
        self._fill(n)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def unpack(self, fmt: struct.Struct) -> int:
        return int(fmt.unpack(self.take(fmt.size))[0])

    def unpack_many(self, fmt: struct.Struct) -> tuple[Any, ...]:
        return fmt.unpack(self.take(fmt.size))

    def records(self, length: int) -> Any:
        if self.pos < len(self.buf):  # records inside a bytes part
            return self.take(length)
        part = self.parts[self.index]
        self.index += 1
        if len(part) != length:
            raise ValueError("records part does not match its length")
        return part


def legacy_codec(api_key: int, version: int) -> LegacyCodec | None:
    """The codec of an old (api key, version), or None when it is not in :data:`LEGACY`
    (keys come from peers: only the table's entries are ever cached)."""
    if (api_key, version) not in LEGACY:
        return None
    return _codec(api_key, version)


@cache
def _codec(api_key: int, version: int) -> LegacyCodec:
    return LegacyCodec(api_key, version, LEGACY[(api_key, version)])
