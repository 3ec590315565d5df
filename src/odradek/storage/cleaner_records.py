"""Record-level work of log compaction: scanning the records of a batch without building
``Record`` tuples, rewriting a batch with a subset of its records, and the append-time check
that every record of a compacted topic has a key.

A filtered batch (Kafka's ``MemoryRecords.filterTo`` for magic 2):

* keeps ``baseOffset``, ``partitionLeaderEpoch``, the attributes (codec included: the retained
  records are compressed again with the same codec), ``baseTimestamp``, ``producerId``,
  ``producerEpoch``, ``baseSequence`` and **``lastOffsetDelta``** (so the batch's last offset
  and last sequence survive compaction, which idempotent producers rely on: KIP-98);
* holds the retained records' bytes exactly as they were (their offset and timestamp deltas
  stay relative to the unchanged base), ``recordCount`` = their number, and ``maxTimestamp``
  recomputed over them (kept as is with LogAppendTime);
* may be empty (``recordCount`` 0, no records) when the batch is the last one of a producer,
  which Kafka keeps so that the producer's state can be rebuilt from the log (an empty batch
  has no codec and no delete horizon: baseTimestamp = maxTimestamp, as Kafka's
  ``writeEmptyHeader``).

**The delete horizon** (KIP-534). A batch that keeps a tombstone, or a transaction marker that
may go once its horizon has passed, and has no delete horizon yet gets one: attributes bit
0x40 set, baseTimestamp = ``deleteHorizonMs`` (the cleaning's time + ``delete.retention.ms``),
every retained record's timestampDelta rewritten relative to it (its timestamp unchanged), CRC
recomputed. A batch that has one keeps it when it is rewritten.

A batch that keeps every record and needs no new horizon is copied unchanged, CRC included.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from crc32c import crc32c

from odradek.protocol._primitives import uvarint
from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_BIT,
    compress,
    decompress,
    read_varint,
)
from odradek.protocol.records import LOG_OVERHEAD as LOG_OVERHEAD
from odradek.storage.errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "RecordValidationError",
    "check_compacted_append",
    "filter_batch",
    "iter_raw_records",
    "keyless_records",
]

HEADER_SIZE = BATCH_HEADER_SIZE
CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
_HEADER = BATCH_HEADER  # the 61-byte batch header
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_BEFORE_CRC = struct.Struct(">qiibI")  # baseOffset .. crc

# one raw record: (start, end, offsetDelta, timestampDelta, key or None, value is null)
RawRecord = tuple[int, int, int, int, bytes | None, bool]


class RecordValidationError(InvalidRecordError):
    """Some records of an append are invalid (INVALID_RECORD, 87); nothing was appended.

    ``record_errors`` lists ``(batch_index, message)`` pairs as Produce v8+ reports them
    (KIP-467): the index of the record within the appended records, counted across the
    batches of the request in order."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


def iter_raw_records(data: bytes, count: int) -> Iterator[RawRecord]:
    """The ``count`` records of a batch's uncompressed record bytes, each as
    ``(start, end, offsetDelta, timestampDelta, key, value_is_null)``: ``data[start:end]`` is
    the record's whole encoding (length prefix included)."""
    pos = 0
    n = len(data)
    try:
        for _ in range(count):
            start = pos
            length, pos = read_varint(data, pos)
            end = pos + length
            if length < 0 or end > n:
                raise CorruptRecordError("record extends past the end of its batch")
            pos += 1  # attributes
            ts_delta, pos = read_varint(data, pos)
            offset_delta, pos = read_varint(data, pos)
            key_length, pos = read_varint(data, pos)
            key = None
            if key_length >= 0:
                key = data[pos : pos + key_length]
                pos += key_length
            value_length, pos = read_varint(data, pos)
            yield start, end, offset_delta, ts_delta, key, value_length < 0
            pos = end
    except IndexError:
        raise CorruptRecordError("record extends past the end of its batch") from None


def batch_records_data(batch: bytes | memoryview) -> bytes:
    """The uncompressed record bytes of one whole batch."""
    attributes = _AFTER_CRC.unpack_from(batch, 21)[0]
    codec = attributes & CODEC_MASK
    body = batch[HEADER_SIZE:]
    return bytes(body) if codec == 0 else decompress(codec, body)


def keyless_records(buf: bytes | bytearray | memoryview) -> list[tuple[int, str]]:
    """KIP-467 record errors for the records without a key in ``buf`` (whole, valid batches):
    ``[(index across the batches, message)]``. Control batches are not checked."""
    errors: list[tuple[int, str]] = []
    pos = 0
    index = 0
    total = len(buf)
    view = memoryview(buf)
    try:
        while pos + HEADER_SIZE <= total:
            header = _HEADER.unpack_from(buf, pos)
            size = header[1] + LOG_OVERHEAD
            attributes, count = header[5], header[12]
            if not attributes & CONTROL_BIT:
                data = batch_records_data(view[pos : pos + size])
                for i, (_, _, _, _, key, _) in enumerate(iter_raw_records(data, count)):
                    if key is None:
                        errors.append(
                            (index + i, "Compacted topic cannot accept message without key.")
                        )
            index += count
            pos += size
    finally:
        view.release()
    return errors


def check_compacted_append(buf: bytes | bytearray | memoryview) -> None:
    """Refuse an append to a compacted log holding records without a key (Kafka's
    ``LogValidator``: INVALID_RECORD with the offending records listed, KIP-467)."""
    errors = keyless_records(buf)
    if errors:
        raise RecordValidationError(
            f"Compacted topic cannot accept message without key ({len(errors)} records)", errors
        )


def _zigzag(value: int) -> bytes:
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _rebased(data: bytes, start: int, end: int, ts_delta: int, shift: int) -> bytes:
    """The record ``data[start:end]`` with its timestampDelta lowered by ``shift``."""
    _length, pos = read_varint(data, start)
    attributes_at = pos
    _ts, after_ts = read_varint(data, pos + 1)
    body = b"".join(
        (data[attributes_at : attributes_at + 1], _zigzag(ts_delta - shift), data[after_ts:end])
    )
    return _zigzag(len(body)) + body


def filter_batch(
    batch: bytes,
    retain: Callable[[int, bytes | None, bool, int], bool],
    keep_empty: bool,
    new_delete_horizon_ms: int | None = None,
    marker_for_empty_txn: bool = False,
) -> tuple[bytes | None, int]:
    """Rewrite one whole batch keeping the records for which
    ``retain(offset, key, value_is_null, timestamp)`` is true (see the module docstring;
    Kafka's ``MemoryRecords.filterTo`` for one batch).

    Returns ``(batch bytes or None when nothing is kept, number of records dropped)``; the
    bytes are ``batch`` itself (the same object) when nothing changed. With ``keep_empty`` a
    batch that keeps no record becomes an empty batch instead of None. With
    ``new_delete_horizon_ms``, a batch without a delete horizon that keeps a tombstone (or,
    with ``marker_for_empty_txn``, a marker that may go later) gets that horizon.
    """
    (
        base_offset,
        _length,
        epoch,
        _magic,
        _crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _HEADER.unpack_from(batch, 0)
    data = batch_records_data(batch)
    log_append_time = attributes & TIMESTAMP_TYPE_BIT
    kept: list[tuple[int, int, int]] = []
    new_max = -1
    tombstones = False
    for start, end, offset_delta, ts_delta, key, null_value in iter_raw_records(data, count):
        timestamp = max_timestamp if log_append_time else base_timestamp + ts_delta
        if retain(base_offset + offset_delta, key, null_value, timestamp):
            kept.append((start, end, ts_delta))
            tombstones = tombstones or null_value
            if timestamp > new_max:
                new_max = timestamp
    dropped = count - len(kept)
    set_horizon = (
        bool(kept)
        and new_delete_horizon_ms is not None
        and (tombstones or marker_for_empty_txn)
        and not attributes & DELETE_HORIZON_BIT
    )
    if not kept and not keep_empty:
        return None, dropped  # an empty batch no longer needed goes too
    if dropped == 0 and not set_horizon:
        return batch, 0
    codec = attributes & CODEC_MASK
    if kept:
        if set_horizon:
            assert new_delete_horizon_ms is not None
            shift = new_delete_horizon_ms - base_timestamp
            records = b"".join(_rebased(data, s, e, d, shift) for s, e, d in kept)
            attributes |= DELETE_HORIZON_BIT
            base_timestamp = new_delete_horizon_ms
        else:
            records = b"".join(data[s:e] for s, e, _ in kept)
        payload = compress(codec, records) if codec else records
        if log_append_time:
            new_max = max_timestamp
    else:
        payload = b""
        attributes &= ~(CODEC_MASK | DELETE_HORIZON_BIT)
        new_max = max_timestamp
        base_timestamp = max_timestamp
    after_crc = _AFTER_CRC.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        new_max,
        producer_id,
        producer_epoch,
        base_sequence,
        len(kept),
    )
    crc = crc32c(payload, crc32c(after_crc))
    head = _BEFORE_CRC.pack(base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), epoch, 2, crc)
    return b"".join((head, after_crc, payload)), dropped
