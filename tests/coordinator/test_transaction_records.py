"""__transaction_state record formats (golden bytes from Kafka's JSON specs, by hand) and the
transactional id -> partition mapping."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.transaction.records import (
    TransactionLogRecord,
    TransactionLogValue,
    build_batch,
    decode_key,
    decode_record,
    decode_value,
    encode_record,
    encode_value,
    iter_pairs,
    partition_for,
)
from odradek.coordinator.transaction.state import TransactionState as S
from odradek.protocol.records import RecordBatch


def test_key_golden() -> None:
    key, value = encode_record(TransactionLogRecord("my-txn", None))
    assert key == b"\x00\x00" + b"\x00\x06my-txn"
    assert value is None
    assert decode_key(key) == "my-txn"
    assert decode_record(key, None) == TransactionLogRecord("my-txn", None)


def test_value_v0_golden() -> None:
    v = TransactionLogValue(1000, 2, 60000, S.ONGOING, (("b", 1), ("a", 3), ("a", 0)), 5, 4)
    expected = (
        struct.pack(">hqhib", 0, 1000, 2, 60000, 1)  # version, pid, epoch, timeout, Ongoing
        + struct.pack(">i", 2)  # two topics, sorted
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 3)
        + b"\x00\x01b"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 5, 4)  # last update, start
    )
    assert encode_value(v) == expected
    assert decode_value(expected) == TransactionLogValue(
        1000, 2, 60000, S.ONGOING, (("a", 0), ("a", 3), ("b", 1)), 5, 4
    )


def test_value_v0_empty_has_null_partitions() -> None:
    v = TransactionLogValue(7, 0, 100, S.EMPTY, (), 9, -1)
    data = encode_value(v)
    assert data == struct.pack(">hqhib", 0, 7, 0, 100, 0) + struct.pack(">i", -1) + struct.pack(
        ">qq", 9, -1
    )
    assert decode_value(data) == v


def test_value_v1_golden_with_tagged_fields() -> None:
    v = TransactionLogValue(
        1000, 2, 60000, S.PREPARE_COMMIT, (("a", 0),), 5, 4, previous_producer_id=999
    )
    expected = (
        struct.pack(">hqhib", 1, 1000, 2, 60000, 2)
        + b"\x02"  # compact array: 1 topic
        + b"\x02a"  # compact string "a"
        + b"\x02"  # compact array: 1 partition
        + struct.pack(">i", 0)
        + b"\x00"  # the entry's tagged fields
        + struct.pack(">qq", 5, 4)
        + b"\x01"  # one tagged field
        + b"\x00\x08"  # tag 0 (PreviousProducerId), 8 bytes
        + struct.pack(">q", 999)
    )
    assert encode_value(v, 1) == expected
    assert decode_value(expected) == v


def test_unknown_versions() -> None:
    assert decode_key(struct.pack(">h", 1) + b"\x00\x01g") is None  # e.g. another record type
    with pytest.raises(ValueError):
        decode_value(struct.pack(">h", 9))
    with pytest.raises(ValueError):
        decode_value(struct.pack(">h", 0) + b"\x00")  # truncated


_values = st.builds(
    TransactionLogValue,
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 32767),
    st.integers(0, 2**31 - 1),
    st.sampled_from([s for s in S if s is not S.PREPARE_EPOCH_FENCE]),
    st.lists(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 1000)), unique=True).map(
        lambda ps: tuple(sorted(ps))
    ),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(0, 2),
)


@given(_values, st.sampled_from([0, 1]))
def test_value_roundtrip(v: TransactionLogValue, version: int) -> None:
    if v.state is S.EMPTY:
        v = TransactionLogValue(v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.state, (),
                                v.last_update_timestamp_ms, v.start_timestamp_ms,
                                v.previous_producer_id, v.next_producer_id,
                                v.client_transaction_version)  # fmt: skip
    decoded = decode_value(encode_value(v, version))
    if version == 0:  # v0 has no tagged fields
        v = TransactionLogValue(*[getattr(v, f) for f in TransactionLogValue.__slots__[:7]])
    assert decoded == v


def test_batch_of_records_reads_back() -> None:
    records = [
        TransactionLogRecord("a", TransactionLogValue(1, 0, 10, S.EMPTY, (), 1, -1)),
        TransactionLogRecord("b", None),
    ]
    batch = RecordBatch(build_batch([encode_record(r) for r in records], 1234))
    batch.validate()
    assert list(iter_pairs((r.key, r.value) for r in batch.records())) == records


@pytest.mark.parametrize(
    ("txn_id", "partition"),
    # Java: Utils.abs("txn-1".hashCode()) % 50 etc., computed from String.hashCode by hand:
    # "a".hashCode() = 97; "polygenelubricants".hashCode() = Integer.MIN_VALUE -> abs gives 0
    [("a", 97 % 50), ("polygenelubricants", 0), ("", 0)],
)
def test_partition_for(txn_id: str, partition: int) -> None:
    assert partition_for(txn_id, 50) == partition
