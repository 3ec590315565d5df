"""The PartitionLog contract, run against both engines (FileLog and MemoryLog)."""

from __future__ import annotations

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records import RecordBatch, TimestampType, iter_batches
from odradek.storage import (
    CorruptRecordError,
    InvalidRecordError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
)

from .conftest import T0, LogFactory, make_batch, read_bytes


def batches_of(
    log: PartitionLog, offset: int, max_bytes: int = 1 << 30, **kw: object
) -> list[RecordBatch]:
    return list(iter_batches(read_bytes(log.read(offset, max_bytes, **kw).records)))  # type: ignore[arg-type]


def all_batches(log: PartitionLog, offset: int) -> list[RecordBatch]:
    """Every batch from ``offset`` to the end, reading segment after segment."""
    out: list[RecordBatch] = []
    while offset < log.log_end_offset:
        got = batches_of(log, offset, 1 << 20)
        assert got
        out += got
        offset = got[-1].last_offset + 1
    return out


def test_is_a_partition_log(make_log: LogFactory) -> None:
    log = make_log()
    assert isinstance(log, PartitionLog)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)


def test_append_assigns_offsets_and_stamps(make_log: LogFactory) -> None:
    log = make_log()
    r1 = log.append(make_batch(3), leader_epoch=7)
    r2 = log.append(bytearray(make_batch(2)), leader_epoch=7)
    assert (r1.base_offset, r1.last_offset, r1.log_append_time_ms, r1.log_start_offset) == (
        0,
        2,
        -1,
        0,
    )
    assert (r2.base_offset, r2.last_offset) == (3, 4)
    assert log.log_end_offset == log.high_watermark == 5
    got = batches_of(log, 0)
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch) for b in got] == [
        (0, 2, 7),
        (3, 4, 7),
    ]
    assert all(b.is_valid() for b in got)
    assert [r.offset for b in got for r in b.records()] == [0, 1, 2, 3, 4]


def test_append_several_batches_in_one_buffer(make_log: LogFactory) -> None:
    log = make_log()
    log.append(make_batch(1), 0)
    result = log.append(make_batch(2) + make_batch(3) + make_batch(1), 0)
    assert (result.base_offset, result.last_offset) == (1, 6)
    assert [(b.base_offset, b.last_offset) for b in batches_of(log, 0)] == [
        (0, 0),
        (1, 2),
        (3, 5),
        (6, 6),
    ]


@pytest.mark.parametrize("damage", ["crc", "magic", "truncated", "count", "short_length"])
def test_bad_batch_rejected_and_nothing_written(make_log: LogFactory, damage: str) -> None:
    log = make_log()
    log.append(make_batch(2), 0)
    good, bad = make_batch(2), bytearray(make_batch(2))
    expected: type[Exception] = CorruptRecordError
    if damage == "crc":
        bad[-1] ^= 0xFF
    elif damage == "magic":
        bad[16] = 1
        expected = InvalidRecordError
    elif damage == "truncated":
        bad = bad[:-3]
    elif damage == "count":
        bad[57:61] = (5).to_bytes(4, "big")
        from crc32c import crc32c

        bad[17:21] = crc32c(bytes(bad[21:])).to_bytes(4, "big")
        expected = InvalidRecordError
    elif damage == "short_length":
        bad[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(expected):
        log.append(good + bytes(bad), 0)
    assert log.log_end_offset == 2
    assert [(b.base_offset, b.last_offset) for b in batches_of(log, 0)] == [(0, 1)]
    with pytest.raises(InvalidRecordError):
        log.append(b"", 0)


def test_max_message_bytes(make_log: LogFactory) -> None:
    log = make_log(LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(1, value_size=300), 0)
    assert log.log_end_offset == 0


def test_log_append_time(make_log: LogFactory, clock: ManualClock) -> None:
    log = make_log()
    result = log.append(make_batch(2, ts=5), 0, now_ms=T0 + 42, log_append_time=True)
    assert result.log_append_time_ms == T0 + 42
    (batch,) = batches_of(log, 0)
    assert batch.is_valid()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == T0 + 42
    assert [r.timestamp for r in batch.records()] == [T0 + 42, T0 + 42]
    # topic-level message.timestamp.type=LogAppendTime uses the clock
    log2 = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    assert log2.append(make_batch(1), 0).log_append_time_ms == clock.now_ms()


def test_read_rules(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=100))
    sizes = []
    for _ in range(20):
        batch = make_batch(5, value_size=30)
        sizes.append(len(batch))
        log.append(batch, 0)
    assert log.log_end_offset == 100
    # starts at the batch containing the offset
    first = batches_of(log, 12)[0]
    assert (first.base_offset, first.last_offset) == (10, 14)
    # whole batches only, within max_bytes
    res = log.read(0, sizes[0] * 3 + 5)
    assert len(res.records) == sizes[0] * 3
    assert (res.high_watermark, res.log_start_offset, res.log_end_offset) == (100, 0, 100)
    # at least one whole batch even if bigger than max_bytes
    assert len(log.read(50, 1).records) == sizes[0]
    assert len(log.read(50, 1, min_one_batch=False).records) == 0
    # nothing at or past max_offset
    assert [b.base_offset for b in batches_of(log, 0, max_offset=20)] == [0, 5, 10, 15]
    assert [b.base_offset for b in batches_of(log, 0, max_offset=22)] == [0, 5, 10, 15]
    assert len(log.read(20, 1 << 20, max_offset=20).records) == 0
    # end of log: empty; past it or before the start: out of range
    assert len(log.read(100, 1000).records) == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(101, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def test_read_across_segments(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=600, index_interval_bytes=64))
    for _ in range(30):
        log.append(make_batch(2, value_size=40), 0)
    assert log.segment_count > 5
    offsets = []
    offset = 0
    while offset < log.log_end_offset:
        got = batches_of(log, offset, 300)
        assert got, offset
        offsets += [b.base_offset for b in got]
        offset = got[-1].last_offset + 1
    assert offsets == list(range(0, 60, 2))
    for target in range(60):
        first = batches_of(log, target, 1)[0]
        assert first.base_offset <= target <= first.last_offset


def test_roll_by_segment_bytes_and_explicit(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=1000))
    size = len(make_batch(1, value_size=200))
    for _ in range(10):
        log.append(make_batch(1, value_size=200), 0)
    per_segment = 1000 // size
    assert log.segment_count == -(-10 // per_segment)
    assert all(s.size <= 1000 for s in log.segments)  # type: ignore[attr-defined]
    before = log.segment_count
    log.roll()
    assert log.segment_count == before + 1
    log.roll()  # active segment empty: no-op
    assert log.segment_count == before + 1
    assert log.segment_base_offsets()[-1] == 10


def test_roll_by_segment_ms(make_log: LogFactory, clock: ManualClock) -> None:
    log = make_log(LogConfig(segment_ms=1000))
    log.append(make_batch(1, ts=T0), 0)
    log.append(make_batch(1, ts=T0 + 1000), 0)  # exactly segment.ms: no roll
    assert log.segment_count == 1
    log.append(make_batch(1, ts=T0 + 1001), 0)  # record time since first batch > segment.ms
    assert log.segment_count == 2
    # batches without timestamps: wall time since the segment was created
    log2 = make_log(LogConfig(segment_ms=1000))
    log2.append(make_batch(1, ts=-1), 0)
    clock.advance(1001)
    log2.append(make_batch(1, ts=-1), 0)
    assert log2.segment_count == 2


def test_retention_by_time(make_log: LogFactory, clock: ManualClock) -> None:
    log = make_log(LogConfig(segment_bytes=500, retention_ms=10_000))
    for i in range(10):
        log.append(make_batch(1, ts=T0 + i * 1000, value_size=150), 0)
    segments = log.segment_count
    assert segments >= 4
    assert log.delete_old_segments(T0 + 10_000) == 0
    deleted = log.delete_old_segments(T0 + 14_500)  # segments whose newest record is < T0+4500
    assert deleted >= 1
    assert log.log_start_offset == log.segment_base_offsets()[0] > 0
    for seg in log.segments[:-1]:  # type: ignore[attr-defined]
        assert seg.max_timestamp >= T0 + 4500 or seg is log.segments[-1]  # type: ignore[attr-defined]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # everything expired: roll first, never delete the active segment's data unrolled
    end = log.log_end_offset
    log.delete_old_segments(T0 + 10**9)
    assert log.segment_count == 1
    assert log.log_start_offset == log.log_end_offset == end
    assert len(log.read(end, 100).records) == 0
    log.append(make_batch(1), 0)
    assert log.log_end_offset == end + 1


def test_retention_unlimited_and_compact(make_log: LogFactory) -> None:
    for config in (
        LogConfig(segment_bytes=300, retention_ms=-1),
        LogConfig(segment_bytes=300, retention_ms=1, cleanup_policy="compact"),
    ):
        log = make_log(config)
        for _ in range(5):
            log.append(make_batch(1, value_size=150), 0)
        assert log.delete_old_segments(T0 + 10**12) == 0


def test_retention_by_size(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1))
    for _ in range(20):
        log.append(make_batch(1, value_size=150), 0)
    total = log.size_in_bytes
    deleted = log.delete_old_segments()
    assert deleted > 0
    assert log.size_in_bytes <= 2500 + 1000
    assert total - log.size_in_bytes <= total - 2500
    assert log.log_start_offset == log.segment_base_offsets()[0]


def test_retention_respects_high_watermark(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=300, retention_ms=1))
    log.high_watermark_follows_leo = False
    for _ in range(6):
        log.append(make_batch(1, value_size=150), 0)
    assert log.high_watermark == 0
    assert log.delete_old_segments(T0 + 10**9) == 0
    log.update_high_watermark(2)
    deleted = log.delete_old_segments(T0 + 10**9)
    assert deleted == 2 and log.log_start_offset == 2


def test_truncate_to(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=700, index_interval_bytes=50))
    for _ in range(20):
        log.append(make_batch(3, value_size=40), 1)
    assert log.segment_count > 3
    log.truncate_to(31)  # inside batch 30..32: the whole batch goes
    assert log.log_end_offset == log.high_watermark == 30
    assert [b.last_offset for b in all_batches(log, 0)] == list(range(2, 30, 3))
    log.truncate_to(30)  # no-op at the end
    assert log.log_end_offset == 30
    result = log.append(make_batch(2), 2)
    assert (result.base_offset, result.last_offset) == (30, 31)
    assert log.leader_epoch_entries() == [(1, 0), (2, 30)]
    log.truncate_to(30)
    assert log.leader_epoch_entries() == [(1, 0)]
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.leader_epoch_entries() == []


def test_truncate_fully_and_start_at(make_log: LogFactory) -> None:
    log = make_log()
    log.append(make_batch(5), 3)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1000, 1000, 1000)
    assert log.append(make_batch(1), 4).base_offset == 1000
    assert log.segment_base_offsets() == [1000]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(999, 10)


def test_offset_for_timestamp(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=800, index_interval_bytes=100))
    # batches of 4 records with timestamps T0+10*i .. +3
    for i in range(30):
        log.append(make_batch(4, ts=T0 + 10 * i, value_size=20), 0)
    assert log.segment_count > 3
    assert log.offset_for_timestamp(T0) == (0, T0)
    assert log.offset_for_timestamp(T0 - 100) == (0, T0)
    assert log.offset_for_timestamp(T0 + 2) == (2, T0 + 2)
    assert log.offset_for_timestamp(T0 + 4) == (4, T0 + 10)  # gap: next record
    assert log.offset_for_timestamp(T0 + 153) == (63, T0 + 153)
    assert log.offset_for_timestamp(T0 + 293) == (119, T0 + 293)
    assert log.offset_for_timestamp(T0 + 294) is None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (120, -1)
    assert log.max_timestamp() == (119, T0 + 293)
    assert log.offset_for_timestamp(-3) == (119, T0 + 293)


def test_max_timestamp_out_of_order(make_log: LogFactory) -> None:
    log = make_log()
    assert log.max_timestamp() is None
    log.append(make_batch(3, ts=T0 + 100), 0)  # 0..2: +100..+102
    log.append(make_batch(3, ts=T0 + 500), 0)  # 3..5: +500..+502
    log.append(make_batch(3, ts=T0 + 200), 0)
    assert log.max_timestamp() == (5, T0 + 502)
    assert log.offset_for_timestamp(T0 + 150) == (3, T0 + 500)
    log.truncate_to(5)
    assert log.max_timestamp() == (2, T0 + 102)


def test_leader_epochs(make_log: LogFactory) -> None:
    log = make_log()
    log.append(make_batch(2), 0)
    log.append(make_batch(2), 0)
    log.append(make_batch(2), 3)
    log.assign_leader_epoch(5)  # a new leader records (epoch, LEO) at once
    log.append(make_batch(1), 5)
    assert log.leader_epoch_entries() == [(0, 0), (3, 4), (5, 6)]
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(2) == (0, 4)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(5) == (5, 7)
    assert log.end_offset_for_epoch(9) == (5, 7)


def test_flush_and_recovery_point(make_log: LogFactory, clock: ManualClock) -> None:
    log = make_log(LogConfig(flush_interval_messages=5))
    log.append(make_batch(3), 0)
    assert log.recovery_point == 0
    log.append(make_batch(3), 0)  # 6 unflushed messages >= 5
    assert log.recovery_point == 6
    log2 = make_log(LogConfig(flush_interval_ms=1000))
    log2.append(make_batch(1), 0)
    log2.maybe_flush(clock.now_ms() + 999)
    assert log2.recovery_point == 0
    log2.maybe_flush(clock.now_ms() + 1000)
    assert log2.recovery_point == 1
    log2.append(make_batch(1), 0)
    log2.flush()
    assert log2.recovery_point == 2


def test_flush_rolled_segments_on_maybe_flush(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=300))
    for _ in range(5):
        log.append(make_batch(1, value_size=150), 0)
    log.maybe_flush()
    assert log.recovery_point == log.segment_base_offsets()[-1] == 4


def test_high_watermark_is_separate(make_log: LogFactory) -> None:
    log = make_log()
    log.high_watermark_follows_leo = False
    log.append(make_batch(4), 0)
    log.append(make_batch(4), 0)
    assert (log.high_watermark, log.log_end_offset) == (0, 8)
    assert log.update_high_watermark(4) == 4
    assert len(log.read(0, 1 << 20, max_offset=log.high_watermark).records) == len(make_batch(4))
    assert log.update_high_watermark(100) == 8
    log.truncate_to(4)
    assert log.high_watermark == 4


def test_append_as_follower(make_log: LogFactory) -> None:
    from odradek.protocol.records import stamp_batch
    from odradek.storage import UnexpectedAppendOffsetError

    leader = make_log()
    leader.append(make_batch(2), 1)
    leader.append(make_batch(3), 2)
    fetched = read_bytes(leader.read(0, 1 << 20).records)
    follower = make_log()
    follower.high_watermark_follows_leo = False
    result = follower.append_as_follower(fetched)
    assert (result.base_offset, result.last_offset) == (0, 4)
    assert follower.log_end_offset == 5 and follower.high_watermark == 0
    assert follower.leader_epoch_entries() == [(1, 0), (2, 2)]
    follower.update_high_watermark(5)
    assert read_bytes(follower.read(0, 1 << 20).records) == fetched
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(fetched)  # offsets below the LEO
    gap = bytearray(make_batch(1))
    stamp_batch(gap, 0, 10, 3)  # a gap (compacted leader) is allowed
    assert follower.append_as_follower(gap).base_offset == 10
    assert follower.log_end_offset == 11
    assert follower.leader_epoch_entries() == [(1, 0), (2, 2), (3, 10)]


def test_increment_log_start_offset(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=300, retention_ms=-1))
    for _ in range(6):
        log.append(make_batch(1, value_size=150), 2)
    assert log.increment_log_start_offset(3)
    assert not log.increment_log_start_offset(2)
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert batches_of(log, 3)[0].base_offset == 3
    assert log.delete_old_segments() == 3  # segments 0, 1, 2 lie wholly below the start
    assert log.segment_base_offsets()[0] == 3
    assert log.leader_epoch_entries() == [(2, 3)]
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(7)
