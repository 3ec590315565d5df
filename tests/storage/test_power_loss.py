"""Power loss, simulated by recording fsyncs: after the "crash" every file keeps only what was
fsynced (its size at its last fsync, as of an append-only writer) and every directory keeps only
the names it held at its last fsync. Every batch acknowledged after ``flush()`` must survive,
and the checkpoints must still describe the log.

Without a FUSE file system this models what an append-only log needs from the OS: file data is
durable after fsync of the file, a new or renamed name after fsync of its directory.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records import iter_batches
from odradek.storage import FileLog, FileRegion, LogConfig, LogManager

from .conftest import T0, make_batch


class FsyncRecorder:
    """Wraps os.fsync: remembers each file's size (by inode) and each directory's names."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.durable_size: dict[int, int] = {}
        self.durable_names: dict[Path, set[str]] = {}
        self._real_fsync = os.fsync

    def fsync(self, fd: int) -> None:
        self._real_fsync(fd)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
            self.durable_names[path] = set(os.listdir(path))
        else:
            self.durable_size[st.st_ino] = st.st_size

    def mark_durable(self, directory: Path) -> None:
        """Treat ``directory``'s current names as durable (it existed before the test)."""
        self.durable_names[directory] = set(os.listdir(directory))

    def lose_power(self) -> list[str]:
        """Cut every file and directory under the root back to its fsynced state (a directory
        never fsynced keeps no new name); returns what was lost."""
        lost: list[str] = []

        def walk(directory: Path) -> None:
            durable = self.durable_names.get(directory, set())
            for name in sorted(os.listdir(directory)):
                path = directory / name
                if name not in durable:
                    if path.is_dir():
                        shutil.rmtree(path)
                    else:
                        path.unlink()
                    lost.append(f"{path.name} (name not synced)")
                elif path.is_dir():
                    walk(path)
                else:
                    keep = self.durable_size.get(path.stat().st_ino, 0)
                    if path.stat().st_size > keep:
                        os.truncate(path, keep)
                        lost.append(f"{path.name} bytes {keep}..")

        walk(self.root)
        return lost


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncRecorder]:
    rec = FsyncRecorder(tmp_path)
    monkeypatch.setattr(os, "fsync", rec.fsync)
    yield rec


def read_all(log: FileLog) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 22).records
        assert isinstance(region, FileRegion)
        got = list(iter_batches(region.read()))
        assert got
        for b in got:
            b.validate()
            out.append(bytes(b.raw()))
        offset = got[-1].last_offset + 1
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_acknowledged_batches_survive_power_loss(
    tmp_path: Path, recorder: FsyncRecorder, seed: int
) -> None:
    rng = random.Random(seed)
    clock = ManualClock(T0)
    config = LogConfig(segment_bytes=2000, index_interval_bytes=200)
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    recorder.mark_durable(tmp_path)  # the log dir exists (and is empty) before the broker starts
    recorder.mark_durable(log_dir)
    manager = LogManager([log_dir], config, clock)
    log = manager.get_or_create("t", 0)
    assert isinstance(log, FileLog)
    acked: list[bytes] = []
    written: list[bytes] = []
    epoch = 1
    for i in range(rng.randint(40, 80)):
        batch = bytearray(make_batch(rng.randint(1, 3), ts=T0 + i, value_size=rng.randint(10, 300)))
        epoch = 1 + i // 30
        log.append(batch, epoch)
        written.append(bytes(batch))
        if rng.random() < 0.5:
            log.flush()
            acked = list(written)
        if rng.random() < 0.1:
            manager.checkpoint()
    for _ in range(3):  # never acknowledged: may be lost
        batch = bytearray(make_batch(2, value_size=500))
        log.append(batch, epoch)
        written.append(bytes(batch))
    lost = recorder.lose_power()
    assert any(".log" in item for item in lost), lost  # unsynced data really went
    # the process is gone: drop the manager without closing anything
    for segment in log.segments:
        segment.close_fd()
    manager._release_locks()

    again = LogManager([log_dir], config, clock)
    recovered = again.get("t", 0)
    assert isinstance(recovered, FileLog)
    batches = read_all(recovered)
    assert len(batches) >= len(acked)
    assert batches == written[: len(batches)]  # a prefix of what was written, acked part whole
    assert recovered.recovery_point <= recovered.log_end_offset
    assert recovered.leader_epoch_entries()[0] == (1, 0)
    again.close()
