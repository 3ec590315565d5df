"""Several log dirs (JBOD): moving a log between them (AlterReplicaLogDirs' storage part),
crashes mid-move, a dir failing at run time (ENOSPC on a small tmpfs) and at start."""

from __future__ import annotations

import errno
import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.storage import FileLog, KafkaStorageError, LogConfig, LogManager
from odradek.storage.future_log import OfflineLog

from .conftest import make_batch


def _log_bytes(log: object) -> bytes:
    """Every batch of the log, from its start to its end, as stored."""
    out = bytearray()
    offset = log.log_start_offset  # type: ignore[attr-defined]
    while offset < log.log_end_offset:  # type: ignore[attr-defined]
        records = log.read(offset, 1 << 20).records  # type: ignore[attr-defined]
        data = records if isinstance(records, bytes) else records.read()
        assert data
        out += data
        pos = 0
        while pos < len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            offset = base + delta + 1
            pos += 12 + length
    return bytes(out)


def _config() -> LogConfig:
    return LogConfig(segment_bytes=2048, index_interval_bytes=256)


def test_move_in_rounds_while_appending(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _config(), clock)
    log = manager.get_or_create("orders", 0)
    src = manager.log_dir_of("orders", 0)
    assert src is not None
    target = next(d for d in dirs if d != src)
    for _ in range(40):
        log.append(make_batch(3, value_size=40), 0)
    future = manager.start_move("orders", 0, target)
    assert future is not None and future.directory.name.endswith("-future")
    assert future.directory.parent == target
    for _ in range(3):  # copy rounds with appends between them (a roll among them)
        future.copy(future.plan())
        for _ in range(15):
            log.append(make_batch(2, value_size=40), 0)
    assert future.remaining_bytes() > 0
    before = _log_bytes(log)
    leo = log.log_end_offset
    moved = manager.complete_move("orders", 0)
    assert moved is manager.get("orders", 0) and moved is not log
    assert isinstance(moved, FileLog) and moved.directory == target / "orders-0"
    assert manager.log_dir_of("orders", 0) == target
    assert not (src / "orders-0").exists()
    assert [p.name for p in target.iterdir() if p.is_dir()] == ["orders-0"]
    assert [p.name for p in src.iterdir() if p.is_dir()] == []
    assert moved.log_end_offset == leo and _log_bytes(moved) == before
    assert moved.segment_count > 3
    # it keeps working, and survives a restart
    moved.append(make_batch(1), 0)
    manager.close()
    again = LogManager(dirs, _config(), clock)
    reopened = again.get("orders", 0)
    assert reopened is not None and again.log_dir_of("orders", 0) == target
    assert reopened.log_end_offset == leo + 1
    assert _log_bytes(reopened)[: len(before)] == before
    again.close()


def test_move_to_own_dir_or_offline_and_cancel(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _config(), clock)
    manager.get_or_create("t", 0).append(make_batch(2), 0)
    src = manager.log_dir_of("t", 0)
    assert src is not None
    other = next(d for d in dirs if d != src)
    assert manager.start_move("t", 0, src) is None
    future = manager.start_move("t", 0, other)
    assert future is not None and manager.start_move("t", 0, other) is future
    assert manager.start_move("t", 0, src) is None  # back home: the move is cancelled
    assert manager.future_log("t", 0) is None and not future.directory.exists()
    with pytest.raises(KeyError):
        manager.start_move("t", 7, other)
    assert manager.find_log_dir(str(other.resolve())) == other
    manager.close()


def _crash(manager: LogManager) -> None:
    """What a killed process leaves: no flush, no checkpoint, the locks released."""
    manager._release_locks()


def test_crash_before_the_swap_keeps_the_original(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _config(), clock)
    log = manager.get_or_create("t", 0)
    for _ in range(30):
        log.append(make_batch(3, value_size=40), 0)
    log.flush()
    manager.checkpoint()
    src = manager.log_dir_of("t", 0)
    target = next(d for d in dirs if d != src)
    future = manager.start_move("t", 0, target)
    assert future is not None
    future.copy(future.plan())
    before = _log_bytes(log)
    _crash(manager)
    again = LogManager(dirs, _config(), clock)
    assert again.log_dir_of("t", 0) == src
    assert not future.directory.exists()
    reopened = again.get("t", 0)
    assert reopened is not None and _log_bytes(reopened) == before
    again.close()


def test_crash_after_the_commit_point_promotes_the_copy(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, _config(), clock)
    log = manager.get_or_create("t", 0)
    assert isinstance(log, FileLog)
    for _ in range(30):
        log.append(make_batch(3, value_size=40), 0)
    src = manager.log_dir_of("t", 0)
    assert src is not None
    target = next(d for d in dirs if d != src)
    future = manager.start_move("t", 0, target)
    assert future is not None
    log.flush()
    future.finish()
    before = _log_bytes(log)
    # the swap's first rename (its commit point) happened, the second did not
    (src / "t-0").rename(src / f"t-0.{future.tag}-delete")
    _crash(manager)
    again = LogManager(dirs, _config(), clock)
    assert again.log_dir_of("t", 0) == target
    assert not future.directory.exists() and not (src / f"t-0.{future.tag}-delete").exists()
    reopened = again.get("t", 0)
    assert reopened is not None and _log_bytes(reopened) == before
    again.close()


def test_a_full_dir_goes_offline_alone(
    tmp_path: Path, clock: ManualClock, tmpfs: Any
) -> None:
    with tmpfs(tmp_path / "small", "64k") as small:
        dirs = [tmp_path / "big", small]
        manager = LogManager(dirs, LogConfig(), clock)
        failures: list[tuple[Path, list[tuple[str, int]]]] = []
        manager.add_log_dir_failure_listener(lambda d, keys: failures.append((d, keys)))
        logs = {p: manager.get_or_create("t", p) for p in range(2)}
        doomed = next(p for p in logs if manager.log_dir_of("t", p) == small)
        healthy = 1 - doomed
        with pytest.raises(OSError) as info:
            for _ in range(200):
                logs[doomed].append(make_batch(10, value_size=1000), 0)
        assert info.value.errno == errno.ENOSPC
        manager.fail_log("t", doomed, info.value)
        assert failures == [(small, [("t", doomed)])]
        assert set(manager.offline_dirs) == {small} and manager.live_log_dirs == [dirs[0]]
        offline = manager.get("t", doomed)
        assert isinstance(offline, OfflineLog)
        with pytest.raises(KafkaStorageError):
            offline.append(make_batch(1), 0)
        with pytest.raises(KafkaStorageError):
            offline.read(0, 100)
        logs[healthy].append(make_batch(1), 0)  # the other dir serves on
        # while a dir is offline, a partition not known to be new may have its data there
        # (Kafka's rule): it is offline too; a new topic's partitions go to the live dirs
        assert isinstance(manager.get_or_create("t", 2), OfflineLog)
        manager.expect_new_topic("n")
        assert isinstance(manager.get_or_create("n", 0), FileLog)
        assert manager.log_dir_of("n", 0) == dirs[0]
        manager.checkpoint()
        manager.close()  # an offline dir gets no checkpoint nor clean-shutdown marker
        assert (dirs[0] / ".kafka_cleanshutdown").exists()


def test_an_unusable_dir_is_offline_at_start(tmp_path: Path, clock: ManualClock) -> None:
    good = tmp_path / "good"
    bad = tmp_path / "bad"
    bad.write_text("a file where a directory is expected")
    manager = LogManager([good, bad], LogConfig(), clock)
    assert list(manager.offline_dirs) == [bad] and manager.live_log_dirs == [good]
    assert isinstance(manager.get_or_create("t", 0), OfflineLog)
    manager.expect_new_topic("n")
    manager.get_or_create("n", 0)
    assert manager.log_dir_of("n", 0) == good
    manager.close()
    with pytest.raises(KafkaStorageError):  # all offline: the broker cannot start
        LogManager([bad], LogConfig(), clock)


def test_a_truncation_between_rounds_is_copied_again(tmp_path: Path, clock: ManualClock) -> None:
    """A follower's log is truncated and written again while it moves: the copy follows."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig(), clock)  # one segment: all of it is active
    log = manager.get_or_create("t", 0)
    for _ in range(10):
        log.append(make_batch(2, value_size=30), 0)
    src = manager.log_dir_of("t", 0)
    target = next(d for d in dirs if d != src)
    future = manager.start_move("t", 0, target)
    assert future is not None
    future.copy(future.plan())
    log.truncate_to(6)
    for _ in range(12):  # past the size copied, with other bytes
        log.append(make_batch(2, value_size=31), 1)
    before = _log_bytes(log)
    moved = manager.complete_move("t", 0)
    assert _log_bytes(moved) == before
    manager.close()


def test_a_dir_locked_by_another_manager_stops_the_start(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Unlike a dir that cannot be opened, one in use by another broker is fatal (Kafka's
    rule), and nothing in the other dirs is touched (no -future dir removed)."""
    a, b = tmp_path / "a", tmp_path / "b"
    holder = LogManager([b], LogConfig(), clock)
    left = a / "t-0.0123456789abcdef0123456789abcdef-future"
    left.mkdir(parents=True)
    with pytest.raises(KafkaStorageError):
        LogManager([a, b], LogConfig(), clock)
    assert left.exists()
    holder.close()
    again = LogManager([a, b], LogConfig(), clock)  # a -future with no log: promoted
    assert again.log_dir_of("t", 0) == a and not left.exists()
    again.close()
