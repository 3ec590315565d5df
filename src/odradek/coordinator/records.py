"""The records the group coordinator keeps in ``__consumer_offsets``, in Kafka's formats.

Every record of ``__consumer_offsets`` is a key and a value (a null value is a tombstone).
Both start with an int16 schema version. Strings are int16 length + UTF-8 (length -1 =
null), bytes are int32 length + data, arrays are int32 count + elements, all big-endian.
These are Kafka's non-flexible formats (``OffsetCommitKey.json`` … ``GroupMetadataValue.json``
in Apache Kafka's ``group-coordinator`` module), so a Kafka tool can read our log and we can
read logs Kafka wrote with these versions.

Keys::

    OffsetCommitKey   v0/v1: version int16, group string, topic string, partition int32
    GroupMetadataKey  v2   : version int16, group string

Values::

    OffsetCommitValue v0: offset int64, metadata string, commit_timestamp int64
                      v1: offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
                      v2: offset int64, metadata string, commit_timestamp int64
                      v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    GroupMetadataValue v0..v3: protocol_type string, generation int32, protocol nullable string,
                      leader nullable string, [v2+] current_state_timestamp int64,
                      members array of
                        member_id string, [v3+] group_instance_id nullable string,
                        client_id string, client_host string, [v1+] rebalance_timeout int32,
                        session_timeout int32, subscription bytes, assignment bytes

We write OffsetCommitKey v1 + OffsetCommitValue v3 and GroupMetadataKey v2 +
GroupMetadataValue v3, and read every version above. Records with other key versions
(e.g. transaction markers of other coordinators) are skipped on replay.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from odradek.protocol.records import encode_records, finish_batch

__all__ = [
    "GroupMetadataRecord",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetAndMetadata",
    "OffsetCommitRecord",
    "Record",
    "build_batch",
    "decode_record",
    "encode_record",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (OffsetCommitValue)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1  # v1 only; kept for completeness, not written


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberMetadataValue, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """An offset commit; ``value`` None is a tombstone (offset deleted)."""

    group_id: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """A group's metadata; ``value`` None is a tombstone (group deleted)."""

    group_id: str
    value: GroupMetadataValue | None


Record = OffsetCommitRecord | GroupMetadataRecord


# -- primitives -----------------------------------------------------------------------------


def _str(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode()
    return _I16.pack(len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return _I32.pack(-1)
    return _I32.pack(len(b)) + bytes(b)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def nstr(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        if self.pos + n > len(self.buf):
            raise ValueError("string runs past the end of the record")
        s = bytes(self.buf[self.pos : self.pos + n]).decode()
        self.pos += n
        return s

    def str(self) -> str:
        s = self.nstr()
        return "" if s is None else s

    def bytes(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        if self.pos + n > len(self.buf):
            raise ValueError("bytes run past the end of the record")
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b


# -- encoding -------------------------------------------------------------------------------


def encode_offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _str(group_id) + _str(topic) + _I32.pack(partition)
    )


def encode_offset_commit_value(v: OffsetAndMetadata) -> bytes:
    return b"".join(
        (
            _I16.pack(OFFSET_COMMIT_VALUE_VERSION),
            _I64.pack(v.offset),
            _I32.pack(v.leader_epoch),
            _str(v.metadata),
            _I64.pack(v.commit_timestamp_ms),
        )
    )


def encode_group_metadata_key(group_id: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _str(group_id)


def encode_group_metadata_value(v: GroupMetadataValue) -> bytes:
    parts = [
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _str(v.protocol_type),
        _I32.pack(v.generation),
        _str(v.protocol),
        _str(v.leader),
        _I64.pack(v.current_state_timestamp_ms),
        _I32.pack(len(v.members)),
    ]
    for m in v.members:
        parts += [
            _str(m.member_id),
            _str(m.group_instance_id),
            _str(m.client_id),
            _str(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(parts)


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    """(key, value) bytes of a record; value None for a tombstone."""
    if isinstance(record, OffsetCommitRecord):
        key = encode_offset_commit_key(record.group_id, record.topic, record.partition)
        return key, None if record.value is None else encode_offset_commit_value(record.value)
    key = encode_group_metadata_key(record.group_id)
    return key, None if record.value is None else encode_group_metadata_value(record.value)


# -- decoding -------------------------------------------------------------------------------


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 2):
        offset = r.i64()
        metadata = r.str()
        return OffsetAndMetadata(offset, -1, metadata, r.i64())
    if version == 1:
        offset = r.i64()
        metadata = r.str()
        commit = r.i64()
        return OffsetAndMetadata(offset, -1, metadata, commit, r.i64())
    if version == 3:
        offset = r.i64()
        epoch = r.i32()
        metadata = r.str()
        return OffsetAndMetadata(offset, epoch, metadata, r.i64())
    raise ValueError(f"unknown OffsetCommitValue version {version}")


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id = r.str()
        client_host = r.str()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = r.bytes()
        assignment = r.bytes()
        members.append(
            MemberMetadataValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def decode_record(key: bytes | None, value: bytes | None) -> Record | None:
    """The record for a (key, value) pair of ``__consumer_offsets``; None if not ours."""
    if key is None or len(key) < 2:
        return None
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        group_id = r.str()
        topic = r.str()
        partition = r.i32()
        return OffsetCommitRecord(
            group_id, topic, partition, None if value is None else decode_offset_commit_value(value)
        )
    if version == 2:
        group_id = r.str()
        return GroupMetadataRecord(
            group_id, None if value is None else decode_group_metadata_value(value)
        )
    return None


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: s[0]*31^(n-1) + … + s[n-1] over UTF-16 code units, int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(hashCode) % n`` (Kafka).

    Kafka's ``Utils.abs`` maps Integer.MIN_VALUE to 0 instead of overflowing.
    """
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


def iter_pairs(records: Iterator[tuple[bytes | None, bytes | None]]) -> Iterator[Record]:
    """Decode (key, value) pairs, skipping those that are not group coordinator records."""
    for key, value in records:
        rec = decode_record(key, value)
        if rec is not None:
            yield rec


# -- record batches -------------------------------------------------------------------------


def build_batch(
    pairs: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int, compression: int = 0
) -> bytes:
    """One RecordBatch v2 of (key, value) records, all stamped ``timestamp_ms``: no headers,
    producer id -1, base offset 0 and leader epoch -1 (the log stamps both); ``compression``
    is the codec (``offsets.topic.compression.codec``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    data, count, max_ts = encode_records(((k, v, (), timestamp_ms) for k, v in pairs), timestamp_ms)
    return finish_batch(data, count, timestamp_ms, max_ts, compression=compression)
