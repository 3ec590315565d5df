"""The client's record-batch helpers on top of :mod:`odradek.protocol.records`.

Batch layout, varints, record encoding and decoding, compression and CRC live in
odradek.protocol.records (one codec for broker and client); the compiled twin
``_speedups`` mirrors its ``encode_records`` and record loop in C. What is client-only stays
here: decoding fetched batches into ``ConsumerRecord`` rows (offset floor, control and aborted
transactional batches skipped, optional CRC check), codec names, and murmur2 (Java's
``Utils.murmur2``) for the default partitioner. The producer writes snappy xerial-framed like
the Java client; raw snappy is accepted when decoding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crc32c import crc32c

from odradek.protocol import records as _codec
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    decompress,
    encode_records,
    iter_batch_headers,
    iter_records,
)

from .errors import KafkaError
from .types import ConsumerRecord

__all__ = [
    "BATCH_HEADER_SIZE",
    "CODECS",
    "committed_batches",
    "compress",
    "decode_records",
    "decompress",
    "encode_batch",
    "encode_records",
    "finish_batch",
    "iter_batch_headers",
    "murmur2",
    "murmur2_partition",
]

CODECS = {c.name.lower(): int(c) for c in Compression}
"""compression.type -> codec id (none 0, gzip 1, snappy 2, lz4 3, zstd 4)."""

RecordTuple = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]] | None, int]


def compress(codec: int, data: bytes) -> bytes:
    """Compress record bytes as the producer sends them (snappy xerial-framed)."""
    return _codec.compress(codec, data, xerial=True)


def finish_batch(
    records_bytes: bytes,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    transactional: bool = False,
) -> bytes:
    """Wrap encoded records into a v2 batch (compressing them with ``codec``), CRC included;
    ``transactional`` sets the batch's transactional attribute bit (0x10)."""
    return _codec.finish_batch(
        records_bytes,
        count,
        base_timestamp,
        max_timestamp,
        compression=codec,
        xerial=True,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        attributes=0x10 if transactional else 0,
    )


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
) -> bytes:
    """A complete RecordBatch v2 holding ``records`` (baseTimestamp: the first record's)."""
    base_ts = records[0][3] if records else 0
    data, count, max_ts = encode_records(records, base_ts)
    return finish_batch(
        data,
        count,
        base_ts,
        max_ts,
        codec=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
    )


def decode_batch_records(
    topic: str,
    partition: int,
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: int,
    log_append_time: int,
    min_offset: int,
    leader_epoch: int,
    out: list[ConsumerRecord],
) -> None:
    """Append the records of one batch (``data``: its uncompressed record bytes) with offset
    >= ``min_offset`` to ``out`` as ConsumerRecord rows (parsing: protocol's iter_records)."""
    new = tuple.__new__
    cls = ConsumerRecord
    lat = log_append_time if timestamp_type else None
    for offset, timestamp, key, value, headers in iter_records(
        data, count, base_offset, base_timestamp, lat
    ):
        if offset >= min_offset:
            out.append(
                new(
                    cls,
                    (topic, partition, offset, timestamp, timestamp_type, key, value, list(headers), leader_epoch),
                )
            )


class AbortedFilter:
    """read_committed: skip transactional batches of aborted transactions.

    ``aborted`` is the Fetch response's list of (producer_id, first_offset). A producer's batches
    are skipped from its first_offset until its abort marker (a control batch) is seen.
    """

    def __init__(self, aborted: Iterable[tuple[int, int]] | None) -> None:
        self.pending = sorted(aborted or (), key=lambda a: a[1])
        self.active: set[int] = set()

    def skip(self, base_offset: int, producer_id: int, transactional: bool, control: bool) -> bool:
        while self.pending and self.pending[0][1] <= base_offset:
            self.active.add(self.pending.pop(0)[0])
        if control:
            self.active.discard(producer_id)
            return True
        return transactional and producer_id in self.active


def committed_batches(data: bytes | memoryview, aborted: Iterable[tuple[int, int]] | None) -> bytes | memoryview:
    """read_committed: ``data`` (whole and partial record batches of one partition, as a Fetch
    answers) without control batches and without the batches of aborted transactions.

    ``aborted``: the Fetch response's aborted transactions, (producer_id, first_offset). When
    nothing is dropped, ``data`` itself is returned (no copy); otherwise the kept batches are
    concatenated, followed by any trailing partial batch."""
    filt = AbortedFilter(aborted)
    keep: list[tuple[int, int]] = []
    dropped = False
    last_end = 0
    for pos, h in iter_batch_headers(data):
        end = pos + h[1] + 12
        last_end = end
        attrs = h[5]
        if filt.skip(h[0], h[9], bool(attrs & 0x10), bool(attrs & 0x20)):
            dropped = True
            continue
        if keep and keep[-1][1] == pos:
            keep[-1] = (keep[-1][0], end)
        else:
            keep.append((pos, end))
    if not dropped:
        return data
    mv = memoryview(data)
    return b"".join(bytes(mv[a:b]) for a, b in keep) + bytes(mv[last_end:])


def decode_records(
    topic: str,
    partition: int,
    data: bytes,
    *,
    min_offset: int = 0,
    aborted: Iterable[tuple[int, int]] | None = None,
    read_committed: bool = False,
    check_crcs: bool = False,
) -> tuple[list[ConsumerRecord], int]:
    """Decode every whole batch in ``data``; return (records with offset >= min_offset,
    next fetch offset = last offset of the last whole batch + 1, or ``min_offset`` if none).

    Control batches are skipped; with ``read_committed`` aborted transactional batches too.
    """
    out: list[ConsumerRecord] = []
    next_offset = min_offset
    filt = AbortedFilter(aborted) if read_committed else None
    for pos, h in iter_batch_headers(data):
        (base_offset, blen, epoch, magic, crc, attrs, last_delta, base_ts, max_ts, pid, _pe, _bs, count) = h
        end = pos + blen + 12
        last = base_offset + last_delta
        if last < min_offset:
            continue
        next_offset = last + 1
        if magic != 2:
            raise ValueError(f"unsupported record batch magic {magic}")
        if check_crcs and crc32c(memoryview(data)[pos + 21 : end]) != crc:
            raise KafkaError(f"CRC mismatch in batch at offset {base_offset}", 2)
        control = bool(attrs & 0x20)
        if filt is not None:
            if filt.skip(base_offset, pid, bool(attrs & 0x10), control):
                continue
        elif control:
            continue
        codec = attrs & 7
        tstype = (attrs >> 3) & 1
        body = memoryview(data)[pos + BATCH_HEADER_SIZE : end]
        raw = decompress(codec, body) if codec else bytes(body)
        decode_batch_records(topic, partition, raw, count, base_offset, base_ts, tstype, max_ts, min_offset, epoch, out)
    return out, next_offset


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), as a signed int32."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra >= 3:
        h ^= data[idx + 2] << 16
    if extra >= 2:
        h ^= data[idx + 1] << 8
    if extra >= 1:
        h ^= data[idx]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """Java's placement of a keyed record: ``toPositive(murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
