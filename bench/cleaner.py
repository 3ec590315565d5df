"""Log cleaner benchmark: throughput, its effect on produce latency, and its memory.

    python bench/cleaner.py            # ~64 MB of dirty log
    python bench/cleaner.py --quick    # ~8 MB, a few seconds

1. Throughput: a compacted FileLog of ``--mb`` MB (keyed records of 100-300 bytes in batches of
   50, ``--keys`` distinct keys, so most records are superseded) is cleaned once by
   ``LogCleaner.clean_once``: MB/s of dirty log and records dropped per second. The same
   log written by 8 transactional producers instead (transactions of 4 batches, one in five
   aborted, a COMMIT/ABORT marker after each) is cleaned too; plain and transactional runs
   alternate ``--repeats`` times and the medians are reported, so both see the same machine.
2. Produce latency: an asyncio loop (the broker's arrangement) appends a 1 KiB batch to another
   log every millisecond and records how late each append completes relative to its schedule
   (what a producer would wait on top of the network), with the cleaner idle and while a
   cleaner thread (``LogCleaner`` with ``run_on_loop``) cleans a dirty log.
   Idle windows (1.5 s) and cleanings alternate, three of each, so both see the same machine
   load. Reports p50/p99 of both, the ratio (target: p99 within 2x), and the time the
   cleaner spent on the loop (snapshots and swaps).
3. Memory: peak Python allocation (tracemalloc) during one cleaning with
   ``log.cleaner.dedupe.buffer.size`` = ``--dedupe-mb``, against that size.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.transaction_index import ControlRecordType, build_control_batch

MIB = 1024 * 1024
CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=8 * MIB, min_cleanable_dirty_ratio=0.01)


def fill(manager: LogManager, topic: str, mb: int, keys: int, seed: int = 1) -> tuple[int, int]:
    """Write about ``mb`` MB of keyed batches; returns (bytes, records)."""
    rng = random.Random(seed)
    log = manager.get_or_create(topic, 0)
    total = records = 0
    ts = 1_700_000_000_000
    payloads = [bytes([65 + i % 26]) * n for i, n in enumerate(range(100, 300, 7))]
    while total < mb * MIB:
        batch = build_batch(
            [(b"key-%d" % rng.randrange(keys), rng.choice(payloads), (), ts) for _ in range(50)]
        )
        log.append(batch, 0)
        total += len(batch)
        records += 50
        ts += 1
    log.roll()
    return total, records


def fill_transactional(
    manager: LogManager, topic: str, mb: int, keys: int, seed: int = 1
) -> tuple[int, int]:
    """``fill`` with the batches written by 8 transactional producers in turn: transactions
    of 4 batches, then the marker (one in five an ABORT); returns (bytes, records)."""
    rng = random.Random(seed)
    log = manager.get_or_create(topic, 0)
    total = records = 0
    ts = 1_700_000_000_000
    payloads = [bytes([65 + i % 26]) * n for i, n in enumerate(range(100, 300, 7))]
    sequences = [0] * 8
    txn = 0
    while total < mb * MIB:
        pid = txn % 8
        for _ in range(4):
            batch = build_batch(
                [
                    (b"key-%d" % rng.randrange(keys), rng.choice(payloads), (), ts)
                    for _ in range(50)
                ],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequences[pid],
                is_transactional=True,
            )
            sequences[pid] += 50
            log.append(batch, 0)
            total += len(batch)
            records += 50
            ts += 1
        kind = ControlRecordType.ABORT if txn % 5 == 4 else ControlRecordType.COMMIT
        marker = build_control_batch(pid, 0, kind, 0, ts)
        log.append(marker, 0)
        total += len(marker)
        txn += 1
    log.roll()
    return total, records


def throughput(
    root: Path, mb: int, keys: int, dedupe: int, transactional: bool = False
) -> dict[str, float]:
    manager = LogManager([root / "tp"], CONFIG)
    write = fill_transactional if transactional else fill
    _size, records = write(manager, "t", mb, keys)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=dedupe))
    start = time.perf_counter()
    stats = cleaner.clean_once()
    elapsed = time.perf_counter() - start
    manager.close()
    assert stats is not None and stats.swapped
    return {
        "dirty_mb": stats.dirty_bytes / MIB,
        "seconds": elapsed,
        "mb_per_s": stats.dirty_bytes / MIB / elapsed,
        "records": records,
        "dropped": stats.records_dropped,
        "dropped_per_s": stats.records_dropped / elapsed,
        "written_mb": stats.bytes_written / MIB,
    }


def throughput_both(
    root: Path, mb: int, keys: int, dedupe: int, repeats: int = 3
) -> dict[str, float]:
    """Plain and transactional throughput, alternating, ``repeats`` of each: medians."""
    plain: list[float] = []
    txn: list[float] = []
    for _ in range(repeats):
        for out, transactional in ((plain, False), (txn, True)):
            out.append(throughput(root, mb, keys, dedupe, transactional)["mb_per_s"])
            shutil.rmtree(root / "tp", ignore_errors=True)
    return {
        "plain_mb_per_s": statistics.median(plain),
        "transactional_mb_per_s": statistics.median(txn),
        "ratio": statistics.median(txn) / statistics.median(plain),
        "runs": repeats,
    }


async def _appends(log: object, seconds: float, lateness: list[float]) -> None:
    batch = build_batch([(b"k", b"x" * 950, (), 1_700_000_000_000)])
    loop = asyncio.get_running_loop()
    interval = 0.001
    next_at = loop.time()
    end = next_at + seconds
    while next_at < end:
        delay = next_at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)
        log.append(bytearray(batch), 0)  # type: ignore[attr-defined]
        lateness.append((loop.time() - next_at) * 1000)
        next_at += interval


def latency(root: Path, mb: int, keys: int, dedupe: int, rounds: int = 3) -> dict[str, float]:
    """Alternates idle windows and cleanings (``rounds`` of each) so that both see the same
    machine load."""

    async def main() -> dict[str, float]:
        manager = LogManager([root / "lat"], CONFIG)
        produce_log = manager.get_or_create("produce", 0, LogConfig())
        idle: list[float] = []
        busy: list[float] = []
        cleaning_s = owner_ms = 0.0
        loop = asyncio.get_running_loop()
        for r in range(rounds):
            fill(manager, f"dirty-{r}", mb // rounds or 1, keys, seed=r)
            await _appends(produce_log, 1.5, idle)
            cleaner = LogCleaner(
                manager, CleanerConfig(dedupe_buffer_size=dedupe, backoff_ms=60_000), loop=loop
            )
            cleaner.start()
            started = time.perf_counter()
            task = asyncio.create_task(_appends(produce_log, 60.0, busy))
            while cleaner.cleanings == 0 and not task.done():
                await asyncio.sleep(0.01)
            cleaning_s += time.perf_counter() - started
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            await loop.run_in_executor(None, cleaner.shutdown)
            owner_ms += sum(s.owner_s for s in cleaner.stats) * 1000
        manager.close()

        def pct(values: list[float], q: int) -> float:
            return statistics.quantiles(values, n=100)[q - 1] if len(values) > 2 else 0.0

        return {
            "idle_p50_ms": pct(idle, 50),
            "idle_p99_ms": pct(idle, 99),
            "busy_p50_ms": pct(busy, 50),
            "busy_p99_ms": pct(busy, 99),
            "p99_ratio": pct(busy, 99) / max(pct(idle, 99), 1e-9),
            "appends_idle": len(idle),
            "appends_during_cleaning": len(busy),
            "cleaning_s": cleaning_s,
            "owner_ms_total": owner_ms,
        }

    return asyncio.run(main())


def memory(root: Path, mb: int, keys: int, dedupe: int) -> dict[str, float]:
    manager = LogManager([root / "mem"], CONFIG)
    fill(manager, "t", mb, keys)
    cleaner = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=dedupe))
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    stats = cleaner.clean_once()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    manager.close()
    assert stats is not None
    return {
        "peak_mb": peak / MIB,
        "dedupe_buffer_mb": dedupe / MIB,
        "map_mb": stats.map_memory / MIB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--dedupe-mb", type=int, default=16)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["throughput", "latency", "memory"], default=None)
    args = parser.parse_args()
    mb = 8 if args.quick else args.mb
    dedupe = args.dedupe_mb * MIB
    root = Path(tempfile.mkdtemp(prefix="odradek-cleaner-bench-", dir=args.dir))
    try:
        print(f"dirty log {mb} MB, {args.keys} keys, dedupe buffer {args.dedupe_mb} MiB")
        runs = {
            "throughput": lambda: throughput_both(root, mb, args.keys, dedupe, args.repeats),
            "latency": lambda: latency(root, mb, args.keys, dedupe),
            "memory": lambda: memory(root, mb, args.keys, dedupe),
        }
        for name, fn in runs.items():
            if args.only is not None and name != args.only:
                continue
            result = fn()
            print(
                name,
                " ".join(
                    f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in result.items()
                ),
            )
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True, exist_ok=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
