"""__consumer_offsets record formats and the group -> partition mapping."""

from __future__ import annotations

import struct

import pytest

from odradek.coordinator.records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetAndMetadata,
    OffsetCommitRecord,
    build_batch,
    decode_record,
    encode_record,
    java_string_hash,
    partition_for,
)


def test_offset_commit_roundtrip_and_layout() -> None:
    rec = OffsetCommitRecord("grp", "topic", 7, OffsetAndMetadata(42, 3, "meta", 1234))
    key, value = encode_record(rec)
    # OffsetCommitKey v1: version, group, topic, partition
    assert key == struct.pack(">h", 1) + b"\x00\x03grp" + b"\x00\x05topic" + struct.pack(">i", 7)
    # OffsetCommitValue v3: version, offset, leader epoch, metadata, commit timestamp
    assert value == struct.pack(">hqi", 3, 42, 3) + b"\x00\x04meta" + struct.pack(">q", 1234)
    assert decode_record(key, value) == rec


def test_tombstones_roundtrip() -> None:
    for rec in (OffsetCommitRecord("g", "t", 0, None), GroupMetadataRecord("g", None)):
        key, value = encode_record(rec)
        assert value is None
        assert decode_record(key, value) == rec


def test_group_metadata_roundtrip() -> None:
    value = GroupMetadataValue(
        "consumer",
        5,
        "range",
        "m1",
        999,
        (
            MemberMetadataValue("m1", None, "c1", "/h", 300, 10, b"sub", b"asg"),
            MemberMetadataValue("m2", "inst", "c2", "/h2", 300, 10, b"", b""),
        ),
    )
    rec = GroupMetadataRecord("grp", value)
    key, raw = encode_record(rec)
    assert key == struct.pack(">h", 2) + b"\x00\x03grp"
    assert raw is not None and raw[:2] == struct.pack(">h", 3)
    assert decode_record(key, raw) == rec


def test_empty_group_metadata_has_null_protocol_and_leader() -> None:
    rec = GroupMetadataRecord("g", GroupMetadataValue("consumer", 2, None, None, 5, ()))
    key, raw = encode_record(rec)
    assert decode_record(key, raw) == rec


def test_decodes_older_value_versions() -> None:
    key = encode_record(OffsetCommitRecord("g", "t", 1, None))[0]
    v1 = struct.pack(">hq", 1, 10) + b"\x00\x01m" + struct.pack(">qq", 100, 200)
    rec = decode_record(key, v1)
    assert isinstance(rec, OffsetCommitRecord) and rec.value == OffsetAndMetadata(
        10, -1, "m", 100, 200
    )
    # GroupMetadataValue v0: no rebalance timeout, no state timestamp, no instance ids
    v0 = (
        struct.pack(">h", 0)
        + b"\x00\x08consumer"
        + struct.pack(">i", 1)
        + b"\x00\x05range\x00\x02m1"
        + struct.pack(">i", 1)
        + b"\x00\x02m1\x00\x02c1\x00\x02/h"
        + struct.pack(">i", 10_000)
        + struct.pack(">i", 1)
        + b"s"
        + struct.pack(">i", 1)
        + b"a"
    )
    gkey = encode_record(GroupMetadataRecord("g", None))[0]
    grec = decode_record(gkey, v0)
    assert isinstance(grec, GroupMetadataRecord) and grec.value is not None
    (m,) = grec.value.members
    assert (
        m.member_id,
        m.session_timeout_ms,
        m.rebalance_timeout_ms,
        m.subscription,
        m.assignment,
    ) == (
        "m1",
        10_000,
        10_000,
        b"s",
        b"a",
    )


def test_unknown_key_versions_are_skipped() -> None:
    assert decode_record(struct.pack(">h", 9) + b"xx", b"") is None
    with pytest.raises(ValueError):
        decode_record(
            encode_record(OffsetCommitRecord("g", "t", 0, None))[0], struct.pack(">h", 77)
        )


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),
        ("\u00e9t\u00e9", 227742),
        ("\U0001f600", 1772899),
    ],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_partition_for_uses_kafka_abs() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    # Integer.MIN_VALUE: Kafka's Utils.abs gives 0, not a negative number
    assert partition_for("polygenelubricants", 50) == 0
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(200))


def test_build_batch_is_a_valid_v2_batch() -> None:
    from odradek.protocol.records import RecordBatch, iter_batches

    pairs = [(b"k1", b"v1"), (b"key-two" * 30, None), (b"", b"x" * 300)]
    raw = build_batch(pairs, 1_700_000_000_123)
    (batch,) = list(iter_batches(bytes(raw)))
    assert isinstance(batch, RecordBatch)
    batch.validate()
    assert batch.is_valid() and batch.magic == 2 and batch.record_count == 3
    assert (batch.producer_id, batch.base_sequence, batch.partition_leader_epoch) == (-1, -1, -1)
    assert batch.last_offset_delta == 2 and batch.max_timestamp == 1_700_000_000_123
    recs = list(batch.records())
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in recs] == [
        (i, k, v, 1_700_000_000_123, ()) for i, (k, v) in enumerate(pairs)
    ]
