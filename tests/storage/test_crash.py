"""kill -9 at random moments: every acknowledged batch survives byte for byte, and no partial
batch is ever readable after recovery."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.protocol.records import iter_batches, stamp_batch
from odradek.storage import FileLog, FileRegion

from .crash_child import CONFIG, EPOCH, batch, offset_of

CHILD = Path(__file__).with_name("crash_child.py")


def read_all(log: FileLog) -> list[bytes]:
    """Every batch of the log, checking that reads hold whole, valid batches only."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 22).records
        assert isinstance(region, FileRegion)
        data = region.read()
        got = list(iter_batches(data))
        assert got and sum(b.size for b in got) == len(data)  # nothing partial
        for b in got:
            b.validate()
            out.append(bytes(b.raw()))
        offset = got[-1].last_offset + 1
    return out


def expected(i: int) -> bytes:
    data = bytearray(batch(i))
    stamp_batch(data, 0, offset_of(i), EPOCH)
    return bytes(data)


@pytest.mark.timeout(90)
def test_sigkill_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    directory = tmp_path / "crash-0"
    acked = -1
    env = dict(os.environ, PYTHONPATH=str(CHILD.parent.parent.parent / "src"))
    deadline = time.monotonic() + 60
    for _ in range(5):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(directory)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        try:
            assert child.stdout.readline() == "ready\n"
            target = rng.randint(1, 60)
            for _ in range(target):
                line = child.stdout.readline()
                assert line, "child died"
                index, base = map(int, line.split())
                assert base == offset_of(index)
                acked = max(acked, index)
                if time.monotonic() > deadline:
                    break
            # let it run on for a random moment (mid-write, mid-fsync, ...) before the kill
            for _ in range(rng.randint(0, 20000)):
                pass
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            child.stdout.close()
        log = FileLog(directory, CONFIG, recovery_point=0)
        batches = read_all(log)
        assert len(batches) >= acked + 1
        for i, data in enumerate(batches):
            assert data == expected(i), f"batch {i} differs"
        log.close()
