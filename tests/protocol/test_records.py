"""RecordBatch v2: build -> parse round trips, CRC, partial batches, stamping, codecs."""

from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchBuilder,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    compress,
    decompress,
    encode_records,
    finish_batch,
    iter_batch_headers,
    iter_batches,
    iter_records,
    set_log_append_time,
    stamp_batch,
)

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=4).map(tuple)
timestamps = st.integers(min_value=0, max_value=2**41)
record_tuples = st.tuples(maybe_bytes, maybe_bytes, headers, timestamps)
codecs = st.sampled_from(list(Compression))

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _expected(records: list[tuple], base_offset: int) -> list[Record]:
    return [Record(base_offset + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(records)]


@FAST
@given(
    records=st.lists(record_tuples, min_size=1, max_size=30),
    codec=codecs,
    base_offset=st.integers(min_value=0, max_value=2**62),
    producer_id=st.integers(min_value=-1, max_value=2**62),
    base_sequence=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_build_parse_round_trip(
    records: list[tuple], codec: Compression, base_offset: int, producer_id: int, base_sequence: int
) -> None:
    data = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=3,
        base_sequence=base_sequence,
        partition_leader_epoch=7,
    )
    batch = RecordBatch(data)
    batch.validate()
    assert batch.is_valid()
    assert batch.size == len(data) == batch.batch_length + LOG_OVERHEAD
    assert batch.magic == 2
    assert batch.compression == codec
    assert batch.base_offset == base_offset
    assert batch.record_count == len(records)
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.producer_id == producer_id
    assert batch.producer_epoch == 3
    assert batch.base_sequence == base_sequence
    assert batch.partition_leader_epoch == 7
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert batch.base_timestamp == records[0][3]
    assert batch.max_timestamp == max(r[3] for r in records)
    assert list(batch.records()) == _expected(records, base_offset)
    assert bytes(batch.raw()) == data
    header = batch.header()
    assert header.base_offset == base_offset and header.record_count == len(records)
    assert header.crc == batch.crc == batch.compute_crc()


@FAST
@given(records=st.lists(record_tuples, min_size=1, max_size=10), codec=codecs)
def test_builder_matches_build_batch(records: list[tuple], codec: Compression) -> None:
    builder = BatchBuilder(compression=codec)
    for i, (k, v, h, ts) in enumerate(records):
        assert builder.append(k, v, h, ts) == i
    assert len(builder) == len(records)
    data = builder.build()
    if codec == Compression.NONE:
        assert builder.estimated_size == len(data)
    assert data == build_batch(records, compression=codec)
    # Record objects are accepted as input too.
    parsed = list(RecordBatch(data).records())
    assert build_batch(parsed, compression=codec) == data


@FAST
@given(records=st.lists(record_tuples, min_size=1, max_size=8), codec=codecs, data=st.data())
def test_flipped_byte_fails_crc(
    records: list[tuple], codec: Compression, data: st.DataObject
) -> None:
    batch_bytes = bytearray(build_batch(records, compression=codec))
    position = data.draw(st.integers(min_value=21, max_value=len(batch_bytes) - 1))
    bit = data.draw(st.integers(min_value=0, max_value=7))
    batch_bytes[position] ^= 1 << bit
    batch = RecordBatch(batch_bytes)
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError):
        batch.validate()


def test_crc_field_flip_is_detected() -> None:
    data = bytearray(build_batch([(b"k", b"v", (), 1)]))
    data[17] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        RecordBatch(data).validate()


@FAST
@given(
    batches=st.lists(st.lists(record_tuples, min_size=1, max_size=5), min_size=1, max_size=5),
    data=st.data(),
)
def test_iter_batches_stops_before_partial_batch(
    batches: list[list[tuple]], data: st.DataObject
) -> None:
    encoded = [build_batch(recs, base_offset=i * 100) for i, recs in enumerate(batches)]
    buffer = b"".join(encoded)
    cut = data.draw(st.integers(min_value=0, max_value=len(buffer)))
    whole = []
    total = 0
    for e in encoded:
        if total + len(e) > cut:
            break
        whole.append(e)
        total += len(e)
    found = list(iter_batches(memoryview(buffer)[:cut]))
    assert [bytes(b.raw()) for b in found] == whole
    assert [b.base_offset for b in found] == [i * 100 for i in range(len(whole))]
    for b in found:
        b.validate()


def test_iter_batches_with_start_offset() -> None:
    a = build_batch([(b"a", b"1", (), 1)])
    b = build_batch([(b"b", b"2", (), 2)], base_offset=1)
    found = list(iter_batches(a + b, len(a)))
    assert len(found) == 1 and found[0].base_offset == 1 and found[0].offset == len(a)


def test_iter_batches_impossible_length() -> None:
    data = bytearray(build_batch([(b"a", b"1", (), 1)]))
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data))


@FAST
@given(
    records=st.lists(record_tuples, min_size=1, max_size=8),
    codec=codecs,
    base_offset=st.integers(min_value=0, max_value=2**63 - 1),
    epoch=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_stamp_batch_keeps_crc_valid(
    records: list[tuple], codec: Compression, base_offset: int, epoch: int
) -> None:
    data = bytearray(build_batch(records, compression=codec))
    view = RecordBatch(data)
    stamp_batch(data, 0, base_offset, epoch)
    assert view.base_offset == base_offset
    assert view.partition_leader_epoch == epoch
    view.validate()
    assert [r.offset for r in view.records()] == [base_offset + i for i in range(len(records))]


def test_stamp_batch_in_memoryview_at_offset() -> None:
    a = build_batch([(b"a", b"1", (), 1)])
    b = build_batch([(b"b", b"2", (), 2), (b"c", b"3", (), 3)])
    buf = bytearray(a + b)
    mv = memoryview(buf)
    for batch, base in zip(iter_batches(mv), (10, 11), strict=True):
        stamp_batch(mv, batch.offset, base, 4)
    assert [(b.base_offset, b.last_offset, b.is_valid()) for b in iter_batches(buf)] == [
        (10, 10, True),
        (11, 12, True),
    ]


@FAST
@given(records=st.lists(record_tuples, min_size=1, max_size=8), codec=codecs, now=timestamps)
def test_set_log_append_time(records: list[tuple], codec: Compression, now: int) -> None:
    data = bytearray(build_batch(records, compression=codec))
    set_log_append_time(data, 0, now)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == now
    assert batch.compression == codec
    assert [r.timestamp for r in batch.records()] == [now] * len(records)


@pytest.mark.parametrize("codec", list(Compression))
@given(payload=st.binary(max_size=5000))
@settings(max_examples=25, deadline=None)
def test_compress_round_trip(codec: Compression, payload: bytes) -> None:
    assert decompress(codec, compress(codec, payload)) == payload
    assert decompress(codec, memoryview(compress(codec, payload))) == payload


def _xerial(payload: bytes, block_size: int) -> bytes:
    out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
    for i in range(0, len(payload), block_size):
        block = bytes(cramjam.snappy.compress_raw(payload[i : i + block_size]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def test_snappy_reads_xerial_framing() -> None:
    payload = bytes(range(256)) * 100
    assert decompress(Compression.SNAPPY, _xerial(payload, 4096)) == payload
    # A whole batch whose records were compressed by a Java client (xerial framing).
    records = [(b"k%d" % i, b"v" * i, (), 1000 + i) for i in range(50)]
    raw = bytearray(build_batch(records))
    body = _xerial(bytes(raw[BATCH_HEADER_SIZE:]), 1000)
    batch = bytearray(raw[:BATCH_HEADER_SIZE] + body)
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">h", batch, 21, Compression.SNAPPY)
    from crc32c import crc32c

    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    view = RecordBatch(batch)
    view.validate()
    assert list(view.records()) == _expected(records, 0)


def test_snappy_writes_raw() -> None:
    assert not compress(Compression.SNAPPY, b"x" * 100).startswith(b"\x82SNAPPY")


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompress_garbage_is_corrupt(codec: Compression) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09garbage!")
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"definitely not compressed data")


def test_validate_rules() -> None:
    data = bytearray(build_batch([(b"a", b"1", (), 1), (b"b", b"2", (), 2)]))
    wrong_magic = bytearray(data)
    wrong_magic[16] = 1
    with pytest.raises(InvalidRecordError):
        RecordBatch(wrong_magic).validate()
    with pytest.raises(CorruptRecordError):
        RecordBatch(data[:-1]).validate()
    with pytest.raises(CorruptRecordError):
        RecordBatch(data[:40])
    bad_count = bytearray(data)
    struct.pack_into(">i", bad_count, 57, 3)
    from crc32c import crc32c

    struct.pack_into(">I", bad_count, 17, crc32c(bytes(bad_count[21:])))
    with pytest.raises(InvalidRecordError):
        RecordBatch(bad_count).validate()
    # records() notices the count mismatch too
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(bad_count).records())


@FAST
@given(records=st.lists(record_tuples, min_size=1, max_size=5), data=st.data())
def test_records_on_mangled_bytes_raise_only_corrupt(
    records: list[tuple], data: st.DataObject
) -> None:
    batch = bytearray(build_batch(records))
    position = data.draw(st.integers(min_value=BATCH_HEADER_SIZE, max_value=len(batch) - 1))
    batch[position] = data.draw(st.integers(min_value=0, max_value=255))
    try:
        list(RecordBatch(batch).records())
    except CorruptRecordError:
        pass


def test_last_sequence_wraps() -> None:
    data = build_batch(
        [(None, b"v", (), 1)] * 3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2
    )
    assert RecordBatch(data).last_sequence == 0
    assert RecordBatch(build_batch([(None, b"v", (), 1)])).last_sequence == -1


def test_flags_and_empty_builder() -> None:
    data = build_batch(
        [(None, b"\x00\x00\x00\x00\x00\x00", (), 5)], is_transactional=True, is_control=True
    )
    batch = RecordBatch(data)
    assert batch.is_transactional and batch.is_control
    with pytest.raises(ValueError):
        BatchBuilder().build()
    assert "RecordBatch(" in repr(batch)


@FAST
@given(st.lists(record_tuples, min_size=1, max_size=20), codecs, st.integers(-1, 2**40))
def test_builder_build_batch_and_encode_records_agree(
    records: list[tuple], codec: Compression, base_timestamp: int
) -> None:
    """BatchBuilder, build_batch and encode_records + finish_batch write the same bytes."""
    builder = BatchBuilder(base_offset=4, compression=codec, base_timestamp=base_timestamp)
    for key, value, hdrs, ts in records:
        builder.append(key, value, hdrs, ts)
    built = builder.build()
    assert built == build_batch(
        records, base_offset=4, compression=codec, base_timestamp=base_timestamp
    )
    data, count, _max = encode_records(records, base_timestamp)
    assert count == len(records)
    max_ts = max(r[3] for r in records)
    assert built == finish_batch(
        data, count, base_timestamp, max_ts, compression=codec, base_offset=4
    )
    assert list(iter_records(data, count, 4, base_timestamp, None)) == _expected(records, 4)


def test_xerial_snappy_roundtrip() -> None:
    payload = bytes(range(256)) * 500  # > one 32 KiB xerial block
    framed = compress(Compression.SNAPPY, payload, xerial=True)
    assert framed[:8] == b"\x82SNAPPY\x00"
    assert decompress(Compression.SNAPPY, framed) == payload
    batch = finish_batch(
        *encode_records([(None, payload, None, 5)], 5)[:2],
        5,
        5,
        compression=Compression.SNAPPY,
        xerial=True,
    )
    (rb,) = iter_batches(batch)
    rb.validate()
    assert [r.value for r in rb] == [payload]


def test_iter_batch_headers() -> None:
    one = build_batch([(b"k", b"v", (), 1)], base_offset=3)
    two = build_batch([(None, b"a", (), 2), (None, b"b", (), 3)], base_offset=4)
    data = one + two + two[:30]
    found = list(iter_batch_headers(data))
    assert [pos for pos, _h in found] == [0, len(one)]
    assert [h[0] for _p, h in found] == [3, 4]
    assert [h[12] for _p, h in found] == [1, 2]
    bad = bytearray(one)
    struct.pack_into(">i", bad, 8, 0)
    with pytest.raises(CorruptRecordError):
        list(iter_batch_headers(bytes(bad)))
