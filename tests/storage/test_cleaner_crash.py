"""Crashes during cleaning: kill -9 at random moments of a log that is appended to and
cleaned all the time, and power loss (fsync recording) at every step of the swap. After
recovery every acknowledged latest value per key is there, every record is one that was
written at its offset, and no cleaner leftover remains."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records import build_batch
from odradek.storage import FileLog, LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner

from .cleaner_crash_child import CONFIG, KEYS, record
from .test_cleaner import records
from .test_power_loss import FsyncRecorder

CHILD = Path(__file__).with_name("cleaner_crash_child.py")


def check(log: Any, acked: int) -> None:
    got = records(log)
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    for r in got:
        assert (r.key, r.value) == record(r.offset)
    present = {r.offset for r in got}
    for key in range(KEYS):  # the latest acknowledged record of every key survives
        latest = max((o for o in range(acked + 1) if o % KEYS == key), default=None)
        if latest is not None:
            assert any(o >= latest and o % KEYS == key for o in present), (key, latest)
    leftovers = [p.name for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert not leftovers


@pytest.mark.timeout(120)
def test_sigkill_during_cleaning(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    data = tmp_path / "data"
    acked = -1
    env = dict(os.environ, PYTHONPATH=str(CHILD.parent.parent.parent / "src"))
    deadline = time.monotonic() + 60
    cleaned_seen = False
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(data)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert child.stdout is not None
        try:
            assert child.stdout.readline() == "ready\n"
            for _ in range(rng.randint(50, 400)):
                line = child.stdout.readline()
                assert line, "child died"
                acked = max(acked, int(line))
                if time.monotonic() > deadline:
                    break
            time.sleep(rng.random() * 0.02)  # mid-append, mid-clean, mid-swap ...
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            child.stdout.close()
        manager = LogManager([data], CONFIG)
        log = manager.get_or_create("t", 0)
        check(log, acked)
        cleaned_seen = cleaned_seen or len(records(log)) < log.log_end_offset
        manager.close()
    assert cleaned_seen and acked > 300


class _Crash(BaseException):
    pass


@pytest.mark.parametrize("crash_at_rename", [None, 0, 1, 2, 3, 4, 5, 6, 8, 12])
def test_power_loss_during_cleaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at_rename: int | None
) -> None:
    recorder = FsyncRecorder(tmp_path)
    monkeypatch.setattr(os, "fsync", recorder.fsync)
    clock = ManualClock(1_700_000_000_000)
    data = tmp_path / "data"
    data.mkdir()
    recorder.mark_durable(tmp_path)
    recorder.mark_durable(data)
    manager = LogManager([data], CONFIG, clock)
    log = manager.get_or_create("t", 0)
    assert isinstance(log, FileLog)
    for offset in range(300):
        key, value = record(offset)
        log.append(build_batch([(key, value, (), clock.now_ms())]), 0)
    log.flush()
    manager.checkpoint()
    acked = log.log_end_offset - 1
    renames = 0
    real_rename = Path.rename

    def rename(self: Path, target: Any) -> Any:
        nonlocal renames
        if crash_at_rename is not None and renames >= crash_at_rename:
            raise _Crash
        renames += 1
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1 << 20), clock)
    try:
        stats = cleaner.clean_once()
        assert stats is not None and stats.swapped
    except _Crash:
        pass
    monkeypatch.setattr(Path, "rename", real_rename)
    lost = recorder.lose_power()
    for segment in log.segments:
        segment.close_fd()
    manager._release_locks()

    again = LogManager([data], CONFIG, clock)
    recovered = again.get("t", 0)
    assert recovered is not None
    check(recovered, acked)
    assert recovered.log_end_offset == 300, lost
    again.close()
