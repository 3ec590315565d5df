"""The client's request/response codec (no I/O).

Requests are kio dataclasses built for the version negotiated with each broker; ``build``
constructs one from keyword arguments, dropping fields the chosen version does not have and
converting ints to ``timedelta`` for Kafka's duration fields, so one call site serves every
version. Produce requests, the hot path, have a hand-written encoder that writes the record
bytes without copying them through kio.

Frame: int32 size, request header (v1, or v2 for flexible versions: api_key i16, api_version
i16, correlation_id i32, client_id nullable int16 string, + empty tagged fields for v2), body.
Response: int32 size, correlation_id i32, tagged fields when flexible (never for ApiVersions),
body.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

__all__ = [
    "API_KEYS",
    "CLIENT_VERSIONS",
    "build",
    "decode_response",
    "encode_produce_request",
    "encode_request",
    "request_module",
    "response_header_length",
]

API_KEYS = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "SyncGroup": 14,
    "DescribeGroups": 15,
    "ListGroups": 16,
    "ApiVersions": 18,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "InitProducerId": 22,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "CreatePartitions": 37,
    "DeleteGroups": 42,
    "IncrementalAlterConfigs": 44,
    "OffsetDelete": 47,
}

# (min, max) version this client can speak for each API key. The negotiated version is the
# highest one both the broker (ApiVersions) and this table allow.
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 9),  # Produce (v3+: record batch v2; hand-written encoder)
    1: (4, 12),  # Fetch (v13+ addresses topics by id)
    2: (1, 7),  # ListOffsets
    3: (1, 12),  # Metadata
    8: (2, 8),  # OffsetCommit
    9: (1, 7),  # OffsetFetch (v8+ batches groups)
    10: (0, 3),  # FindCoordinator (v4+ batches keys)
    11: (0, 7),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 4),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 5),  # DeleteTopics (v6 uses topic ids)
    22: (0, 4),  # InitProducerId
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
}

_FLEXIBLE_FROM = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3,
    18: 3, 19: 5, 20: 4, 22: 2, 32: 4, 33: 2, 37: 2, 42: 2, 44: 1, 47: 99,
}  # fmt: skip


def is_flexible(api_key: int, version: int) -> bool:
    return version >= _FLEXIBLE_FROM.get(api_key, 99)


@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.request)


@cache
def _response_reader(api_key: int, version: int) -> Any:
    mod = load_payload_module(api_key, version, EntityType.response)
    cls = next(
        v
        for v in vars(mod).values()
        if isinstance(v, type) and getattr(v, "__type__", None) is EntityType.response
    )
    return entity_reader(cls)


@cache
def _fields(cls: type) -> dict[str, tuple[str, bool]]:
    """field name -> (kafka_type, required)."""
    out = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out[f.name] = (f.metadata.get("kafka_type", ""), required)
    return out


def build(cls: type, /, **kwargs: Any) -> Any:
    """Construct kio entity ``cls`` from ``kwargs``, dropping keys the class does not have.

    ints given for ``timedelta_*`` fields are milliseconds. A nested field may be given as a
    list of dicts: each is built with the nested class of the same version (resolved via the
    field's type annotation name in the module of ``cls``).
    """
    fields = _fields(cls)
    args = {}
    for name, value in kwargs.items():
        if name not in fields:
            continue
        ktype = fields[name][0]
        if ktype.startswith("timedelta") and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        elif ktype == "datetime_i64" and isinstance(value, int):
            value = datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
        elif isinstance(value, list):
            value = tuple(value)
        args[name] = value
    return cls(**args)


def nested(mod: ModuleType, cls_name: str, /, **kwargs: Any) -> Any:
    return build(getattr(mod, cls_name), **kwargs)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def _header(api_key: int, version: int, correlation_id: int, client_id: bytes) -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if is_flexible(api_key, version):
        head += b"\x00"
    return head


def encode_request(entity: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Size-prefixed frame (header + body) for the kio request ``entity``."""
    api_key = int(entity.__api_key__)
    version = int(entity.__version__)
    cid = (client_id or "").encode()
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(_header(api_key, version, correlation_id, cid))
    _writer(type(entity))(buf, entity)  # type: ignore[arg-type]
    data = buf.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    del data
    return buf.getvalue()


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_produce_request(
    version: int,
    correlation_id: int,
    client_id: str | None,
    acks: int,
    timeout_ms: int,
    topic_data: dict[str, list[tuple[int, bytes | memoryview]]],
) -> list[bytes | memoryview]:
    """Produce request v3-v9 as a list of buffers (records not copied). First 4 bytes: size."""
    flexible = version >= 9
    parts: list[bytes | memoryview] = []
    cid = (client_id or "").encode()
    head = bytearray(_header(0, version, correlation_id, cid))
    # transactional_id: null
    head += b"\x00" if flexible else b"\xff\xff"
    head += struct.pack(">hi", acks, timeout_ms)
    head += _uvarint(len(topic_data) + 1) if flexible else struct.pack(">i", len(topic_data))
    cur = head
    for topic, partitions in topic_data.items():
        tname = topic.encode()
        if flexible:
            cur += _uvarint(len(tname) + 1) + tname + _uvarint(len(partitions) + 1)
        else:
            cur += struct.pack(">h", len(tname)) + tname + struct.pack(">i", len(partitions))
        for index, records in partitions:
            cur += struct.pack(">i", index)
            n = len(records)
            cur += _uvarint(n + 1) if flexible else struct.pack(">i", n)
            parts.append(bytes(cur))
            parts.append(records)
            cur = bytearray(b"\x00" if flexible else b"")  # partition tagged fields
        if flexible:
            cur += b"\x00"  # topic tagged fields
    if flexible:
        cur += b"\x00"  # request tagged fields
    parts.append(bytes(cur))
    size = sum(len(p) for p in parts)
    parts.insert(0, struct.pack(">i", size))
    return parts


def response_header_length(api_key: int, version: int, frame: bytes | memoryview) -> int:
    """Bytes of the response header at the start of ``frame`` (after the size prefix)."""
    if api_key == 18 or not is_flexible(api_key, version):
        return 4
    pos = 4
    count, pos = _read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(frame, pos)
        size, pos = _read_uvarint(frame, pos)
        pos += size
    return pos


def _read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> Any:
    """Decode a response frame (without size prefix, with header) into a kio entity."""
    start = response_header_length(api_key, version, frame)
    entity, _end = _response_reader(api_key, version)(frame, start)
    return entity


def decode_api_versions_fallback(frame: bytes | memoryview) -> Any:
    """An ApiVersions answer to an unsupported version is in v0 format."""
    entity, _end = _response_reader(18, 0)(frame, 4)
    return entity
