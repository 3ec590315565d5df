"""KIP-534 (KAFKA-8522): a tombstone's delete horizon is recorded in its batch when the cleaner
first keeps it, and the tombstone goes at the first cleaning past that horizon, however much
data keeps arriving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.client._records import decode_records
from odradek.clock import ManualClock
from odradek.protocol.records import Compression, RecordBatch, build_batch, iter_batches
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner

from .conftest import T0, read_bytes

# the topic: segment.bytes 16384, segment.ms 1000, min.cleanable.dirty.ratio 0.01,
# delete.retention.ms 3000
CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=16384,
    segment_ms=1000,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=3000,
)
KEYS = 40
TOMBSTONED = [b"k%d" % i for i in range(5)]


def all_batches(log: Any) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = list(iter_batches(read_bytes(log.read(offset, 1 << 20).records)))
        assert got
        assert all(b.is_valid() for b in got)
        out.extend(got)
        offset = got[-1].last_offset + 1
    return out


def tombstones(log: Any) -> dict[bytes, tuple[int, int | None]]:
    """key -> (record timestamp, its batch's delete horizon) of every tombstone in the log."""
    return {
        r.key: (r.timestamp, b.delete_horizon_ms)
        for b in all_batches(log)
        for r in b.records()
        if r.value is None and r.key is not None
    }


@pytest.fixture(params=["file", "memory"])
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    clock = ManualClock(T0)
    if request.param == "file":
        m = LogManager([tmp_path / "data"], CONFIG, clock)
    else:
        m = LogManager(None, CONFIG, clock, in_memory=True)
    yield m
    m.close()


def test_tombstone_gone_delete_retention_after_its_first_cleaning(manager: LogManager) -> None:
    """Steady writes (a batch every 50 ms of injected time, keys other than the tombstoned
    ones) and a cleaning every 4 s: the tombstones written at 2 s are kept, with their
    batch's horizon = first cleaning + delete.retention.ms, by every cleaning before it, and
    are gone after the first cleaning at or past it."""
    clock: ManualClock = manager.clock  # type: ignore[assignment]
    log = manager.get_or_create("t", 0)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=4 << 20), clock)
    first_kept_at: int | None = None
    gone_at: int | None = None
    step = 50
    for i in range(400):  # 20 s of injected time, bounded
        now = clock.now_ms()
        if i == 40:
            for key in TOMBSTONED:
                log.append(build_batch([(key, None, (), now)]), 0)
        key = b"k%d" % (len(TOMBSTONED) + i % (KEYS - len(TOMBSTONED)))
        log.append(build_batch([(key, b"v%d-" % i + b"x" * 200, (), now)]), 0)
        if i % 80 == 79:  # every 4 s
            stats = cleaner.clean_once()
            assert stats is not None and stats.swapped
            found = tombstones(log)
            if first_kept_at is None and found:
                first_kept_at = now
            if first_kept_at is not None and now < first_kept_at + CONFIG.delete_retention_ms:
                # kept, written at 2 s, horizon from the first cleaning that kept them
                assert found == {
                    k: (T0 + 40 * step, first_kept_at + CONFIG.delete_retention_ms)
                    for k in TOMBSTONED
                }
            elif first_kept_at is not None and gone_at is None:
                assert found == {}, f"tombstones outlived their horizon at {now - T0} ms"
                gone_at = now
        clock.advance(step)
    assert first_kept_at is not None and gone_at is not None
    assert gone_at - first_kept_at == 4000  # the first cleaning past the 3 s horizon
    # the live keys are all still there, with their timestamps
    latest = {r.key: r for b in all_batches(log) for r in b.records()}
    assert set(latest) >= {b"k%d" % i for i in range(len(TOMBSTONED), KEYS)}


def test_horizon_batch_reads_the_same_timestamps_everywhere(manager: LogManager) -> None:
    """A flagged batch: baseTimestamp is the horizon, records' timestamps unchanged for the
    storage reader, the protocol decoder and odradek.client's decoder; compressed too."""
    clock: ManualClock = manager.clock  # type: ignore[assignment]
    log = manager.get_or_create("t", 0)
    log.append(build_batch([(b"a", b"1", (), T0 - 10)]), 0)
    log.append(
        build_batch(
            [(b"a", None, (), T0 - 5), (b"b", b"2", (), T0 - 3), (b"c", None, (), T0 - 1)],
            compression=Compression.GZIP,
        ),
        0,
    )
    log.roll()
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=4 << 20), clock)
    assert cleaner.clean_once() is not None
    (batch,) = [b for b in all_batches(log) if b.record_count]
    assert batch.delete_horizon_ms == T0 + 3000 == batch.base_timestamp
    assert batch.attributes & 0x40 and batch.compression == Compression.GZIP
    assert batch.max_timestamp == T0 - 1
    expected = [(1, b"a", None, T0 - 5), (2, b"b", b"2", T0 - 3), (3, b"c", None, T0 - 1)]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()] == expected
    raw = read_bytes(log.read(0, 1 << 20).records)
    client = [(r.offset, r.key, r.value, r.timestamp) for r in decode_records("t", 0, raw)[0]]
    assert client == expected
    # a later cleaning before the horizon leaves the batch as it is, horizon included
    clock.advance(2999)
    log.append(build_batch([(b"d", b"4", (), T0)]), 0)
    log.roll()
    cleaner.clean_once()
    assert [b.base_timestamp for b in all_batches(log) if b.base_offset == 1] == [T0 + 3000]
    clock.advance(1)
    log.append(build_batch([(b"e", b"5", (), T0)]), 0)
    log.roll()
    cleaner.clean_once()
    left = [(r.key, r.value) for b in all_batches(log) for r in b.records()]
    assert left == [(b"b", b"2"), (b"d", b"4"), (b"e", b"5")]
