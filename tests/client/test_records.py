"""Record codec: pure Python and compiled twins agree; murmur2 matches kafka-python; the
columnar decoder equals the row decoder."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client import _records
from odradek.client.columnar import records_to_arrow, records_to_arrow_python
from odradek.client.types import ConsumerRecord

keys = st.one_of(st.none(), st.binary(max_size=40))
header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10)))
record = st.tuples(keys, keys, st.one_of(st.none(), st.lists(header, max_size=3)), st.integers(1_600_000_000_000, 1_800_000_000_000))
batches = st.lists(st.tuples(st.lists(record, min_size=1, max_size=20), st.integers(0, 4), st.booleans()), min_size=1, max_size=5)


def _build(spec: list) -> tuple[bytes, list[tuple[int, tuple]]]:
    """Concatenated batches (control batches too) and the expected (offset, record) rows."""
    data = b""
    offset = 0
    expected = []
    for recs, codec, control in spec:
        batch = bytearray(_records.encode_batch(recs, codec=codec, base_offset=offset))
        if control:
            # mark as control batch: attributes bit 0x20, then fix the CRC
            import struct

            from crc32c import crc32c

            attrs = struct.unpack_from(">h", batch, 21)[0] | 0x20
            struct.pack_into(">h", batch, 21, attrs)
            struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
        else:
            expected += [(offset + i, r) for i, r in enumerate(recs)]
        data += bytes(batch)
        offset += len(recs)
    return data, expected


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    assert _records.murmur2(key) & 0x7FFFFFFF == kp_murmur2(key) & 0x7FFFFFFF
    for n in (1, 3, 7, 100):
        assert _records.murmur2_partition(key, n) == (kp_murmur2(key) & 0x7FFFFFFF) % n


def test_murmur2_known_values() -> None:
    # from Kafka's UtilsTest.testMurmur2
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829, b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             b"abc": 479470107}  # fmt: skip
    for k, v in cases.items():
        assert _records.murmur2(k) == v


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_compiled_twin(key: bytes) -> None:
    try:
        from odradek.client import _speedups  # type: ignore[attr-defined]
    except ImportError:
        pytest.skip("compiled twin not built")
    assert _speedups.murmur2(key) == _records.murmur2(key)


@settings(max_examples=60, deadline=None)
@given(batches)
def test_roundtrip_rows(spec: list) -> None:
    data, expected = _build(spec)
    rows, nxt = _records.decode_records("t", 2, data, check_crcs=True)
    assert nxt == sum(len(r) for r, _c, _x in spec)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in rows] == [
        (o, k, v, ts, [(hk, hv) for hk, hv in (h or [])]) for o, (k, v, h, ts) in expected
    ]


@settings(max_examples=60, deadline=None)
@given(batches)
def test_compiled_twins_equal_python(spec: list) -> None:
    try:
        from odradek.client import _speedups  # type: ignore[attr-defined]
    except ImportError:
        pytest.skip("compiled twin not built")
    data, _expected = _build(spec)
    py_rows, py_next = _records.decode_records("t", 2, data)
    c_rows, c_next = _speedups.decode_records("t", 2, data, 0, ConsumerRecord, _records.decompress)
    assert c_rows == py_rows and c_next == py_next
    assert all(type(r) is ConsumerRecord for r in c_rows)
    for recs, _codec, _control in spec:
        base = recs[0][3]
        assert _speedups.encode_records(recs, base) == _records.encode_records(recs, base)


@settings(max_examples=60, deadline=None)
@given(batches, st.integers(0, 30), st.one_of(st.none(), st.integers(0, 60)), st.booleans())
def test_columnar_equals_row_decoder(spec: list, start: int, end: int | None, headers: bool) -> None:
    data, _expected = _build(spec)
    rows, _n = _records.decode_records("topic-x", 5, data, min_offset=start)
    rows = [r for r in rows if end is None or r.offset < end]
    for fn in (records_to_arrow, records_to_arrow_python):
        rb = fn("topic-x", 5, data, include_headers=headers, start_offset=start, end_offset=end)
        rb.validate(full=True)
        assert rb.num_rows == len(rows)
        cols = rb.to_pydict()
        assert cols["key"] == [r.key for r in rows]
        assert cols["value"] == [r.value for r in rows]
        assert cols["offset"] == [r.offset for r in rows]
        assert cols["topic"] == ["topic-x"] * len(rows)
        assert cols["partition"] == [5] * len(rows)
        assert [int(t.timestamp() * 1000) for t in cols["timestamp"]] == [r.timestamp for r in rows]
        assert cols["timestampType"] == [0] * len(rows)
        if headers:
            assert cols["headers"] == [[{"key": k, "value": v} for k, v in r.headers] for r in rows]


def test_columnar_schema() -> None:
    data = _records.encode_batch([(b"k", b"v", [("h", b"1")], 1_700_000_000_123)], base_offset=7)
    rb = records_to_arrow("t", 1, data, include_headers=True)
    assert rb.schema.field("partition").type == pa.int32()
    assert rb.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert rb.schema.field("headers").type == pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    assert rb.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert rb.column("timestamp")[0].value == 1_700_000_000_123_000
    assert records_to_arrow("t", 1, data).schema.names[-1] == "timestampType"


def test_columnar_partial_trailing_batch_and_empty() -> None:
    data = _records.encode_batch([(None, b"a", None, 1)], base_offset=0) + _records.encode_batch([(None, b"b", None, 2)], base_offset=1)
    rb = records_to_arrow("t", 0, data[:-5])
    assert rb.column("value").to_pylist() == [b"a"]
    assert records_to_arrow("t", 0, b"").num_rows == 0
    assert records_to_arrow_python("t", 0, b"").num_rows == 0


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_roundtrip(codec: str) -> None:
    recs = [(b"k%d" % i, b"value-%d" % i * 10, None, 1000 + i) for i in range(200)]
    data = _records.encode_batch(recs, codec=_records.CODECS[codec])
    rows, _n = _records.decode_records("t", 0, data, check_crcs=True)
    assert [(r.key, r.value) for r in rows] == [(k, v) for k, v, _h, _t in recs]


def test_raw_snappy_accepted() -> None:
    import cramjam

    payload = b"hello snappy" * 100
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert _records.decompress(2, raw) == payload


def test_crc_mismatch_detected() -> None:
    from odradek.client.errors import KafkaError

    data = bytearray(_records.encode_batch([(None, b"abc", None, 1)]))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as exc:
        _records.decode_records("t", 0, bytes(data), check_crcs=True)
    assert exc.value.code == 2


def test_read_committed_skips_aborted() -> None:
    import struct

    from crc32c import crc32c

    def txn(recs: list, base: int, pid: int, control: bool = False) -> bytes:
        b = bytearray(_records.encode_batch(recs, base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0))
        struct.pack_into(">h", b, 21, 0x10 | (0x20 if control else 0))
        struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
        return bytes(b)

    data = (
        txn([(None, b"aborted", None, 1)], 0, 7)
        + txn([(None, b"committed", None, 1)], 1, 8)
        + txn([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", None, 1)], 2, 7, control=True)
        + _records.encode_batch([(None, b"plain", None, 1)], base_offset=3)
    )
    rows, nxt = _records.decode_records("t", 0, data, aborted=[(7, 0)], read_committed=True)
    assert [r.value for r in rows] == [b"committed", b"plain"] and nxt == 4
    rows, _ = _records.decode_records("t", 0, data)
    assert [r.value for r in rows] == [b"aborted", b"committed", b"plain"]


def test_consumer_checks_crcs_before_the_compiled_decoder() -> None:
    from odradek.client.aio.consumer import _check_crcs, _decode
    from odradek.client.errors import KafkaError

    good = _records.encode_batch([(None, b"abc", None, 1)])
    _check_crcs(good)
    bad = bytearray(good)
    bad[-2] ^= 0x01  # a value byte: only the CRC notices
    for check in (True, False):
        if check:
            with pytest.raises(KafkaError):
                _decode("t", 0, bytes(bad), 0, None, False, True)
        else:
            rows, _n = _decode("t", 0, bytes(bad), 0, None, False, False)
            assert len(rows) == 1


@settings(max_examples=40, deadline=None)
@given(st.lists(record, min_size=1, max_size=20), st.integers(0, 4))
def test_agrees_with_protocol_records(recs: list, codec: int) -> None:
    """The client's codec and odradek.protocol.records (written independently) read each
    other's batches identically."""
    from odradek.protocol import records as protocol_records

    ours = _records.encode_batch(recs, codec=codec, base_offset=3)
    theirs = protocol_records.build_batch([(k, v, h or (), ts) for k, v, h, ts in recs], compression=codec, base_offset=3)
    for data in (ours, theirs):
        (batch,) = list(protocol_records.iter_batches(data))
        batch.validate()
        proto_rows = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch.records()]
        rows, _n = _records.decode_records("t", 0, data, check_crcs=True)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in rows] == proto_rows
