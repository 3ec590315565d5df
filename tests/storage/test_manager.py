from __future__ import annotations

from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import (
    FileLog,
    InvalidTopicError,
    KafkaStorageError,
    LogConfig,
    LogManager,
    MemoryLog,
    OffsetCheckpointFile,
)

from .conftest import T0, make_batch


def test_directories_and_checkpoints(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig(), clock)
    logs = [manager.get_or_create("orders", p) for p in range(4)]
    assert all(isinstance(log, FileLog) for log in logs)
    assert manager.get_or_create("orders", 1) is logs[1]
    assert manager.get("orders", 9) is None
    # spread over the log dirs, named <topic>-<partition>
    names = sorted(p.name for d in dirs for p in d.iterdir() if p.is_dir())
    assert names == ["orders-0", "orders-1", "orders-2", "orders-3"]
    assert all(len([p for p in d.iterdir() if p.is_dir()]) == 2 for d in dirs)
    for i, log in enumerate(logs):
        for _ in range(i + 1):
            log.append(make_batch(2), 0)
    manager.checkpoint()
    text = (tmp_path / "a" / "replication-offset-checkpoint").read_text().splitlines()
    assert text[0] == "0" and text[1] == "2"
    assert all(len(line.split(" ")) == 3 for line in text[2:])
    manager.close()
    rp = {}
    for d in dirs:
        rp.update(OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read())
    assert rp == {("orders", 0): 2, ("orders", 1): 4, ("orders", 2): 6, ("orders", 3): 8}
    # reopen: every log is found again with its offsets
    again = LogManager(dirs, LogConfig(), clock)
    assert sorted((log.topic, log.partition, log.log_end_offset) for log in again.all_logs()) == [
        ("orders", 0, 2),
        ("orders", 1, 4),
        ("orders", 2, 6),
        ("orders", 3, 8),
    ]
    again.close()


def test_lock_prevents_second_manager(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock)
    with pytest.raises(KafkaStorageError):
        LogManager([tmp_path], LogConfig(), clock)
    manager.close()
    LogManager([tmp_path], LogConfig(), clock).close()


def test_topic_configs_retention_and_delete(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock, retention_check_interval_ms=1000)
    small = LogConfig.from_topic_config({"segment.bytes": "300", "retention.ms": "5000"})
    log = manager.get_or_create("events", 0, small)
    other = manager.get_or_create("keep", 0)
    for i in range(6):
        log.append(make_batch(1, ts=T0 + i, value_size=150), 0)
        other.append(make_batch(1, ts=T0 + i, value_size=150), 0)
    assert manager.topic_config("events") is small
    manager.maintenance(T0 + 500)  # not due yet
    assert log.log_start_offset == 0
    manager.maintenance(T0 + 100_000)
    assert log.log_start_offset == 6 and other.log_start_offset == 0
    starts = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint").read()
    assert starts[("events", 0)] == 6
    manager.update_config("keep", small)
    assert other.config is small
    manager.delete_topic("events")
    assert manager.get("events", 0) is None
    assert not (tmp_path / "events-0").exists()
    manager.close()
    again = LogManager([tmp_path], LogConfig(), clock)
    assert [(log.topic, log.log_start_offset) for log in again.all_logs()] == [("keep", 0)]
    again.close()


def test_run_flush_moves_recovery_points(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], LogConfig(flush_interval_ms=1000), clock)
    log = manager.get_or_create("t", 0)
    log.append(make_batch(3), 0)
    manager.run_flush(clock.now_ms() + 1000)
    assert log.recovery_point == 3
    manager.close()


def test_in_memory(clock: ManualClock) -> None:
    manager = LogManager(None, LogConfig(), clock, in_memory=True)
    log = manager.get_or_create("t", 2)
    assert isinstance(log, MemoryLog)
    assert log.append(make_batch(2), 0).last_offset == 1
    manager.run_retention()
    manager.run_flush()
    manager.delete_topic("t")
    assert manager.all_logs() == []
    manager.close()


@pytest.mark.parametrize("name", ["", "a/b", "..", "x" * 250, "sp ace"])
def test_illegal_topic_names(clock: ManualClock, name: str) -> None:
    manager = LogManager(None, LogConfig(), clock, in_memory=True)
    with pytest.raises(InvalidTopicError):
        manager.get_or_create(name, 0)


def test_delete_topic_keeps_handed_out_regions_readable(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(file_delete_delay_ms=10_000)
    manager = LogManager([tmp_path], config, clock)
    log = manager.get_or_create("gone", 0)
    log.append(make_batch(2), 0)
    region = log.read(0, 1000).records
    segment = log.segments[0]  # type: ignore[attr-defined]
    manager.delete_topic("gone")
    assert not (tmp_path / "gone-0").exists()
    assert len(region.read()) == len(region) > 0  # type: ignore[union-attr]
    manager.run_flush()
    assert not segment.closed
    clock.advance(10_000)
    manager.run_flush()
    assert segment.closed
    manager.close()


def test_clean_shutdown_skips_recovery_of_active_segments(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from odradek.storage import LogSegment

    manager = LogManager([tmp_path], LogConfig(segment_bytes=400), clock)
    for p in range(2):
        log = manager.get_or_create("t", p)
        for _ in range(5):
            log.append(make_batch(2, value_size=100), 0)
    manager.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    scanned: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment) -> int:
        scanned.append(self.base_offset)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", spy)
    again = LogManager([tmp_path], LogConfig(segment_bytes=400), clock)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert scanned == []
    assert sorted(log.log_end_offset for log in again.all_logs()) == [10, 10]
    # a crash (no close, so no marker): the active segments are scanned on the next open
    for log in again.all_logs():
        log.append(make_batch(1), 0)
        for segment in log.segments:  # type: ignore[attr-defined]
            segment.close()
    again._release_locks()
    third = LogManager([tmp_path], LogConfig(segment_bytes=400), clock)
    assert len(scanned) == 2
    assert sorted(log.log_end_offset for log in third.all_logs()) == [11, 11]
    third.close()
