"""Magic 0/1 message sets: decoding, Produce up-conversion, Fetch down-conversion.

kafka-python's LegacyRecordBatchBuilder / MemoryRecords (an implementation of the same format
written by others) are the oracle in both directions.
"""

from __future__ import annotations

import struct
import zlib

import hypothesis.strategies as st
import pytest
import xxhash
from hypothesis import given, settings
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from odradek.protocol.legacy_records import (
    LEGACY_OVERFLOW_MIN,
    LazyDownConversion,
    UnsupportedCompressionTypeError,
    down_convert,
    encode_message,
    iter_messages,
    lz4_frame,
    lz4_unframe,
    message_set_to_batch,
    records_magic,
)
from odradek.protocol.records import (
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    build_batch,
    compress,
    iter_batches,
)

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]

records_strategy = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=200),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
        st.integers(0, 2**42),
    ),
    min_size=1,
    max_size=20,
)


def kp_messages(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    memory = MemoryRecords(data)
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:
            break
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


@settings(max_examples=60, deadline=None)
@given(records_strategy, st.sampled_from(CODECS), st.integers(0, 2**40))
def test_v2_to_magic1_to_v2_keeps_offsets_keys_values_timestamps(
    rows: list, codec: Compression, base_offset: int
) -> None:
    v2 = build_batch(rows, base_offset=base_offset, compression=codec)
    legacy = down_convert(v2, 1)
    messages = list(iter_messages(legacy))
    assert [(m.offset, m.key, m.value, m.timestamp) for m in messages] == [
        (base_offset + i, k, v, ts) for i, (k, v, _h, ts) in enumerate(rows)
    ]
    assert all(m.codec == codec for m in messages)
    # kafka-python reads what we wrote
    assert kp_messages(legacy) == [(m.offset, m.timestamp, m.key, m.value) for m in messages]
    # and back to v2 (offsets are the log's to assign: deltas from 0)
    again = message_set_to_batch(legacy)
    (batch,) = list(iter_batches(again))
    assert batch.compression == codec
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch.records()] == [
        (i, k, v, ts, ()) for i, (k, v, _h, ts) in enumerate(rows)
    ]


@settings(max_examples=40, deadline=None)
@given(records_strategy, st.sampled_from(CODECS))
def test_magic0_loses_timestamps(rows: list, codec: Compression) -> None:
    v2 = build_batch(rows, base_offset=5, compression=codec)
    legacy = down_convert(v2, 0)
    assert records_magic(legacy) == 0
    messages = list(iter_messages(legacy))
    assert [(m.offset, m.key, m.value, m.timestamp) for m in messages] == [
        (5 + i, k, v, -1) for i, (k, v, _h, _ts) in enumerate(rows)
    ]
    assert kp_messages(legacy) == [(m.offset, None, m.key, m.value) for m in messages]
    batch = next(iter_batches(message_set_to_batch(legacy)))
    assert {r.timestamp for r in batch.records()} == {-1}


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_reads_kafka_python_message_sets(magic: int, codec: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(5):
        builder.append(i, timestamp=1000 + i, key=None if i == 2 else b"k%d" % i, value=b"v" * i)
    data = bytes(builder.build())
    messages = list(iter_messages(data))
    # a producer's magic 1 wrapper carries offset 0, so absolute offsets end at 0 (the broker
    # assigns its own); magic 0 inner offsets are taken as written
    first = -4 if magic == 1 and codec else 0
    assert [(m.offset, m.key, m.value) for m in messages] == [
        (first + i, None if i == 2 else b"k%d" % i, b"v" * i) for i in range(5)
    ]
    assert [m.timestamp for m in messages] == ([1000 + i for i in range(5)] if magic else [-1] * 5)


def test_uncompressed_down_conversion_cuts_before_fetch_offset_compressed_does_not() -> None:
    rows = [(b"k", b"v", None, 7)] * 4
    plain = build_batch(rows, base_offset=10)
    gz = build_batch(rows, base_offset=20, compression=Compression.GZIP)
    assert [m.offset for m in iter_messages(down_convert(plain, 1, 12))] == [12, 13]
    assert [m.offset for m in iter_messages(down_convert(gz, 1, 22))] == [20, 21, 22, 23]


def test_control_batches_and_headers_are_dropped() -> None:
    data = build_batch([(b"\x00\x00\x00\x00", b"", None, 1)], is_control=True, base_offset=0)
    data += build_batch([(b"k", b"v", [("h", b"x")], 2)], base_offset=1)
    messages = list(iter_messages(down_convert(data, 1)))
    assert [(m.offset, m.key, m.value) for m in messages] == [(1, b"k", b"v")]


def test_log_append_time_is_carried_by_the_wrapper() -> None:
    v2 = bytearray(build_batch([(b"a", b"b", None, 5), (b"c", b"d", None, 6)], compression=1))
    from odradek.protocol.records import set_log_append_time

    set_log_append_time(v2, 0, 999)
    messages = list(iter_messages(down_convert(bytes(v2), 1)))
    assert [(m.timestamp, m.timestamp_type) for m in messages] == [
        (999, TimestampType.LOG_APPEND_TIME)
    ] * 2
    assert kp_messages(down_convert(bytes(v2), 1))[0][1] == 999


def test_zstd_is_unsupported() -> None:
    v2 = build_batch([(b"a", b"b", None, 5)], compression=Compression.ZSTD)
    with pytest.raises(UnsupportedCompressionTypeError):
        down_convert(v2, 1)
    with pytest.raises(UnsupportedCompressionTypeError):
        LazyDownConversion(v2, len(v2), 1, 0)
    wrapper = encode_message(
        0, 1, None, compress(4, encode_message(0, 1, None, b"x")), attributes=4
    )
    with pytest.raises(UnsupportedCompressionTypeError):
        message_set_to_batch(wrapper)


def test_bad_messages() -> None:
    good = encode_message(0, 1, b"k", b"v", timestamp=1)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        list(iter_messages(bytes(bad_crc)))
    with pytest.raises(CorruptRecordError):
        list(iter_messages(good[:-1]))
    assert next(iter_messages(good + good[:-3], partial_ok=True)).key == b"k"
    with pytest.raises(InvalidRecordError):
        message_set_to_batch(b"")
    inner = encode_message(0, 1, None, b"x", attributes=1)  # "compressed" inner message
    wrapper = encode_message(0, 1, None, compress(1, inner), attributes=1)
    with pytest.raises(InvalidRecordError):
        list(iter_messages(wrapper))
    mixed = encode_message(0, 1, None, compress(1, encode_message(0, 0, None, b"x")), attributes=1)
    with pytest.raises(InvalidRecordError):
        list(iter_messages(mixed))


def test_crc_is_zlib_crc32_of_magic_onwards() -> None:
    entry = encode_message(3, 1, b"k", b"v", timestamp=77)
    offset, size, crc = struct.unpack_from(">qiI", entry)
    assert (offset, size) == (3, len(entry) - 12)
    assert crc == zlib.crc32(entry[16:])


def test_lz4_header_checksum_magic0_is_broken_magic1_correct() -> None:
    data = b"hello " * 1000
    correct = lz4_frame(data)
    broken = lz4_frame(data, broken_checksum=True)
    descriptor = correct[4:6]
    assert correct[6] == (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF
    assert broken[6] == (xxhash.xxh32_intdigest(correct[:6]) >> 8) & 0xFF
    assert lz4_unframe(correct, check_header_checksum=True) == data
    assert lz4_unframe(broken, check_header_checksum=False) == data
    with pytest.raises(CorruptRecordError):
        lz4_unframe(broken, check_header_checksum=True)
    big = bytes(range(256)) * 1000  # several 64 KiB blocks, some stored raw
    assert lz4_unframe(lz4_frame(big), check_header_checksum=True) == big


def test_raw_snappy_wrapper_is_read() -> None:
    inner = encode_message(0, 1, b"k", b"v", timestamp=4)
    wrapper = encode_message(0, 1, None, compress(2, inner), attributes=2, timestamp=4)
    assert [m.key for m in iter_messages(wrapper)] == [b"k"]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=12),
    st.sampled_from([0, 1]),
    st.sampled_from([Compression.NONE, Compression.GZIP]),
    st.integers(64, 2000),
)
def test_lazy_down_conversion_is_exact_and_bounded(
    batch_sizes: list[int], magic: int, codec: Compression, chunk_bytes: int
) -> None:
    data = b""
    offset = 0
    for n in batch_sizes:
        data += build_batch(
            [(b"key", b"value-%d" % i, None, 100 + i) for i in range(n)],
            base_offset=offset,
            compression=codec,
        )
        offset += n
    reads: list[int] = []

    def read(position: int, size: int) -> bytes:
        reads.append(size)
        return data[position : position + size]

    lazy = LazyDownConversion(read, len(data), magic, 0, chunk_bytes=chunk_bytes)
    first_batch = next(iter_batches(data)).size
    assert len(lazy) >= len(data)
    out = b""
    for chunk in lazy.chunks():
        assert len(chunk) <= max(4 * max(chunk_bytes, first_batch), len(lazy))
        out += chunk
    assert len(out) == len(lazy)
    # every whole message is right; a partial one or the overflow entry ends the data
    messages = list(iter_messages(_whole_entries(out), partial_ok=True))
    assert [m.offset for m in messages] == list(range(len(messages)))
    assert len(messages) >= 1
    # each read is a header or at most one chunk (or one larger batch)
    assert max(reads) <= max(chunk_bytes, max(b.size for b in iter_batches(data)))


def _whole_entries(data: bytes) -> bytes:
    """The prefix of whole entries before an overflow entry (offset -1) or a partial one."""
    pos = 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        if offset < 0 or pos + 12 + size > len(data):
            break
        pos += 12 + size
    return data[:pos]


def test_lazy_sizes_like_kafka() -> None:
    assert len(LazyDownConversion(b"", 0, 1, 0)) == 0
    control = build_batch([(b"\x00\x00\x00\x00", b"", None, 1)], is_control=True)
    lazy = LazyDownConversion(control, len(control), 1, 0)
    assert len(lazy) == LEGACY_OVERFLOW_MIN
    assert b"".join(lazy.chunks()) == struct.pack(">qi", -1, 61)
    # a converted first batch larger than the v2 bytes sets the size
    tiny = build_batch([(None, b"", None, 1)] * 50)
    lazy = LazyDownConversion(tiny, len(tiny), 1, 0)
    assert len(lazy) == len(down_convert(tiny, 1)) > len(tiny)


def test_lazy_ends_at_a_short_read_without_skipping_batches() -> None:
    data = b"".join(
        build_batch([(b"k", b"v" * 50, None, 1)] * 3, base_offset=3 * i) for i in range(20)
    )
    short = [True]

    def read(position: int, size: int) -> bytes:  # one short read in the middle (os.pread may)
        if size > 12 and position > 0 and short[0]:
            short[0] = False
            size //= 2
        return data[position : position + size]

    lazy = LazyDownConversion(read, len(data), 1, 0, chunk_bytes=600)
    out = b"".join(lazy.chunks())
    assert len(out) == len(lazy)
    offsets = [m.offset for m in iter_messages(_whole_entries(out), partial_ok=True)]
    assert offsets == list(range(len(offsets)))  # a prefix, no gap
    assert 0 < len(offsets) < 60
