"""Child process of test_crash.py: append deterministic batches to a FileLog forever, fsync
each one, and print "<index> <base offset>" after the fsync (the acknowledgement)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from odradek.protocol.records import build_batch
from odradek.storage import FileLog, LogConfig

CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=4096)
EPOCH = 3


def batch(i: int) -> bytes:
    """Batch number ``i``: (i % 3) + 1 records of a size drawn from a seed of ``i``."""
    rng = random.Random(i)
    size = rng.choice([40, 3000, 150_000])
    return build_batch(
        [(b"%d" % i, bytes([i % 251]) * size, (), 1_700_000_000_000 + i) for _ in range(i % 3 + 1)]
    )


def offset_of(i: int) -> int:
    """Base offset of batch ``i``."""
    return sum(k % 3 + 1 for k in range(i))


def main() -> None:
    log = FileLog(Path(sys.argv[1]), CONFIG)
    i = 0
    while offset_of(i) < log.log_end_offset:
        i += 1
    assert offset_of(i) == log.log_end_offset, "log does not end on a batch of the sequence"
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    while True:
        result = log.append(batch(i), EPOCH)
        log.flush()
        out.write(f"{i} {result.base_offset}\n")
        out.flush()
        i += 1


if __name__ == "__main__":
    main()
