"""The log cleaner's contract, on both engines (file and memory), through a real LogManager."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.clock import ManualClock
from odradek.protocol.records import Record, RecordBatch, build_batch, iter_batches
from odradek.storage import FileLog, LogConfig, LogManager
from odradek.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerConfig,
    LogCleaner,
    _LazyOffsetMap,
    run_on_loop,
)
from odradek.storage.cleaner_records import RecordValidationError
from odradek.storage.offset_map import OffsetMapFullError, SkimpyOffsetMap

from .conftest import T0, read_bytes

COMPACT = LogConfig(
    cleanup_policy="compact",
    segment_bytes=600,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1000,
)


def kv(key: str, value: str | None, ts: int = T0, **kw: Any) -> bytes:
    return build_batch([(key.encode(), None if value is None else value.encode(), (), ts)], **kw)


def batches(log: Any, offset: int | None = None) -> list[RecordBatch]:
    """Every batch from ``offset`` (default the log start) to the LEO, read the way a consumer
    does: from the last batch's last offset + 1, across gaps."""
    out: list[RecordBatch] = []
    offset = log.log_start_offset if offset is None else offset
    while offset < log.log_end_offset:
        data = read_bytes(log.read(offset, 1 << 20).records)
        got = list(iter_batches(data))
        assert got, f"no batch at {offset} below the LEO {log.log_end_offset}"
        for b in got:
            # not validate(): a compacted batch may hold fewer records than its offset span,
            # or none (Kafka's own compacted batches do too)
            assert b.is_valid() and b.magic == 2
        out.extend(got)
        offset = got[-1].last_offset + 1
    return out


def records(log: Any) -> list[Record]:
    return [r for b in batches(log) for r in b.records()]


def latest(rs: list[Record]) -> dict[bytes | None, Record]:
    out: dict[bytes | None, Record] = {}
    for r in rs:
        out[r.key] = r
    return out


@pytest.fixture
def manager(engine: str, tmp_path: Path, clock: ManualClock) -> Any:
    if engine == "file":
        m = LogManager([tmp_path / "data"], COMPACT, clock)
    else:
        m = LogManager(None, COMPACT, clock, in_memory=True)
    yield m
    m.close()


def cleaner_for(manager: LogManager, **kw: Any) -> LogCleaner:
    return LogCleaner(manager, CleanerConfig(dedupe_buffer_size=4 << 20, **kw), manager.clock)


def fill(log: Any, n_keys: int, rounds: int, ts: int = T0) -> list[Record]:
    for r in range(rounds):
        for k in range(n_keys):
            log.append(kv(f"k{k}", f"v{r}-{k}", ts + r), 0)
    return records(log)


def test_keeps_latest_per_key_offsets_and_timestamps(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    before = fill(log, 5, 6)
    log.roll()
    leo = log.log_end_offset
    stats = cleaner_for(manager).clean_once()
    assert stats is not None and stats.swapped and stats.records_dropped == 25
    after = records(log)
    assert after == sorted(latest(before).values(), key=lambda r: r.offset)
    assert log.log_end_offset == leo and log.log_start_offset == 0
    # a consumer fetching from any offset in a gap gets the next record
    assert [r.offset for r in batches(log, 3)[0].records()] == [after[0].offset]


def test_active_segment_is_never_cleaned(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    log.append(kv("a", "1"), 0)
    log.append(kv("a", "2"), 0)
    assert log.segment_count == 1
    assert cleaner_for(manager).clean_once() is None
    assert len(records(log)) == 2


def test_second_cleaning_reaches_the_clean_section(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    fill(log, 3, 3)
    log.roll()
    cleaner = cleaner_for(manager)
    assert cleaner.clean_once() is not None
    first = records(log)
    for k in range(3):
        log.append(kv(f"k{k}", f"new-{k}"), 0)
    log.roll()
    assert cleaner.clean_once() is not None
    assert [r.value for r in records(log)] == [b"new-0", b"new-1", b"new-2"]
    assert all(r.offset > first[-1].offset for r in records(log))


def test_tombstones_kept_for_delete_retention_then_removed(
    manager: LogManager, clock: ManualClock
) -> None:
    """KIP-534: the first cleaning that keeps a tombstone records its batch's delete horizon
    (that cleaning's time + delete.retention.ms); a cleaning at or past it drops it."""
    log = manager.get_or_create("t", 0)
    log.append(kv("a", "1", T0), 0)
    log.append(kv("b", "1", T0), 0)
    log.append(kv("a", None, T0 + 1), 0)  # tombstone
    log.roll()
    cleaner = cleaner_for(manager)
    cleaner.clean_once()
    assert [(r.key, r.value, r.timestamp) for r in records(log)] == [
        (b"b", b"1", T0),
        (b"a", None, T0 + 1),
    ]
    tombstone = next(b for b in batches(log) if b.record_count and b.base_offset == 2)
    assert tombstone.delete_horizon_ms == T0 + 1000 and tombstone.is_valid()
    # newer data before the horizon: the tombstone stays, its horizon unchanged
    clock.advance(999)
    log.append(kv("c", "1", T0 + 500), 0)
    log.roll()
    cleaner.clean_once()
    assert (b"a", None) in [(r.key, r.value) for r in records(log)]
    assert [b.delete_horizon_ms for b in batches(log) if b.base_offset == 2] == [T0 + 1000]
    # at the horizon: the tombstone goes
    clock.advance(1)
    log.append(kv("d", "1", T0 + 5000), 0)
    log.roll()
    cleaner.clean_once()
    assert b"a" not in latest(records(log))
    assert set(latest(records(log))) == {b"b", b"c", b"d"}


def test_min_cleanable_dirty_ratio(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0, LogConfig(cleanup_policy="compact", segment_bytes=600))
    fill(log, 4, 4)
    log.roll()
    cleaner = cleaner_for(manager)
    assert cleaner.clean_once() is not None  # 100% dirty
    log.append(kv("k0", "x"), 0)
    log.roll()
    assert cleaner.clean_once() is None  # a little dirt on a bigger clean head: below 0.5


def test_min_compaction_lag(manager: LogManager, clock: ManualClock) -> None:
    config = LogConfig(
        cleanup_policy="compact",
        segment_bytes=600,
        min_cleanable_dirty_ratio=0.01,
        min_compaction_lag_ms=10_000,
    )
    log = manager.get_or_create("t", 0, config)
    fill(log, 3, 3, ts=clock.now_ms())
    log.roll()
    cleaner = cleaner_for(manager)
    assert cleaner.clean_once() is None
    clock.advance(10_010)
    assert cleaner.clean_once() is not None
    assert len(records(log)) == 3


def test_max_compaction_lag_rolls_and_forces_cleaning(manager: LogManager) -> None:
    config = LogConfig(
        cleanup_policy="compact", min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=1000
    )
    log = manager.get_or_create("t", 0, config)
    log.append(kv("a", "1", T0), 0)
    log.append(kv("a", "2", T0 + 10), 0)
    log.append(kv("b", "1", T0 + 2000), 0)  # rolls: the segment is older than the max lag
    assert log.segment_count == 2
    stats = cleaner_for(manager).clean_once(now_ms=T0 + 3000)
    assert stats is not None and stats.records_dropped == 1


def test_keyless_records_refused_with_record_errors(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    batch = build_batch([(b"a", b"1", (), T0), (None, b"2", (), T0), (b"c", b"3", (), T0)])
    batch2 = build_batch([(None, b"4", (), T0)])
    with pytest.raises(RecordValidationError) as info:
        log.append(batch + batch2, 0)
    assert info.value.record_errors == [
        (1, "Compacted topic cannot accept message without key."),
        (3, "Compacted topic cannot accept message without key."),
    ]
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.append(build_batch([(b"a", b"1", (), T0)], compression=4), 0)  # keyed + zstd: fine
    with pytest.raises(RecordValidationError):
        log.append(build_batch([(None, b"1", (), T0)], compression=4), 0)
    assert log.log_end_offset == 1


def test_producer_last_batch_kept_even_if_empty(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    log.append(kv("a", "1", producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.append(kv("a", "2", producer_id=7, producer_epoch=0, base_sequence=1), 0)
    log.append(kv("a", "3"), 0)  # supersedes both, no producer id
    log.roll()
    cleaner_for(manager).clean_once()
    got = batches(log)
    assert [(b.producer_id, b.base_sequence, b.record_count) for b in got] == [
        (7, 1, 0),
        (-1, -1, 1),
    ]
    assert [r.value for r in records(log)] == [b"3"]


def test_compact_delete_does_both(manager: LogManager, clock: ManualClock) -> None:
    config = LogConfig(
        cleanup_policy="compact,delete",
        segment_bytes=600,
        min_cleanable_dirty_ratio=0.01,
        retention_ms=60_000,
    )
    log = manager.get_or_create("t", 0, config)
    fill(log, 3, 3, ts=clock.now_ms())
    log.roll()
    cleaner_for(manager).clean_once()
    assert len(records(log)) == 3
    clock.advance(60_010)
    log.append(kv("z", "1", clock.now_ms()), 0)
    assert log.delete_old_segments() >= 1
    assert [r.key for r in records(log)] == [b"z"]


def test_compressed_batches_are_filtered(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    for codec in (1, 2, 3, 4):
        log.append(
            build_batch(
                [(b"a", b"x%d" % codec, (), T0), (b"b", b"y%d" % codec, (), T0 + 1)],
                compression=codec,
            ),
            0,
        )
    log.append(kv("a", "last"), 0)
    log.roll()
    cleaner_for(manager).clean_once()
    got = batches(log)
    assert [r.value for b in got for r in b.records()] == [b"y4", b"last"]
    assert got[0].compression == 4 and got[0].last_offset == 7  # lastOffsetDelta preserved


def test_segments_left_empty_are_removed(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    for i in range(60):
        log.append(kv("same", f"{i:04d}"), 0)
    log.roll()
    segments_before = log.segment_count
    assert segments_before > 5
    cleaner_for(manager).clean_once()
    assert log.segment_count == 3  # the first (kept, empty), the last record's, the active
    assert [r.value for r in records(log)] == [b"0059"]
    assert log.log_start_offset == 0


def test_offset_map_bounded() -> None:
    m = SkimpyOffsetMap(24 * 100)
    assert m.capacity == 100 and m.memory == 2400
    for i in range(90):
        m.put(b"key%d" % i, i)
    m.put(b"key5", 500)
    assert m.get(b"key5") == 500 and m.get(b"nope") == -1 and len(m) == 90
    with pytest.raises(OffsetMapFullError):
        m.put(b"one more", 1)


def test_small_offset_map_cleans_in_several_passes(manager: LogManager) -> None:
    log = manager.get_or_create("t", 0)
    fill(log, 40, 3)
    log.roll()
    cleaner = LogCleaner(
        manager, CleanerConfig(dedupe_buffer_size=24 * 40, io_buffer_size=100), manager.clock
    )
    for _ in range(20):
        if cleaner.clean_once() is None:
            break
    assert len(records(log)) == 40


def test_file_log_restart_and_checkpoint(tmp_path: Path, clock: ManualClock) -> None:
    data = tmp_path / "data"
    manager = LogManager([data], COMPACT, clock)
    log = manager.get_or_create("t", 0)
    fill(log, 4, 5)
    log.roll()
    stats = cleaner_for(manager).clean_once()
    assert stats is not None
    expected = records(log)
    manager.close()
    assert f"t 0 {stats.end_offset}" in (data / CLEANER_OFFSET_CHECKPOINT).read_text()
    again = LogManager([data], COMPACT, clock)
    log2 = again.get("t", 0)
    assert records(log2) == expected
    cleaner = cleaner_for(again)
    assert cleaner.manager.first_dirty_offset(log2) == stats.end_offset
    assert cleaner.clean_once() is None  # nothing dirty
    again.close()


@pytest.mark.parametrize("crash_after", ["cleaned", "commit", "old-renamed", "swap-renamed"])
def test_interrupted_swap_recovery(tmp_path: Path, clock: ManualClock, crash_after: str) -> None:
    """A crash at each step of the swap protocol leaves a log holding either the old or the
    cleaned segments, never a mix that loses the latest value of a key."""
    directory = tmp_path / "t-0"
    log = FileLog(directory, COMPACT, clock)
    before = fill(log, 4, 5)
    log.roll()
    want = latest(before)

    class Crash(Exception):
        pass

    def partial_swap(replacements: list[tuple[Any, Any]]) -> None:
        for _old, new in replacements:
            if new is not None:
                if crash_after == "cleaned":
                    raise Crash
                new.change_suffix(".cleaned", ".swap")
        if crash_after == "commit":
            raise Crash
        for old, new in replacements:
            old.change_suffix("", ".deleted")
            if crash_after == "old-renamed":
                raise Crash
            if new is not None:
                new.change_suffix(".swap", "")
        raise Crash

    log._swap_cleaned = partial_swap  # type: ignore[method-assign]
    # a crash runs no clean-up either
    log.discard_cleaned_segment = lambda segment: None  # type: ignore[method-assign]
    from odradek.storage.cleaner import LogCleanerManager, clean_log

    to_clean = LogCleanerManager(_OneLog(log), clock).log_to_clean(log, clock.now_ms())
    with pytest.raises(Crash):
        clean_log(to_clean, CleanerConfig(dedupe_buffer_size=1 << 20))
    for segment in log.segments:  # the process dies: no close, no flush
        segment.close_fd()
    again = FileLog(directory, COMPACT, clock)
    got = records(again)
    assert {k: (r.offset, r.value) for k, r in latest(got).items()} == {
        k: (r.offset, r.value) for k, r in want.items()
    }
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    assert not [p for p in directory.iterdir() if p.suffix in (".swap", ".cleaned", ".deleted")]
    if crash_after in ("commit", "old-renamed", "swap-renamed"):
        assert len(got) < len(before)  # the committed swaps completed
    again.close()


class _OneLog:
    def __init__(self, log: Any) -> None:
        self.log = log

    def all_logs(self) -> list[Any]:
        return [self.log]


@pytest.mark.timeout(60)
def test_cleaner_threads_with_an_event_loop_owner(tmp_path: Path) -> None:
    """The broker's arrangement: appends and reads on an asyncio loop, cleaning in a thread
    that swaps through the loop. Every read sees a consistent log throughout."""
    config = LogConfig(cleanup_policy="compact", segment_bytes=2000, min_cleanable_dirty_ratio=0.1)

    async def main() -> None:
        manager = LogManager([tmp_path / "data"], config)
        log = manager.get_or_create("t", 0)
        cleaner = LogCleaner(
            manager,
            CleanerConfig(backoff_ms=10, dedupe_buffer_size=1 << 20),
            loop=asyncio.get_running_loop(),
        )
        cleaner.start()
        try:
            values: dict[bytes, bytes] = {}
            for i in range(3000):
                key, value = b"k%d" % (i % 50), b"v%d" % i
                log.append(build_batch([(key, value, (), 0)]), 0)
                values[key] = value
                if i % 200 == 0:
                    got = latest(records(log))
                    assert all(got[k].value == v for k, v in values.items() if k in got)
                    await asyncio.sleep(0.01)  # let the cleaner swap
            deadline = asyncio.get_running_loop().time() + 20
            while cleaner.cleanings < 3 and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.02)
            assert cleaner.cleanings >= 3
            got = latest(records(log))
            assert {k: r.value for k, r in got.items()} == values
            assert len(records(log)) < 3000
        finally:
            await asyncio.get_running_loop().run_in_executor(None, cleaner.shutdown)
            manager.close()

    asyncio.run(main())
    assert not [t for t in threading.enumerate() if t.name.startswith("kafka-log-cleaner")]


def test_run_on_loop_stops_without_deadlock() -> None:
    loop = asyncio.new_event_loop()
    stopped = threading.Event()
    call = run_on_loop(loop, stopped)
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(_catch(lambda: call(lambda: 1))))
    thread.start()
    stopped.set()  # the loop never runs: the call gives up
    thread.join(5)
    loop.close()
    assert result and isinstance(result[0], Exception)


def _catch(fn: Any) -> object:
    try:
        return fn()
    except Exception as exc:
        return exc


# --- the property -----------------------------------------------------------------------------

ops = st.lists(
    st.tuples(st.integers(0, 7), st.one_of(st.none(), st.binary(max_size=20)), st.booleans()),
    min_size=1,
    max_size=80,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops)
def test_property_latest_value_per_key(engine: str, tmp_path_factory: Any, ops: Any) -> None:
    """Any sequence of keyed appends and tombstones: after cleaning, a read gives the latest
    value per key in offset order; once a cleaning runs delete.retention.ms after the one
    that first kept them (KIP-534's delete horizon), tombstones are gone."""
    clock = ManualClock(T0)
    if engine == "file":
        manager = LogManager([tmp_path_factory.mktemp("p")], COMPACT, clock)
    else:
        manager = LogManager(None, COMPACT, clock, in_memory=True)
    try:
        log = manager.get_or_create("t", 0)
        for key, value, roll in ops:
            log.append(kv(f"k{key}", None if value is None else value.hex()), 0)
            if roll:
                log.roll()
        log.roll()
        cleaner = cleaner_for(manager)
        cleaner.clean_once()
        written = {}
        for offset, (key, value, _) in enumerate(ops):
            written[b"k%d" % key] = (offset, None if value is None else value.hex().encode())
        got = records(log)
        assert [r.offset for r in got] == sorted(r.offset for r in got)
        assert {r.key: (r.offset, r.value) for r in got} == written  # tombstones still there
        assert len(got) == len(written)
        # later data, cleaned past every tombstone's delete horizon
        for ts in (T0 + 10_000, T0 + 20_000):
            clock.advance(10_000)
            log.append(kv("zz", "x", ts), 0)
            log.roll()
            cleaner.clean_once()
        got = records(log)
        live = {k: v for k, v in written.items() if v[1] is not None}
        assert {r.key: (r.offset, r.value) for r in got if r.key != b"zz"} == live
    finally:
        manager.close()


def test_dump_shows_gaps_and_tombstones(
    tmp_path: Path, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    from odradek.storage.dump import main

    manager = LogManager([tmp_path / "data"], COMPACT, clock)
    log = manager.get_or_create("t", 0)
    log.append(build_batch([(b"a", b"1", (), T0), (b"b", b"1", (), T0)]), 0)
    log.append(kv("a", "2"), 0)
    log.append(kv("b", None), 0)
    log.append(kv("c", "1"), 0)
    log.roll()
    cleaner_for(manager).clean_once()
    manager.close()
    main([str(tmp_path / "data" / "t-0" / "00000000000000000000.log"), "--records"])
    out = capsys.readouterr().out
    assert "gap: offsets 0..1 removed by compaction" in out
    assert "value: null (tombstone)" in out
    assert "key: b'c' value: b'1'" in out


def test_io_max_bytes_per_second_throttles(manager: LogManager) -> None:
    import time

    log = manager.get_or_create("t", 0)
    fill(log, 20, 20)  # ~30 KB
    log.roll()
    size = log.size_in_bytes
    cleaner = cleaner_for(manager, io_max_bytes_per_second=float(size * 10))
    start = time.monotonic()
    stats = cleaner.clean_once()
    elapsed = time.monotonic() - start
    assert stats is not None and stats.swapped
    # the map and the rewrite each read the whole log: at least 0.2 s at 10 logs per second
    assert elapsed >= 0.18, elapsed


def test_empty_batch_goes_once_no_longer_the_producers_last(manager: LogManager) -> None:
    """Kafka's DELETE_EMPTY: a batch emptied because it was its producer's last is removed by
    a later cleaning once the producer has a newer batch."""
    log = manager.get_or_create("t", 0)
    log.append(kv("a", "1", producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.append(kv("a", "2"), 0)
    log.roll()
    cleaner = cleaner_for(manager)
    cleaner.clean_once()
    assert [(b.base_offset, b.record_count) for b in batches(log)] == [(0, 0), (1, 1)]
    log.append(kv("b", "1", producer_id=7, producer_epoch=0, base_sequence=1), 0)
    log.roll()
    cleaner.clean_once()
    assert [(b.base_offset, b.record_count) for b in batches(log)] == [(1, 1), (2, 1)]


def test_offset_map_allocated_at_first_cleaning_not_before(manager: LogManager) -> None:
    """The dedupe buffer (here 64 MiB) is not allocated while there is nothing to clean (a
    broker's start-up), only by the first cleaning: a cleaner thread's lazy map stays empty
    through a pass that finds nothing, and the first cleaning maps the whole buffer (an
    anonymous memory map: the process's mapped size, ``/proc/self/statm``, grows by it)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("mapped size read from /proc")

    def mapped() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")

    config = CleanerConfig(dedupe_buffer_size=64 << 20)
    cleaner = LogCleaner(manager, config, manager.clock)
    offset_map = _LazyOffsetMap(config)  # what a cleaner thread holds across its passes
    log = manager.get_or_create("t", 0)
    log.append(kv("a", "1"), 0)
    before = mapped()
    assert cleaner._clean_filthiest(offset_map) is None  # the active segment only
    assert mapped() - before < 4 << 20
    log.roll()
    log.append(kv("a", "2"), 0)
    log.roll()
    stats = cleaner._clean_filthiest(offset_map)
    assert stats is not None and stats.swapped
    assert mapped() - before > 32 << 20
    assert stats.map_memory > 32 << 20
