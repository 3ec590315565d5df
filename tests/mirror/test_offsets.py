"""Offset-sync emission and translation (pure), with MM2's rules as the oracle."""

from __future__ import annotations

from odradek.client import TopicPartition
from odradek.mirror.offsets import OffsetSyncStore, SyncEmitter

TP = TopicPartition("t", 0)


def test_emitter_first_lag_skip_and_truncation() -> None:
    e = SyncEmitter(max_lag=10)
    emitted = [u for u in range(40) if e.update(u, u)]
    assert emitted == [0, 11, 22, 33]  # first, then downstream - (last + 1) >= 10
    assert e.promote() == (39, 39) and e.promote() is None
    assert e.update(45, 40)  # upstream skipped (compaction, markers)
    assert not e.update(46, 41)
    assert e.update(47, 5)  # downstream went back: the remote topic was recreated


def test_emitter_with_transaction_markers_downstream() -> None:
    e = SyncEmitter(max_lag=100)
    # each transaction's marker takes a downstream offset: gaps downstream are not a reason
    assert [u for u, d in [(0, 0), (1, 1), (2, 3), (3, 4)] if e.update(u, d)] == [0]


def test_translate_to_nearest_preceding_sync_never_ahead() -> None:
    s = OffsetSyncStore()
    for up, down in [(0, 0), (101, 103), (202, 206)]:
        s.add(TP, up, down)
    assert s.translate(TP, 150) is None  # not read to the end yet
    s.read_to_end = True
    assert s.translate(TP, 0) == 0
    assert s.translate(TP, 101) == 103
    assert s.translate(TP, 150) == 104  # one past the sync: never ahead of the group
    assert s.translate(TP, 10_000) == 207
    assert s.translate(TopicPartition("t", 1), 5) is None


def test_translate_before_first_sync_and_after_truncation() -> None:
    s = OffsetSyncStore()
    s.read_to_end = True
    s.add(TP, 50, 0)
    assert s.translate(TP, 49) is None
    s.add(TP, 60, 10)
    s.add(TP, 55, 12)  # the source went back: later syncs no longer hold
    assert s.syncs(TP) == [(50, 0), (55, 12)]


def test_bounded_store_keeps_what_groups_need() -> None:
    s = OffsetSyncStore(max_per_partition=100)
    s.read_to_end = True
    s.retain_from(TP, 9_000)
    for i in range(200):
        s.add(TP, i * 100, i * 100)
    assert len(s.syncs(TP)) <= 200
    # every sync a known group (at or above 9,000) may need is still there: exact within lag
    for g in range(9_000, 19_900, 37):
        assert g - s.translate(TP, g) <= 100  # type: ignore[operator]
    assert s.translate(TP, 5) == 1  # a group that moved back is still translated
