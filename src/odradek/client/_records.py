"""Pure-Python RecordBatch v2 codec for the client (the compiled twin is ``_speedups``).

Batch layout: DESIGN.md section 4 / odradek.protocol.records. This module builds a batch from
the producer's accumulated records and decodes fetched batches into ``ConsumerRecord`` rows.
Also: Kafka's compression codecs (snappy with xerial framing like the Java client; raw snappy
accepted when decoding; lz4 frame; gzip; zstd) and murmur2 (Java's ``Utils.murmur2``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import cramjam
from crc32c import crc32c

from .types import ConsumerRecord

__all__ = [
    "BATCH_HEADER",
    "compress",
    "decode_records",
    "decompress",
    "encode_batch",
    "murmur2",
]

# baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I, attributes h,
# lastOffsetDelta i, baseTimestamp q, maxTimestamp q, producerId q, producerEpoch h,
# baseSequence i, recordCount i
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = 61
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_XERIAL = b"\x82SNAPPY\x00"

RecordTuple = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]] | None, int]


def _varint(n: int) -> bytes:
    """Zig-zag varint (Kafka's varint/varlong)."""
    n = (n << 1) ^ (n >> 63)
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(128)]


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        out = bytearray(_XERIAL + b"\x00\x00\x00\x01\x00\x00\x00\x01")
        for i in range(0, len(data), 32768):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + 32768]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        data = bytes(data)
        if data[:8] == _XERIAL:
            out = bytearray()
            pos = 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
                pos += 4 + n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def encode_records(records: Iterable[RecordTuple], base_timestamp: int) -> tuple[bytes, int, int]:
    """Encode records (key, value, headers, timestamp_ms); return (bytes, count, max_timestamp)."""
    parts: list[bytes] = []
    append = parts.append
    varint = _varint
    delta = 0
    max_ts = base_timestamp
    for key, value, headers, ts in records:
        if ts > max_ts:
            max_ts = ts
        body = [b"\x00", varint(ts - base_timestamp), varint(delta)]
        if key is None:
            body.append(b"\x01")
        else:
            body.append(varint(len(key)))
            body.append(key)
        if value is None:
            body.append(b"\x01")
        else:
            body.append(varint(len(value)))
            body.append(value)
        if headers:
            body.append(varint(len(headers)))
            for hk, hv in headers:
                hkb = hk.encode() if isinstance(hk, str) else hk
                body.append(varint(len(hkb)))
                body.append(hkb)
                if hv is None:
                    body.append(b"\x01")
                else:
                    body.append(varint(len(hv)))
                    body.append(hv)
        else:
            body.append(b"\x00")
        rec = b"".join(body)
        append(varint(len(rec)))
        append(rec)
        delta += 1
    return b"".join(parts), delta, max_ts


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
) -> bytes:
    """Wrap encoded records into a v2 batch (compressing them with ``codec``), CRC included."""
    payload = compress(codec, records_bytes) if codec else records_bytes
    after_crc = struct.pack(
        ">hiqqqhii",
        codec,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(payload, crc32c(after_crc))
    head = struct.pack(">qiibI", base_offset, 49 + len(payload), -1, 2, crc)
    return head + after_crc + payload


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
) -> bytes:
    """A complete RecordBatch v2 holding ``records``."""
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


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def decode_batch_records(
    topic: str,
    partition: int,
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp_type: int,
    log_append_time: int,
    min_offset: int,
    leader_epoch: int,
    out: list[ConsumerRecord],
) -> None:
    """Decode ``count`` records from ``buf[pos:end]`` (uncompressed) into ``out``."""
    rv = _read_varint
    for _ in range(count):
        if pos >= end:
            break
        length, pos = rv(buf, pos)
        next_pos = pos + length
        pos += 1  # attributes
        ts_delta, pos = rv(buf, pos)
        off_delta, pos = rv(buf, pos)
        klen, pos = rv(buf, pos)
        if klen < 0:
            key = None
        else:
            key = buf[pos : pos + klen]
            pos += klen
        vlen, pos = rv(buf, pos)
        if vlen < 0:
            value = None
        else:
            value = buf[pos : pos + vlen]
            pos += vlen
        nh, pos = rv(buf, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(nh):
            hklen, pos = rv(buf, pos)
            hk = buf[pos : pos + hklen].decode()
            pos += hklen
            hvlen, pos = rv(buf, pos)
            if hvlen < 0:
                hv = None
            else:
                hv = buf[pos : pos + hvlen]
                pos += hvlen
            headers.append((hk, hv))
        offset = base_offset + off_delta
        if offset >= min_offset:
            out.append(
                ConsumerRecord(
                    topic,
                    partition,
                    offset,
                    log_append_time if timestamp_type else base_timestamp + ts_delta,
                    timestamp_type,
                    key,
                    value,
                    headers,
                    leader_epoch,
                )
            )
        pos = next_pos


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


def iter_batch_headers(buf: bytes | memoryview, pos: int = 0) -> Iterable[tuple[int, tuple]]:
    """(position, header tuple) for every whole batch in ``buf`` from ``pos``."""
    n = len(buf)
    unpack = BATCH_HEADER.unpack_from
    while pos + BATCH_HEADER_SIZE <= n:
        h = unpack(buf, pos)
        size = h[1] + 12
        if pos + size > n:
            break
        yield pos, h
        pos += size


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
            from .errors import KafkaError

            raise KafkaError(f"CRC mismatch in batch at offset {base_offset}", 2)
        control = bool(attrs & 0x20)
        if filt is not None:
            if filt.skip(base_offset, pid, bool(attrs & 0x10), control):
                continue
        elif control:
            continue
        codec = attrs & 7
        tstype = (attrs >> 3) & 1
        if codec:
            raw = decompress(codec, memoryview(data)[pos + 61 : end])
            decode_batch_records(topic, partition, raw, 0, len(raw), count, base_offset, base_ts, tstype, max_ts, min_offset, epoch, out)
        else:
            decode_batch_records(topic, partition, data, pos + 61, end, count, base_offset, base_ts, tstype, max_ts, min_offset, epoch, out)
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
