"""Compaction of logs holding transactions, to Kafka's results (the scenarios of Kafka's
``LogCleanerTest``: the same appends, the same expected keys and offsets after each pass).

Kafka's helpers, in this file's terms: ``keys(log)`` is the keys of the data records left (in
offset order), ``offsets(log)`` the offsets of every record left that has a key and a value,
control records included (Kafka's ``offsetsInLog``). A pass is ``clean(log, now_ms)``: the
whole log below the active segment, as Kafka's ``doClean(LogToClean(tp, log, 0,
activeSegment.baseOffset), currentTime)``.
"""

from __future__ import annotations

from typing import Any

import pytest

from odradek.protocol.records import Compression, RecordBatch, build_batch, iter_batches
from odradek.storage import LogConfig
from odradek.storage.cleaner import CleanerConfig, CleanerStats, LogToClean, clean_log
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.transaction_index import AbortedTxn, ControlRecordType, build_control_batch

from .conftest import T0, LogFactory, read_bytes

RETENTION = 86_400_000  # delete.retention.ms (Kafka's default, as in its tests)
LATER = T0 + RETENTION + 1  # a pass past every horizon set at T0
CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=1 << 20, delete_retention_ms=RETENTION)


class Producer:
    """A transactional producer appending one batch per call, sequences counting up."""

    def __init__(self, log: Any, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.sequence = log, pid, epoch, 0

    def __call__(self, *keys: int) -> None:
        rows = [(str(k).encode(), str(k).encode(), (), T0) for k in keys]
        batch = build_batch(
            rows,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=True,
        )
        self.sequence += len(keys)
        self.log.append(batch, 0)

    def commit(self) -> None:
        self.log.append(
            build_control_batch(self.pid, self.epoch, ControlRecordType.COMMIT, 0, T0), 0
        )

    def abort(self) -> None:
        self.log.append(
            build_control_batch(self.pid, self.epoch, ControlRecordType.ABORT, 0, T0), 0
        )


def all_batches(log: Any) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = list(iter_batches(read_bytes(log.read(offset, 1 << 20).records)))
        assert got and all(b.is_valid() for b in got)
        out.extend(got)
        offset = got[-1].last_offset + 1
    return out


def keys(log: Any) -> list[int]:
    return [
        int(r.key)
        for b in all_batches(log)
        if not b.is_control
        for r in b.records()
        if r.key is not None and r.value is not None
    ]


def offsets(log: Any) -> list[int]:
    return [
        r.offset
        for b in all_batches(log)
        for r in b.records()
        if r.key is not None and r.value is not None
    ]


def clean(log: Any, now_ms: int = T0) -> CleanerStats:
    end = log.segments[-1].base_offset
    stats = clean_log(
        LogToClean(log, 0, end, 0, 1), CleanerConfig(dedupe_buffer_size=1 << 20), now_ms=now_ms
    )
    assert stats.end_offset == end
    return stats


@pytest.fixture
def log(make_log: LogFactory) -> Any:
    return make_log(CONFIG)


def test_basic_transaction_aware_cleaning(log: Any) -> None:
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1(1, 2)
    p2(2, 3)
    p1(3, 4)
    p1.abort()
    p2.commit()
    p1(2)
    p1.commit()
    state = ProducerStateManager.load(log, None)
    aborted = state.aborted_transactions(0, log.log_end_offset)
    assert aborted == [AbortedTxn(1, 0, 6, 2)]
    log.roll()
    clean(log)
    assert keys(log) == [3, 2]
    assert offsets(log) == [3, 6, 7, 8, 9]
    # the abort marker is still there: so is its aborted transaction
    assert state.aborted_transactions(0, log.log_end_offset) == aborted


def test_clean_with_transactions_spanning_segments(log: Any) -> None:
    p1, p2, p3 = Producer(log, 1), Producer(log, 2), Producer(log, 3)
    p1(1, 2)
    p3(2, 3)
    p2(3, 4)
    log.roll()
    p2(5, 6)
    p3(6, 7)
    p1(7, 8)
    p2.abort()
    p3(8, 9)
    p3.commit()
    p1(9, 10)
    p1.abort()
    # only the first segment is cleaned: its transactions ended in the active segment
    clean(log)
    assert keys(log) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    log.roll()
    p2(11)
    p1(12)
    clean(log)
    assert keys(log) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(log: Any) -> None:
    p = Producer(log, 1)
    p(1)
    p(2, 3)
    p.commit()
    p(2)
    p.commit()
    log.roll()
    # the marker stays while records of its transaction are left
    clean(log)
    assert keys(log) == [1, 3, 2]
    assert offsets(log) == [0, 2, 3, 4, 5]
    p(1, 3)
    p.commit()
    log.roll()
    clean(log)
    assert keys(log) == [2, 1, 3]
    assert offsets(log) == [3, 4, 5, 6, 7, 8]
    # the transaction of the marker at 3 is empty now: its horizon is set, not passed
    clean(log)
    assert offsets(log) == [3, 4, 5, 6, 7, 8]
    (marker,) = [b for b in all_batches(log) if b.base_offset == 3]
    assert marker.is_control and marker.delete_horizon_ms == T0 + RETENTION
    clean(log, T0 + RETENTION)
    assert keys(log) == [2, 1, 3]
    assert offsets(log) == [4, 5, 6, 7, 8]


def test_deleted_batches_with_no_messages_read(log: Any) -> None:
    p = Producer(log, 1)
    p(1)
    p.abort()
    p(2)
    p(2)
    p.commit()
    log.roll()
    clean(log)
    assert keys(log) == [2]
    assert offsets(log) == [1, 3, 4]
    clean(log)
    clean(log, LATER)
    assert keys(log) == [2]
    assert offsets(log) == [3, 4]


def test_abort_marker_removal_forgets_the_aborted_transaction(log: Any) -> None:
    """The abort marker goes one delete horizon after its transaction's records; the aborted
    transaction leaves the producer state and the .txnindex with it (a read_committed
    consumer told of it with no marker left would skip the producer's later records)."""
    p = Producer(log, 1)
    p(1)
    p(2, 3)
    p.abort()
    p(3)
    p.commit()
    state = ProducerStateManager.load(log, None)
    assert state.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(1, 0, 3, 4)]
    log.roll()
    clean(log)
    assert keys(log) == [3]
    assert offsets(log) == [3, 4, 5]
    assert state.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(1, 0, 3, 4)]
    clean(log)
    clean(log, LATER)
    assert keys(log) == [3]
    assert offsets(log) == [4, 5]
    assert state.aborted_transactions(0, log.log_end_offset) == []
    # and so does a state loaded again (from the .txnindex files and the log)
    again = ProducerStateManager.load(log, None)
    assert again.aborted_transactions(0, log.log_end_offset) == []


def test_aborted_transaction_spanning_segments(log: Any) -> None:
    """The last batch of a producer stays (empty) and so does the marker of its transaction."""
    p = Producer(log, 1)
    p(1)
    log.roll()
    p.abort()
    log.roll()
    clean(log)
    assert offsets(log) == [1]
    assert [b.last_offset for b in all_batches(log)] == [0, 1]
    clean(log, LATER)
    assert offsets(log) == [1]
    assert [b.last_offset for b in all_batches(log)] == [0, 1]


def test_open_transaction_is_not_cleaned_past_its_first_offset(log: Any) -> None:
    """Nothing at or past the first offset of a transaction without its marker (below the
    high watermark) is cleaned: Kafka's last stable offset bounds the cleaning."""
    p1, p2 = Producer(log, 1), Producer(log, 2)
    log.append(build_batch([(b"1", b"a", (), T0)]), 0)
    log.append(build_batch([(b"1", b"b", (), T0)]), 0)
    log.roll()
    p1(1)  # open
    log.roll()
    log.append(build_batch([(b"1", b"c", (), T0)]), 0)
    p2(2)
    p2.abort()
    log.roll()
    end = log.segments[-1].base_offset
    stats = clean_log(LogToClean(log, 0, end, 0, 1), CleanerConfig(dedupe_buffer_size=1 << 20))
    assert stats.first_unstable_offset == 2
    assert stats.end_offset == 2  # the first segment only
    assert offsets(log) == [1, 2, 3, 4, 5]
    p1.commit()
    log.roll()
    clean(log)
    assert keys(log) == [1]
    # p1's record (superseded at 3) and p2's (aborted) go, their batches stay empty (each the
    # last of its producer), and so do the markers of those transactions
    assert offsets(log) == [3, 5, 6]
    assert [(b.base_offset, b.record_count) for b in all_batches(log)] == [
        (2, 0),
        (3, 1),
        (4, 0),
        (5, 1),
        (6, 1),
    ]


def test_compressed_transactional_batches(log: Any) -> None:
    p = Producer(log, 1)
    batch = build_batch(
        [(b"1", b"x", (), T0), (b"2", None, (), T0)],
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        compression=Compression.ZSTD,
    )
    log.append(batch, 0)
    p.sequence = 2
    p(1)
    p.commit()
    log.roll()
    clean(log)
    got = [
        (r.offset, r.key, r.value)
        for b in all_batches(log)
        if not b.is_control
        for r in b.records()
    ]
    assert got == [(1, b"2", None), (2, b"1", b"1")]
    (first,) = [b for b in all_batches(log) if b.base_offset == 0]
    assert first.compression == Compression.ZSTD and first.delete_horizon_ms == T0 + RETENTION
    clean(log, LATER)
    got = [
        (r.offset, r.key, r.value)
        for b in all_batches(log)
        if not b.is_control
        for r in b.records()
    ]
    assert got == [(2, b"1", b"1")]


def test_marker_past_the_high_watermark_leaves_its_transaction_unstable(log: Any) -> None:
    """A marker not yet replicated (at or past the high watermark) does not end its
    transaction for the cleaner: Kafka's last stable offset counts it as unstable."""
    log.high_watermark_follows_leo = False
    p = Producer(log, 1)
    p(1)
    log.append(build_batch([(b"1", b"b", (), T0)]), 0)
    log.roll()
    p.abort()
    log.update_high_watermark(2)
    stats = clean_log(LogToClean(log, 0, 2, 0, 1), CleanerConfig(dedupe_buffer_size=1 << 20))
    assert stats.first_unstable_offset == 0 and stats.end_offset == 0
    assert [(b.base_offset, b.record_count) for b in all_batches(log)] == [(0, 1), (1, 1), (2, 1)]
    log.update_high_watermark(3)
    stats = clean_log(LogToClean(log, 0, 2, 0, 1), CleanerConfig(dedupe_buffer_size=1 << 20))
    assert stats.first_unstable_offset == -1 and stats.end_offset == 2
    # the aborted record goes; its batch stays empty (the producer's last)
    assert [(b.base_offset, b.record_count) for b in all_batches(log)] == [(0, 0), (1, 1), (2, 1)]
