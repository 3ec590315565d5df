"""The records the transaction coordinator keeps in ``__transaction_state``, in Kafka's formats.

Every record is a key and a value (a null value is a tombstone: the transactional id expired).
Both start with an int16 version. Non-flexible fields: strings are int16 length + UTF-8, arrays
are int32 count + elements (-1 = null), all big-endian. Kafka's ``TransactionLogKey.json`` and
``TransactionLogValue.json`` (transaction-coordinator module)::

    TransactionLogKey   v0: version int16 = 0, transactional_id string
    TransactionLogValue v0: version int16 = 0, producer_id int64, producer_epoch int16,
                            transaction_timeout_ms int32, transaction_status int8,
                            transaction_partitions nullable array of
                              (topic string, partition_ids array of int32),
                            last_update_timestamp_ms int64, start_timestamp_ms int64
                        v1: the same fields, flexible (compact strings and arrays: uvarint
                            length + 1, 0 = null; an empty tagged-field section after each
                            partition entry), then tagged fields 0 previous_producer_id int64,
                            1 next_producer_id int64, 2 client_transaction_version int16
                            (written only when not the default -1 / -1 / 0)

As Kafka does, an Empty transaction is written with null partitions, every other state with an
array (grouped by topic). We write v0 (``TransactionConfig.value_version`` = 1 writes v1) and
read both. ``partition_for(transactional_id, n)`` is ``Utils.abs(String.hashCode) % n``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from odradek.coordinator.records import build_batch, partition_for
from odradek.coordinator.transaction.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionState,
)
from odradek.protocol._primitives import read_uvarint, uvarint

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionLogRecord",
    "TransactionLogValue",
    "build_batch",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
    "partition_for",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TAIL = struct.Struct(">qq")  # last update, start


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: tuple[tuple[str, int], ...] = ()  # sorted
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID  # v1 tag 0
    next_producer_id: int = NO_PRODUCER_ID  # v1 tag 1
    client_transaction_version: int = 0  # v1 tag 2


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """A transactional id's new state; ``value`` None is a tombstone (the id expired).

    ``last_producer_epoch`` is live only (Kafka's transit metadata): it is in neither format
    version, so a record read back from the log has -1 there, as Kafka's loader does.
    """

    transactional_id: str
    value: TransactionLogValue | None
    last_producer_epoch: int = field(default=NO_PRODUCER_EPOCH, compare=False)


# -- encoding -------------------------------------------------------------------------------


def _str(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


def _by_topic(partitions: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        topics.setdefault(topic, []).append(p)
    return list(topics.items())


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _str(transactional_id)


def encode_value(v: TransactionLogValue, version: int = 0) -> bytes:
    head = _HEAD.pack(v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.state.id)
    null = v.state is TransactionState.EMPTY
    topics = _by_topic(v.partitions)
    tail = _TAIL.pack(v.last_update_timestamp_ms, v.start_timestamp_ms)
    if version == 0:
        parts = [_I16.pack(0), head]
        if null:
            parts.append(_I32.pack(-1))
        else:
            parts.append(_I32.pack(len(topics)))
            for topic, ids in topics:
                parts += [_str(topic), _I32.pack(len(ids))]
                parts += [_I32.pack(p) for p in ids]
        parts.append(tail)
        return b"".join(parts)
    if version != 1:
        raise ValueError(f"unknown TransactionLogValue version {version}")
    parts = [_I16.pack(1), head]
    if null:
        parts.append(uvarint(0))
    else:
        parts.append(uvarint(len(topics) + 1))
        for topic, ids in topics:
            b = topic.encode()
            parts += [uvarint(len(b) + 1), b, uvarint(len(ids) + 1)]
            parts += [_I32.pack(p) for p in ids]
            parts.append(uvarint(0))  # the entry's tagged fields
    parts.append(tail)
    tagged: list[tuple[int, bytes]] = []
    if v.previous_producer_id != NO_PRODUCER_ID:
        tagged.append((0, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != NO_PRODUCER_ID:
        tagged.append((1, _I64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tagged.append((2, _I16.pack(v.client_transaction_version)))
    parts.append(uvarint(len(tagged)))
    for tag, data in tagged:
        parts += [uvarint(tag), uvarint(len(data)), data]
    return b"".join(parts)


def encode_record(record: TransactionLogRecord, version: int = 0) -> tuple[bytes, bytes | None]:
    """(key, value) bytes; value None for a tombstone."""
    key = encode_key(record.transactional_id)
    return key, None if record.value is None else encode_value(record.value, version)


# -- decoding -------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, s: struct.Struct) -> tuple[int, ...]:
        if self.pos + s.size > len(self.buf):
            raise ValueError("record is truncated")
        out = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return tuple(int(x) for x in out)

    def i16(self) -> int:
        return self.take(_I16)[0]

    def i32(self) -> int:
        return self.take(_I32)[0]

    def i64(self) -> int:
        return self.take(_I64)[0]

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)
        return value

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("record is truncated")
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def skip_tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.raw(self.uvarint())
        return out


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key; None when the key is not a TransactionLogKey v0."""
    r = _Reader(data)
    if len(data) < 2 or r.i16() != 0:
        return None
    n = r.i16()
    return r.raw(n).decode()


def decode_value(data: bytes) -> TransactionLogValue:
    r = _Reader(data)
    version = r.i16()
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    pid, epoch, timeout, status = r.take(_HEAD)
    partitions: list[tuple[str, int]] = []
    if version == 0:
        for _ in range(max(r.i32(), 0)):
            topic = r.raw(r.i16()).decode()
            partitions += [(topic, r.i32()) for _ in range(max(r.i32(), 0))]
    else:
        for _ in range(max(r.uvarint() - 1, 0)):
            topic = r.raw(r.uvarint() - 1).decode()
            partitions += [(topic, r.i32()) for _ in range(max(r.uvarint() - 1, 0))]
            r.skip_tags()
    last_update, start = r.take(_TAIL)
    previous, following, client_version = NO_PRODUCER_ID, NO_PRODUCER_ID, 0
    if version == 1:
        tags = r.skip_tags()
        if 0 in tags:
            previous = _I64.unpack(tags[0])[0]
        if 1 in tags:
            following = _I64.unpack(tags[1])[0]
        if 2 in tags:
            client_version = _I16.unpack(tags[2])[0]
    return TransactionLogValue(
        pid,
        epoch,
        timeout,
        TransactionState.from_id(status),
        tuple(sorted(partitions)),
        last_update,
        start,
        previous,
        following,
        client_version,
    )


def decode_record(key: bytes | None, value: bytes | None) -> TransactionLogRecord | None:
    """The record of a (key, value) pair of ``__transaction_state``; None if not ours."""
    if key is None:
        return None
    txn_id = decode_key(key)
    if txn_id is None:
        return None
    return TransactionLogRecord(txn_id, None if value is None else decode_value(value))


def iter_pairs(
    pairs: Iterable[tuple[bytes | None, bytes | None]],
) -> Iterator[TransactionLogRecord]:
    """Decode (key, value) pairs of the log, skipping what is not a transaction record."""
    for key, value in pairs:
        record = decode_record(key, value)
        if record is not None:
            yield record
