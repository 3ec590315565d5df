"""Storage benchmark: append, read and lookup throughput of odradek.storage.FileLog.

    python bench/storage.py            # full run (~1.5 GB written in total, at most ~300 MB on disk at a time)
    python bench/storage.py --quick    # smaller counts, a few seconds

Each measurement runs ``--repeat`` times (default 3) and the median is reported. Everything is
written under a temporary directory in /tmp (or ``--dir``) that is removed at the end; at most
one benchmark log exists at a time. Targets (docs/benchmarks/storage.md): >= 100,000 appends/s
of 1 KiB batches and >= 1 GB/s of 1 MiB batches to the page cache; random-offset lookups equally
fast (within 20%) on 1 and 1,000 segments.
"""

from __future__ import annotations

import argparse
import mmap
import os
import platform
import random
import shutil
import statistics
import struct
import tempfile
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from odradek.clock import SystemClock
from odradek.protocol.records import build_batch
from odradek.storage import FileLog, FileRegion, LogConfig

KIB = 1024
MIB = 1024 * 1024


def batch_of_size(total: int) -> bytes:
    """One batch of one record whose encoded size is exactly ``total`` bytes."""
    value = total - 61 - 10
    for _ in range(10):
        data = build_batch([(None, b"x" * value, (), 1_700_000_000_000)])
        if len(data) == total:
            return data
        value += total - len(data)
    raise AssertionError(f"cannot build a batch of {total} bytes")


class Bench:
    def __init__(self, root: Path, repeat: int) -> None:
        self.root = root
        self.repeat = repeat
        self.rows: list[tuple[str, str, str]] = []
        self._n = 0

    def fresh_log(self, config: LogConfig) -> FileLog:
        self._n += 1
        return FileLog(self.root / f"bench-{self._n}", config, SystemClock())

    def median(self, fn: Callable[[], float], warmup: bool = True) -> tuple[float, list[float]]:
        if warmup:
            fn()  # not counted: first-touch effects (page allocation, imports, CPU frequency)
        runs = [fn() for _ in range(self.repeat)]
        return statistics.median(runs), runs

    def report(
        self, name: str, value: float, unit: str, runs: list[float], fmt: str = ",.0f"
    ) -> None:
        text = f"{value:{fmt}} {unit}"
        detail = ", ".join(f"{r:{fmt}}" for r in runs)
        self.rows.append((name, text, detail))
        print(f"{name:<52} {text:>22}   runs: {detail}", flush=True)


def bench_append(b: Bench, size: int, count: int, fsync: bool, cpu: bool = False) -> float:
    """Appends per second (one batch of ``size`` bytes per append), by wall-clock time or,
    with ``cpu``, by the process's CPU time (user + system: what the append costs this process,
    whatever else runs on the machine)."""
    data = batch_of_size(size)
    log = b.fresh_log(LogConfig())
    try:
        buf = bytearray(data)
        clock = time.process_time if cpu else time.perf_counter
        start = clock()
        # the same writable request buffer every time (restamped in place; the CRC stays valid),
        # as the network layer hands over a bytearray it received into
        for _ in range(count):
            log.append(buf, 0)
            if fsync:
                log.flush()
        elapsed = clock() - start
    finally:
        log.delete()
    return count / elapsed


def bench_raw_write(b: Bench, size: int, count: int) -> float:
    """Baseline: os.write of ``size``-byte buffers to an O_APPEND file, no log (writes/s)."""
    path = b.root / "raw"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    data = bytes(size)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, data)
        return count / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def build_log(b: Bench, batches: int, segments: int, size: int = KIB) -> FileLog:
    data = batch_of_size(size)
    per_segment = -(-batches // segments)
    config = LogConfig(segment_bytes=max(per_segment * size, size))
    log = b.fresh_log(config)
    for _ in range(batches):
        log.append(bytearray(data), 0)
    assert log.segment_count == segments, (log.segment_count, segments)
    return log


def bench_read(log: FileLog, max_bytes: int) -> float:
    """Bytes per second reading the whole log front to back (read() + pread of the region)."""
    start = time.perf_counter()
    total = 0
    offset = 0
    end = log.log_end_offset
    fd_read = os.pread
    while offset < end:
        result = log.read(offset, max_bytes)
        region = result.records
        assert isinstance(region, FileRegion)
        data = fd_read(region.fd, region.length, region.position)
        total += len(data)
        offset += region.length // KIB  # 1 KiB batches of one record each: next offset
    elapsed = time.perf_counter() - start
    return total / elapsed


def bench_lookups(logs: list[FileLog], count: int, rounds: int, seed: int) -> list[float]:
    """CPU microseconds per read() at a random offset (one 1 KiB batch, as a FileRegion), for
    each log. The logs hold the same batches; they are measured in alternating rounds on the
    same offsets, and with process CPU time, so that other processes on the machine (load from
    parallel test runs) disturb them alike and little."""
    rng = random.Random(seed)
    end = min(log.log_end_offset for log in logs)
    totals = [0.0] * len(logs)
    per_round = max(1, count // rounds)
    for _ in range(rounds):
        offsets = [rng.randrange(end) for _ in range(per_round)]
        for i, log in enumerate(logs):
            read = log.read
            start = time.process_time()
            for offset in offsets:
                read(offset, 1)
            totals[i] += time.process_time() - start
    return [t / (per_round * rounds) * 1e6 for t in totals]


def bench_pread_files(total: int, files: int, count: int, size: int, root: Path) -> float:
    """CPU microseconds per os.pread of ``size`` bytes at random positions spread over
    ``files`` files holding ``total`` bytes together (the kernel's share of a lookup)."""
    directory = root / f"pread-{files}"
    directory.mkdir()
    per_file = total // files
    fds = []
    block = b"x" * per_file
    try:
        for i in range(files):
            fd = os.open(directory / str(i), os.O_RDWR | os.O_CREAT, 0o644)
            os.write(fd, block)
            fds.append(fd)
        rng = random.Random(3)
        spots = [rng.randrange(total - size) for _ in range(count)]
        targets = [(fds[p // per_file], min(p % per_file, per_file - size)) for p in spots]
        pread = os.pread
        start = time.process_time()
        for fd, position in targets:
            pread(fd, size, position)
        return (time.process_time() - start) / count * 1e6
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(directory, ignore_errors=True)


def bench_index_variants(entries: int, lookups: int) -> tuple[float, float]:
    """µs per lookup: in-memory array + bisect (what OffsetIndex does) vs mmap + binary search
    over big-endian entries in Python (what a port of Kafka's mmap index would do)."""
    offsets = array("i", range(0, entries * 4, 4))
    rng = random.Random(1)
    targets = [rng.randrange(entries * 4) for _ in range(lookups)]
    start = time.perf_counter()
    for t in targets:
        bisect_right(offsets, t)
    arr = (time.perf_counter() - start) / lookups * 1e6
    with tempfile.TemporaryFile(dir="/tmp") as f:
        f.write(b"".join(struct.pack(">ii", o, o * 256) for o in offsets))
        f.flush()
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        unpack = struct.Struct(">i").unpack_from
        start = time.perf_counter()
        for t in targets:
            lo, hi = 0, entries - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if unpack(mm, mid * 8)[0] <= t:
                    lo = mid
                else:
                    hi = mid - 1
        mmapped = (time.perf_counter() - start) / lookups * 1e6
        mm.close()
    return arr, mmapped


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller counts (seconds)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--dir", default="/tmp", help="parent of the temporary directory")
    args = parser.parse_args()
    q = args.quick
    n_small = 50_000 if q else 200_000
    n_big = 100 if q else 300
    n_small_fsync = 300 if q else 2_000
    n_big_fsync = 10 if q else 50
    n_lookup_batches = 20_000 if q else 100_000
    n_lookups = 20_000 if q else 100_000

    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    b = Bench(root, args.repeat)
    print(
        f"# odradek storage benchmark ({'quick' if q else 'full'}), python {platform.python_version()}, "
        f"{os.cpu_count()} cpus, dir {root}"
    )
    try:
        v, runs = b.median(lambda: bench_append(b, KIB, n_small, fsync=False))
        b.report(f"append 1 KiB batches, page cache ({n_small:,})", v, "batches/s", runs)
        v, runs = b.median(lambda: bench_append(b, KIB, n_small, fsync=False, cpu=True))
        b.report(f"  same, per CPU second ({n_small:,})", v, "batches/s", runs)
        v, runs = b.median(lambda: bench_append(b, MIB, n_big, fsync=False) * MIB / 1e6)
        b.report(f"append 1 MiB batches, page cache ({n_big:,})", v, "MB/s", runs)
        v, runs = b.median(lambda: bench_append(b, MIB, n_big, fsync=False, cpu=True) * MIB / 1e6)
        b.report(f"  same, per CPU second ({n_big:,})", v, "MB/s", runs)
        v, runs = b.median(lambda: bench_raw_write(b, KIB, n_small))
        b.report(f"baseline: bare os.write of 1 KiB, no log ({n_small:,})", v, "writes/s", runs)
        v, runs = b.median(lambda: bench_raw_write(b, MIB, n_big) * MIB / 1e6)
        b.report(f"baseline: bare os.write of 1 MiB, no log ({n_big:,})", v, "MB/s", runs)
        v, runs = b.median(lambda: bench_append(b, KIB, n_small_fsync, fsync=True))
        b.report(f"append 1 KiB batches, fsync each ({n_small_fsync:,})", v, "batches/s", runs)
        v, runs = b.median(lambda: bench_append(b, MIB, n_big_fsync, fsync=True) * MIB / 1e6)
        b.report(f"append 1 MiB batches, fsync each ({n_big_fsync:,})", v, "MB/s", runs)

        log = build_log(b, n_lookup_batches, 1)
        v, runs = b.median(lambda: bench_read(log, MIB) / 1e6)
        b.report("read 1 KiB-batch log sequentially, 1 MiB reads", v, "MB/s", runs)
        many = build_log(b, n_lookup_batches, 1000)
        bench_lookups([log, many], n_lookups // 4, 4, 99)  # warm-up
        ones, thousands = [], []
        for r in range(args.repeat):
            one, thousand = bench_lookups([log, many], n_lookups, 20, r)
            ones.append(one)
            thousands.append(thousand)
        one, thousand = statistics.median(ones), statistics.median(thousands)
        b.report("lookup: read() at random offset, 1 segment", one, "µs CPU", ones, ".2f")
        b.report(
            "lookup: read() at random offset, 1,000 segments", thousand, "µs CPU", thousands, ".2f"
        )
        ratios = [t / o for o, t in zip(ones, thousands, strict=True)]
        b.report("lookup ratio 1,000 / 1 segments", statistics.median(ratios), "x", ratios, ".2f")
        log.delete()
        many.delete()
        total = n_lookup_batches * KIB
        p1 = [bench_pread_files(total, 1, n_lookups, 8192, root) for _ in range(args.repeat)]
        p1000 = [bench_pread_files(total, 1000, n_lookups, 8192, root) for _ in range(args.repeat)]
        b.report(
            "os.pread 8 KiB at random positions, 1 file", statistics.median(p1), "µs CPU", p1, ".2f"
        )
        b.report(
            "os.pread 8 KiB at random positions, 1,000 files",
            statistics.median(p1000),
            "µs CPU",
            p1000,
            ".2f",
        )

        arr_runs, mm_runs = [], []
        for _ in range(args.repeat):
            a, m = bench_index_variants(25_000, n_lookups)
            arr_runs.append(a)
            mm_runs.append(m)
        b.report(
            "index lookup, array + bisect (25k entries)",
            statistics.median(arr_runs),
            "µs",
            arr_runs,
            ".3f",
        )
        b.report(
            "index lookup, mmap + Python binary search",
            statistics.median(mm_runs),
            "µs",
            mm_runs,
            ".3f",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print()
    print("| measurement | median | runs |")
    print("|---|---|---|")
    for name, text, detail in b.rows:
        print(f"| {name} | {text} | {detail} |")


if __name__ == "__main__":
    main()
