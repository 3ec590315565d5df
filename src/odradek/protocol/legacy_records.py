"""The old message formats (magic 0 and 1): decode, up-convert to v2, down-convert lazily.

Produce v0-v2 carries, and Fetch v0-v3 expects, a *message set*: entries back to back, each::

    offset       int64
    message_size int32   bytes that follow (crc .. value)
    crc          uint32  CRC-32 (zlib's, not CRC-32C) of magic .. value
    magic        int8    0 or 1
    attributes   int8    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4);
                         bit 3 (magic 1 only) timestamp type: 0 CreateTime, 1 LogAppendTime
    timestamp    int64   magic 1 only (-1 = none)
    key          bytes   int32 length, -1 = null
    value        bytes   int32 length, -1 = null

A *wrapper* message (codec != none) has a null key and a value that is a compressed message
set of *inner* messages, which are themselves uncompressed and of the wrapper's magic. The
wrapper's offset is the absolute offset of its last inner message. Inner offsets are absolute
in magic 0 and relative in magic 1 (0 for the first inner message the writer appended):
absolute = wrapper offset - last inner offset + inner offset. A magic 1 wrapper with
LogAppendTime gives every inner message its own timestamp.

Compression of the wrapper value: gzip; snappy raw or with xerial framing (the Java clients'
``\\x82SNAPPY\\x00`` header + int32-length blocks; both are read, xerial is written as Kafka
does); lz4 as an LZ4 frame with independent 64 KiB blocks, whose header checksum (HC, the
second byte of xxh32 of the frame descriptor) magic 0 got wrong before KIP-57: Kafka 0.8-0.9
hashed the 4 magic bytes too. Kafka ignores HC when reading magic 0 and checks it for magic 1;
this module does the same and writes the broken HC for magic 0, the correct one for magic 1.
zstd does not exist before magic 2 (UNSUPPORTED_COMPRESSION_TYPE, 76).

Entry points:

* :func:`iter_messages` — every message of a message set, wrappers unwrapped, with absolute
  offsets; :func:`records_magic` — the magic of the first entry of a records field.
* :func:`message_set_to_batch` — a Produce v0-v2 message set as one v2 RecordBatch for the
  log (Kafka 3.x does the same conversion: message format 3.0 means v2 on disk). Offsets are
  the log's to assign (baseOffset 0, deltas 0..n-1); v1 timestamps are kept, magic 0 has
  none (-1); the batch is compressed with the producer's codec (``compression.type=producer``).
* :func:`down_convert` — v2 batches as a magic 0/1 message set (Kafka's RecordsUtil.downConvert):
  control batches dropped, headers dropped, producer ids and sequences lost, compressed batches
  become wrapper messages with the same codec, uncompressed ones single messages from
  ``first_offset`` on (records before the fetch offset are cut, as librdkafka relies on).
* :class:`LazyDownConversion` — Kafka's LazyDownConversionRecords for a Fetch < v4 response:
  its size is fixed up front (max of the v2 size and the first converted chunk) and
  :meth:`LazyDownConversion.chunks` converts at most ``chunk_bytes`` of v2 input at a time,
  padding with an overflow entry (offset -1, a length past the end) that old consumers skip as
  a partial message. A slow consumer therefore never pins more than one chunk in memory.

Errors: :class:`~odradek.protocol.records.CorruptRecordError` (CORRUPT_MESSAGE, 2) for bad CRCs
and bounds, :class:`~odradek.protocol.records.InvalidRecordError` (INVALID_RECORD, 87) for
broken rules, :class:`UnsupportedCompressionTypeError` (76) for zstd below magic 2.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

import cramjam
import xxhash

from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatch,
    TimestampType,
    compress,
    decompress,
    encode_records,
    finish_batch,
)

__all__ = [
    "LEGACY_OVERFLOW_MIN",
    "LazyDownConversion",
    "LegacyMessage",
    "RecordsSource",
    "UnsupportedCompressionTypeError",
    "down_convert",
    "encode_message",
    "iter_messages",
    "lz4_frame",
    "lz4_unframe",
    "message_set_to_batch",
    "records_magic",
]

_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_OFFSET_SIZE = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32_LE = struct.Struct("<I")
_MAGIC_OFFSET = LOG_OVERHEAD + 4  # magic sits after offset, size and crc
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_MIN_MESSAGE_SIZE = (14, 22)  # crc .. value lengths without key and value, magic 0 / 1
_V2_CONTROL_BIT = 0x20
LEGACY_OVERFLOW_MIN = LOG_OVERHEAD
"""Size of an overflow entry when nothing else is left (Kafka's MIN_OVERFLOW_MESSAGE_LENGTH)."""


class UnsupportedCompressionTypeError(InvalidRecordError):
    """zstd in a magic 0/1 message, or a zstd v2 batch to down-convert (Kafka: 76)."""


class LegacyMessage(NamedTuple):
    """One (inner or plain) message of a message set, with its absolute offset."""

    offset: int
    timestamp: int
    """-1 (NO_TIMESTAMP) for magic 0."""
    key: bytes | None
    value: bytes | None
    magic: int = 1
    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    codec: int = 0
    """The codec of the wrapper the message came in (0 when it was not wrapped)."""


# ---------------------------------------------------------------------------------------------
# LZ4 framing (Kafka's Lz4BlockOutputStream / Lz4BlockInputStream)

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # 64 KiB maximum block size
_LZ4_BLOCK = 65536
_LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_UNCOMPRESSED_BIT = 0x80000000


def _lz4_hc(descriptor: bytes) -> int:
    return (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF


_LZ4_HC_CORRECT = _lz4_hc(bytes((_LZ4_FLG, _LZ4_BD)))
_LZ4_HC_BROKEN = _lz4_hc(_LZ4_MAGIC + bytes((_LZ4_FLG, _LZ4_BD)))  # pre-KIP-57 (magic 0)


def lz4_frame(data: bytes | bytearray | memoryview, *, broken_checksum: bool = False) -> bytes:
    """``data`` as Kafka writes an LZ4 wrapper value: a frame of independent 64 KiB blocks
    (a block that does not shrink is stored raw), end mark, no checksums. ``broken_checksum``
    writes magic 0's pre-KIP-57 header checksum."""
    hc = _LZ4_HC_BROKEN if broken_checksum else _LZ4_HC_CORRECT
    out = [_LZ4_MAGIC, bytes((_LZ4_FLG, _LZ4_BD, hc))]
    view = memoryview(data)
    for i in range(0, len(view), _LZ4_BLOCK):
        raw = view[i : i + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            out.append(_U32_LE.pack(len(raw) | _LZ4_UNCOMPRESSED_BIT))
            out.append(bytes(raw))
        else:
            out.append(_U32_LE.pack(len(block)))
            out.append(block)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


def lz4_unframe(data: bytes | bytearray | memoryview, *, check_header_checksum: bool) -> bytes:
    """Decompress an LZ4 frame as Kafka reads one: blocks decompressed independently, block
    checksums skipped, the header checksum checked only when ``check_header_checksum``."""
    view = memoryview(data)
    end = len(view)
    try:
        if bytes(view[:4]) != _LZ4_MAGIC:
            raise CorruptRecordError("LZ4 frame magic is wrong")
        flg, bd = view[4], view[5]
        if flg >> 6 != 1:
            raise CorruptRecordError(f"unsupported LZ4 frame version {flg >> 6}")
        max_block = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
        if max_block is None:
            raise CorruptRecordError(f"invalid LZ4 block size descriptor {bd:#04x}")
        pos = 6
        if flg & 0x08:  # content size
            pos += 8
        if flg & 0x01:  # dictionary id
            pos += 4
        if pos >= end:
            raise CorruptRecordError("truncated LZ4 frame header")
        if check_header_checksum and view[pos] != _lz4_hc(bytes(view[4:pos])):
            raise CorruptRecordError("LZ4 frame header checksum mismatch")
        pos += 1
        block_checksum = bool(flg & 0x10)
        out: list[bytes] = []
        scratch = bytearray(max_block)
        while True:
            if pos + 4 > end:
                raise CorruptRecordError("truncated LZ4 block header")
            (size,) = _U32_LE.unpack_from(view, pos)
            pos += 4
            if size == 0:
                break
            raw = bool(size & _LZ4_UNCOMPRESSED_BIT)
            size &= ~_LZ4_UNCOMPRESSED_BIT
            if size > max_block or pos + size > end:
                raise CorruptRecordError("LZ4 block is out of bounds")
            block = view[pos : pos + size]
            pos += size
            if raw:
                out.append(bytes(block))
            else:
                n = cramjam.lz4.decompress_block_into(block, scratch)
                out.append(bytes(scratch[:n]))
            if block_checksum:
                pos += 4
        return b"".join(out)
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam's DecompressionError, IndexError on truncation
        raise CorruptRecordError(f"cannot decompress LZ4: {exc}") from exc


def _wrapper_decompress(codec: int, magic: int, data: memoryview) -> bytes:
    if codec == Compression.LZ4:
        return lz4_unframe(data, check_header_checksum=magic >= 1)
    if codec == Compression.ZSTD:
        raise UnsupportedCompressionTypeError("zstd compression needs magic 2")
    if codec not in (Compression.GZIP, Compression.SNAPPY):
        raise CorruptRecordError(f"unknown compression codec {codec}")
    return decompress(codec, data)


def _wrapper_compress(codec: int, magic: int, data: bytes) -> bytes:
    if codec == Compression.LZ4:
        return lz4_frame(data, broken_checksum=magic == 0)
    return compress(codec, data, xerial=True)


# ---------------------------------------------------------------------------------------------
# Decoding


def records_magic(records: bytes | bytearray | memoryview | None) -> int | None:
    """The magic byte of the first entry of a Produce/Fetch records field (None if too short).

    The magic sits at byte 16 in every format (after offset, size and crc / leader epoch).
    """
    if records is None or len(records) <= _MAGIC_OFFSET:
        return None
    return int(records[_MAGIC_OFFSET])


def _read_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("truncated message")
    (n,) = _I32.unpack_from(view, pos)
    pos += 4
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"invalid length {n}")
        return None, pos
    if pos + n > end:
        raise CorruptRecordError("message key or value is out of bounds")
    return bytes(view[pos : pos + n]), pos + n


def _iter_entries(
    view: memoryview, *, partial_ok: bool
) -> Iterator[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, key, value) of each entry, CRC checked."""
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if partial_ok:
                return
            raise CorruptRecordError("truncated message set entry")
        offset, size = _OFFSET_SIZE.unpack_from(view, pos)
        entry_end = pos + LOG_OVERHEAD + size
        if entry_end > end:
            if partial_ok:
                return  # a Fetch response may end with a partial message
            raise CorruptRecordError("message set entry extends past the end")
        if size < _MIN_MESSAGE_SIZE[0]:
            raise CorruptRecordError(f"message size {size} is below the minimum")
        _o, _s, crc, magic, attributes = _ENTRY_HEAD.unpack_from(view, pos)
        if magic not in (0, 1):
            raise InvalidRecordError(f"message magic {magic} is not 0 or 1")
        if size < _MIN_MESSAGE_SIZE[magic]:
            raise CorruptRecordError(f"message size {size} is below the minimum")
        body_start = pos + LOG_OVERHEAD + 4
        if zlib.crc32(view[body_start:entry_end]) != crc:
            raise CorruptRecordError(f"message CRC mismatch at offset {offset}")
        p = body_start + 2
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _I64.unpack_from(view, p)
            p += 8
        key, p = _read_bytes(view, p, entry_end)
        value, p = _read_bytes(view, p, entry_end)
        if p != entry_end:
            raise CorruptRecordError("message has trailing bytes")
        yield offset, magic, attributes, timestamp, key, value
        pos = entry_end


def iter_messages(
    data: bytes | bytearray | memoryview, *, partial_ok: bool = False
) -> Iterator[LegacyMessage]:
    """Every message of a magic 0/1 message set, wrapper messages unwrapped.

    Offsets are absolute (see the module docstring). ``partial_ok``: stop quietly at a
    partial entry at the end (Fetch responses), instead of raising CorruptRecordError.
    A wrapper inside a wrapper, an inner magic that differs from the wrapper's, or an empty
    wrapper is InvalidRecordError.
    """
    view = memoryview(data)
    for offset, magic, attributes, timestamp, key, value in _iter_entries(
        view, partial_ok=partial_ok
    ):
        codec = attributes & _CODEC_MASK
        ts_type = (
            TimestampType.LOG_APPEND_TIME
            if magic == 1 and attributes & _TIMESTAMP_TYPE_BIT
            else TimestampType.CREATE_TIME
        )
        if codec == 0:
            yield LegacyMessage(offset, timestamp, key, value, magic, ts_type)
            continue
        if value is None:
            raise InvalidRecordError("compressed message has a null value")
        inner_data = _wrapper_decompress(codec, magic, memoryview(value))
        inner = list(_iter_entries(memoryview(inner_data), partial_ok=False))
        if not inner:
            raise InvalidRecordError("compressed message has no inner messages")
        last_inner = inner[-1][0]
        for i_offset, i_magic, i_attributes, i_timestamp, i_key, i_value in inner:
            if i_magic != magic:
                raise InvalidRecordError(f"inner message magic {i_magic} != wrapper {magic}")
            if i_attributes & _CODEC_MASK:
                raise InvalidRecordError("compressed message inside a compressed message")
            absolute = offset - last_inner + i_offset if magic == 1 else i_offset
            if ts_type == TimestampType.LOG_APPEND_TIME:
                i_timestamp = timestamp
            yield LegacyMessage(absolute, i_timestamp, i_key, i_value, magic, ts_type, codec)


# ---------------------------------------------------------------------------------------------
# Encoding


def _message_body(
    magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    parts = [bytes((magic, attributes & 0xFF))]
    if magic == 1:
        parts.append(_I64.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(field)))
            parts.append(field)
    return b"".join(parts)


def encode_message(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One message set entry (offset, size, CRC-32 and the message)."""
    body = _message_body(magic, attributes, timestamp, key, value)
    return b"".join(
        (_OFFSET_SIZE.pack(offset, len(body) + 4), struct.pack(">I", zlib.crc32(body)), body)
    )


_HEAD_V0 = struct.Struct(">bbi")  # magic, attributes, key length
_HEAD_V1 = struct.Struct(">bbqi")  # magic, attributes, timestamp, key length
_ENTRY_PREFIX = struct.Struct(">qiI")  # offset, size, crc


def _encode_messages(
    magic: int,
    attributes: int,
    messages: list[tuple[int, int, bytes | None, bytes | None]],
    offset_base: int,
    timestamp: int | None,
) -> bytes:
    """Plain entries for (offset, timestamp, key, value) rows: offsets less ``offset_base``,
    every timestamp ``timestamp`` when not None. The down-conversion loop, so one struct call
    for the head and one for the prefix per message (same bytes as :func:`encode_message`)."""
    out: list[bytes] = []
    append = out.append
    crc32 = zlib.crc32
    prefix = _ENTRY_PREFIX.pack
    i32 = _I32.pack
    head_v1 = _HEAD_V1.pack
    head_v0 = _HEAD_V0.pack
    for off, ts, key, value in messages:
        if magic == 1:
            head = head_v1(
                1,
                attributes,
                ts if timestamp is None else timestamp,
                -1 if key is None else len(key),
            )
        else:
            head = head_v0(0, attributes, -1 if key is None else len(key))
        tail = b"\xff\xff\xff\xff" if value is None else i32(len(value))
        if key is None:
            body = b"".join((head, tail, value)) if value is not None else head + tail
        else:
            body = (
                b"".join((head, key, tail, value))
                if value is not None
                else b"".join((head, key, tail))
            )
        append(prefix(off - offset_base, len(body) + 4, crc32(body)))
        append(body)
    return b"".join(out)


def _encode_wrapped(
    magic: int,
    codec: int,
    messages: list[tuple[int, int, bytes | None, bytes | None]],
    ts_type: TimestampType,
    log_append_time: int,
) -> bytes:
    """Messages (absolute offset, timestamp, key, value) as one wrapper entry, or as plain
    entries when ``codec`` is 0 (Kafka's MemoryRecordsBuilder for magic 0/1)."""
    ts_bit = _TIMESTAMP_TYPE_BIT if magic == 1 and ts_type == TimestampType.LOG_APPEND_TIME else 0
    fixed_ts = log_append_time if ts_bit else None
    if codec == 0:
        return _encode_messages(magic, ts_bit, messages, 0, fixed_ts)
    base = messages[0][0] if magic == 1 else 0
    inner = _encode_messages(magic, ts_bit, messages, base, fixed_ts)
    if magic == 1:
        wrapper_ts = log_append_time if ts_bit else max(ts for _o, ts, _k, _v in messages)
    else:
        wrapper_ts = NO_TIMESTAMP
    return encode_message(
        messages[-1][0],
        magic,
        None,
        _wrapper_compress(codec, magic, inner),
        timestamp=wrapper_ts,
        attributes=codec | ts_bit,
    )


def message_set_to_batch(
    data: bytes | bytearray | memoryview,
    *,
    compression: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """A Produce v0-v2 message set as one v2 batch (baseOffset 0, deltas 0..n-1).

    ``compression`` None keeps the producer's codec (that of the first wrapper message, or
    none; Kafka's ``compression.type=producer``), else the topic's codec. Timestamps: v1's
    are kept, magic 0 has none (-1). The producer id stays -1: old producers are never
    idempotent. Raises CorruptRecordError / InvalidRecordError /
    UnsupportedCompressionTypeError, and InvalidRecordError for an empty message set.
    """
    rows: list[tuple[bytes | None, bytes | None, None, int]] = []
    codec = 0
    for message in iter_messages(data):
        if not rows:
            codec = message.codec
        rows.append((message.key, message.value, None, message.timestamp))
    if not rows:
        raise InvalidRecordError("the message set holds no message")
    if compression is not None:
        codec = compression
    base_timestamp = rows[0][3]
    records, count, _ = encode_records(rows, base_timestamp)
    max_timestamp = max(row[3] for row in rows)
    attributes = _TIMESTAMP_TYPE_BIT if timestamp_type == TimestampType.LOG_APPEND_TIME else 0
    return finish_batch(
        records,
        count,
        base_timestamp,
        max_timestamp,
        compression=codec,
        attributes=attributes,
    )


def down_convert(
    data: bytes | bytearray | memoryview, to_magic: int, first_offset: int = -1
) -> bytes:
    """Whole v2 batches in ``data`` as a magic ``to_magic`` (0 or 1) message set.

    Kafka's RecordsUtil.downConvert: control batches are dropped; headers, producer ids and
    sequences are lost; a compressed batch becomes one wrapper message with the same codec
    (magic 0 drops timestamps); an uncompressed batch becomes one message per record with
    offset >= ``first_offset``. A batch with magic < 2 already is copied as is. A partial batch
    at the end is ignored. zstd raises UnsupportedCompressionTypeError.
    """
    if to_magic not in (0, 1):
        raise ValueError(f"cannot down-convert to magic {to_magic}")
    out: list[bytes] = []
    view = memoryview(data)
    pos = 0
    end = len(view)
    while end - pos >= LOG_OVERHEAD + 5:
        (size,) = _I32.unpack_from(view, pos + 8)
        total = size + LOG_OVERHEAD
        if pos + total > end:
            break
        magic = view[pos + _MAGIC_OFFSET]
        if magic < 2:
            if magic <= to_magic:
                out.append(bytes(view[pos : pos + total]))
            else:  # magic 1 on disk to a magic 0 reader: re-encode without timestamps
                out.append(_convert_legacy(view[pos : pos + total], to_magic))
            pos += total
            continue
        if total < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"record batch length {size} is impossible")
        batch = RecordBatch(view, pos)
        pos += total
        attributes = batch.attributes
        if attributes & _V2_CONTROL_BIT:
            continue
        codec = attributes & _CODEC_MASK
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionTypeError("zstd batches cannot be down-converted")
        records = batch.records()
        if codec == 0:
            rows = [(r.offset, r.timestamp, r.key, r.value) for r in records]
            rows = [row for row in rows if row[0] >= first_offset]
        else:
            rows = [(r.offset, r.timestamp, r.key, r.value) for r in records]
        if not rows:
            continue
        ts_type = batch.timestamp_type
        log_append_time = batch.max_timestamp if ts_type == TimestampType.LOG_APPEND_TIME else -1
        if to_magic == 0:
            rows = [(o, NO_TIMESTAMP, k, v) for o, _t, k, v in rows]
        out.append(_encode_wrapped(to_magic, codec, rows, ts_type, log_append_time))
    return b"".join(out)


def _convert_legacy(entry: memoryview, to_magic: int) -> bytes:
    messages = list(iter_messages(entry))
    if not messages:
        return b""
    codec = messages[0].codec
    rows = [(m.offset, NO_TIMESTAMP, m.key, m.value) for m in messages]
    return _encode_wrapped(to_magic, codec, rows, TimestampType.CREATE_TIME, -1)


# ---------------------------------------------------------------------------------------------
# Lazy, bounded down-conversion for Fetch < v4

RecordsSource = bytes | bytearray | memoryview | Callable[[int, int], bytes]
"""v2 record bytes, or ``read(position, size) -> bytes`` over them (e.g. a pread on a segment:
the broker's FileRegion, offset by the region's position)."""


class LazyDownConversion:
    """Down-convert ``length`` bytes of v2 batches for an old consumer, a chunk at a time.

    ``len(self)`` is the records size the response declares before anything is converted:
    max(``length``, size of the first converted chunk) — at least one whole converted batch —
    or ``LEGACY_OVERFLOW_MIN`` when the input has batches but nothing survives conversion
    (e.g. only control batches), or 0 for no input. :meth:`chunks` then yields exactly that
    many bytes: converted chunks of at most ``chunk_bytes`` of input each (a single larger
    batch is converted alone), cut at the declared size, then an overflow entry (offset -1, a
    size past the end) that old consumers ignore as a partial message.

    Constructing one converts the first batch, so UnsupportedCompressionTypeError (zstd) is
    raised here and the partition can be answered with error 76; a zstd batch met later
    ends the data with the overflow entry (the consumer asks again from there and then gets
    the error), as in Kafka.
    """

    def __init__(
        self,
        source: RecordsSource,
        length: int,
        to_magic: int,
        first_offset: int,
        *,
        chunk_bytes: int = 128 * 1024,
    ) -> None:
        if to_magic not in (0, 1):
            raise ValueError(f"cannot down-convert to magic {to_magic}")
        if callable(source):
            self._read: Callable[[int, int], bytes] = source
        else:
            view = memoryview(source)
            self._read = lambda position, size: view[position : position + size]  # type: ignore[assignment,return-value]
        self.length = length
        self.to_magic = to_magic
        self.first_offset = first_offset
        self.chunk_bytes = chunk_bytes
        self._position = 0
        self._exhausted = False
        self._had_batches = False
        first = self._next_chunk(0, first=True)
        self._first = first
        if first:
            self.size = max(length, len(first))
        else:
            self.size = LEGACY_OVERFLOW_MIN if self._had_batches else 0

    def __len__(self) -> int:
        return self.size

    def _next_chunk(self, limit: int, *, first: bool = False) -> bytes:
        """Convert the next group of whole batches (at least one, then up to ``limit`` bytes
        of input) until something survives conversion; b"" at the end of the input."""
        while not self._exhausted:
            start = self._position
            pos = start
            while pos + LOG_OVERHEAD <= self.length:
                head = self._read(pos, LOG_OVERHEAD)
                if len(head) < LOG_OVERHEAD:
                    break
                (size,) = _I32.unpack_from(head, 8)
                total = size + LOG_OVERHEAD
                if size < 0 or pos + total > self.length:
                    break
                if pos > start and pos + total - start > limit:
                    break
                pos += total
            if pos == start:
                self._exhausted = True
                return b""
            if first:
                self._had_batches = True
            self._position = pos
            data = self._read(start, pos - start)
            if len(data) < pos - start:  # truncated under us, or a short read: end here, so
                self._exhausted = True  # that no batch is skipped (the consumer asks again)
            converted = down_convert(data, self.to_magic, self.first_offset)
            if converted:
                return converted
        return b""

    def chunks(self) -> Iterator[bytes]:
        """Yield exactly ``len(self)`` bytes, converting one chunk at a time."""
        remaining = self.size
        first, self._first = self._first, b""
        chunk = first
        while remaining > 0:
            if not chunk:
                try:
                    # no more input than the bytes still owed: what converts past them is cut
                    chunk = self._next_chunk(min(self.chunk_bytes, remaining))
                except UnsupportedCompressionTypeError:
                    self._exhausted = True
                    chunk = b""
                if not chunk:
                    yield from _overflow(remaining, self.chunk_bytes)
                    return
            piece = chunk[:remaining] if len(chunk) > remaining else chunk
            remaining -= len(piece)
            yield piece
            chunk = b""


def _overflow(remaining: int, piece: int) -> Iterator[bytes]:
    """Kafka's overflow entry cut to ``remaining`` bytes: offset -1, then a size that runs
    past the end of the response, then zeros (in pieces of at most ``piece`` bytes)."""
    head = _OFFSET_SIZE.pack(-1, max(remaining + 1, BATCH_HEADER_SIZE))
    if remaining <= len(head):
        yield head[:remaining]
        return
    yield head
    remaining -= len(head)
    zeros = bytes(min(remaining, max(piece, 1)))
    while remaining > 0:
        n = min(remaining, len(zeros))
        yield zeros if n == len(zeros) else zeros[:n]
        remaining -= n
