"""Retention keeps its word: data past retention.ms is gone within retention.ms + the check
interval (the active segment included, rolled first when everything expired), and
explain-retention says which rule keeps the oldest data and when it goes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from odradek.clock import ManualClock
from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, LogManager
from odradek.storage.retention import SegmentInfo, explain_retention, scan_log_dir

from .conftest import T0

CHECK = 1000


def put(log: object, ts: int, n: int = 1) -> None:
    log.append(build_batch([(b"k", b"v" * 50, (), ts)] * n), 0)  # type: ignore[attr-defined]


@settings(max_examples=30, deadline=None)
@given(
    gaps=st.lists(st.integers(0, 5000), min_size=1, max_size=40),
    retention=st.integers(1000, 20_000),
    segment_ms=st.integers(500, 20_000),
)
def test_nothing_outlives_retention_plus_segment_ms_plus_check(
    gaps: list[int], retention: int, segment_ms: int
) -> None:
    """Appends at CreateTime = now, retention checks every CHECK ms: a record is deleted by
    ts + retention.ms + segment.ms + CHECK at the latest, and by ts + retention.ms + CHECK when
    no newer data arrived (the active segment is rolled and deleted)."""
    clock = ManualClock(T0)
    config = LogConfig(retention_ms=retention, segment_ms=segment_ms, segment_bytes=1 << 20)
    manager = LogManager(None, config, clock, in_memory=True, retention_check_interval_ms=CHECK)
    log = manager.get_or_create("t", 0)
    written: list[tuple[int, int]] = []  # (offset, ts)

    def tick(until: int) -> None:
        while clock.now_ms() < until:
            clock.advance(min(100, until - clock.now_ms()))
            manager.maintenance()
            for offset, ts in written:
                if offset >= log.log_start_offset:
                    assert clock.now_ms() <= ts + retention + segment_ms + CHECK + 100

    for gap in gaps:
        tick(clock.now_ms() + gap)
        written.append((log.log_end_offset, clock.now_ms()))
        put(log, clock.now_ms())
    last = written[-1][1]
    tick(last + retention + CHECK + 200)  # no new data: everything goes, the active too
    assert log.log_start_offset == log.log_end_offset
    manager.close()


def test_explain_rules() -> None:
    config = LogConfig(retention_ms=10_000, segment_ms=5000)
    active_only = [SegmentInfo(0, 100, T0, T0 + 50)]
    e = explain_retention(active_only, config, T0 + 100, retention_check_interval_ms=CHECK)
    assert e.rule == "active segment" and e.deletable_at_ms == T0 + 50 + 10_001
    assert e.deleted_by_ms == e.deletable_at_ms + CHECK
    two = [SegmentInfo(0, 100, T0, T0 + 50), SegmentInfo(5, 100, T0 + 6000, T0 + 6000)]
    e = explain_retention(two, config, T0 + 100)
    assert e.rule == "retention.ms" and e.oldest_timestamp == T0
    by_size = LogConfig(retention_ms=-1, retention_bytes=100)
    assert explain_retention(two, by_size, T0).rule == "retention.bytes"
    assert explain_retention(two, LogConfig(retention_ms=-1), T0).rule == "unlimited"
    compact = LogConfig(cleanup_policy="compact")
    e = explain_retention(two, compact, T0)
    assert e.rule == "compaction" and e.deletable_at_ms == -1


def test_explain_retention_cli(tmp_path: Path) -> None:
    from odradek.cli.topics import app

    data = tmp_path / "data"
    manager = LogManager([data], LogConfig(retention_ms=60_000, segment_bytes=200))
    log = manager.get_or_create("orders", 0)
    for i in range(5):
        put(log, T0 + i)
    manager.get_or_create("orders", 1)
    manager.close()
    assert len(scan_log_dir(data / "orders-0")) > 1
    result = CliRunner().invoke(
        app, ["explain-retention", "orders", "--log-dirs", str(data)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "Partition: 0" in result.output and "KeptBy: retention.ms" in result.output
    assert "Partition: 1" in result.output and "KeptBy: empty" in result.output
