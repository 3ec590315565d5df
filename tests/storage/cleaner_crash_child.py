"""Child process of test_cleaner_crash.py: append one keyed record per batch to a compacted
log, fsync, print "<offset>" (the acknowledgement), and clean the log every few appends."""

from __future__ import annotations

import sys
from pathlib import Path

from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner

CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=4000,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=0,
)
KEYS = 20


def record(offset: int) -> tuple[bytes, bytes]:
    """The key and value of the record at ``offset`` (one record per batch)."""
    return b"k%d" % (offset % KEYS), b"v%d-" % offset + b"x" * (offset % 50)


def main() -> None:
    manager = LogManager([Path(sys.argv[1])], CONFIG)
    log = manager.get_or_create("t", 0)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1 << 20))
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    while True:
        offset = log.log_end_offset
        key, value = record(offset)
        log.append(build_batch([(key, value, (), 1_700_000_000_000 + offset)]), 0)
        log.flush()
        out.write(f"{offset}\n")
        out.flush()
        if offset % 7 == 0:
            cleaner.clean_once()


if __name__ == "__main__":
    main()
