"""Benchmark odradek.testing.EmbeddedBroker: start, stop, memory; compare with a broker process.

    .venv/bin/python bench/embedded.py [--runs 100] [--brokers 20] [--process-runs 10]
                                       [--storage memory|file] [--profile]

Measures, in this process after one warm-up broker (module imports are paid once per process
and reported separately as "cold"):

* start: ``EmbeddedBroker().start()`` until an ApiVersions v0 request on a new connection has
  been answered (what a test waits for before its first client call); median of --runs.
* stop: ``broker.stop()`` until the thread is joined and everything is closed; median.
* cold: a fresh interpreter doing ``import odradek.testing`` + first start + ApiVersions.
* memory: RSS added per idle embedded broker (--brokers started at once, one topic each).
* process: ``python -m odradek broker`` (memory storage, port 0) from spawn until its
  "listening on" line, and until an ApiVersions answer; SIGTERM until exit; median.

--profile runs the start/stop loop under cProfile and prints the top functions.
Targets: start < 50 ms, stop < 100 ms, < 20 MB per idle broker.
Benchmarks are not tests: run by hand; results go to docs/benchmarks/embedded.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from odradek.testing import EmbeddedBroker, api_versions, create_topic  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    return f"median {statistics.median(ms):7.2f} ms  p90 {p90:7.2f}  min {ms[0]:7.2f}  max {ms[-1]:7.2f}"


def bench_start_stop(runs: int, storage: str) -> tuple[list[float], list[float], list[float]]:
    starts: list[float] = []
    readies: list[float] = []
    stops: list[float] = []
    deadline = time.monotonic() + 300
    for _ in range(runs):
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter()
        broker = EmbeddedBroker(storage=storage).start()  # type: ignore[arg-type]
        t1 = time.perf_counter()
        api_versions(broker)
        t2 = time.perf_counter()
        broker.stop()
        t3 = time.perf_counter()
        starts.append(t1 - t0)
        readies.append(t2 - t0)
        stops.append(t3 - t2)
    return starts, readies, stops


def bench_cold(runs: int, *, cached_bytecode: bool) -> tuple[list[float], list[float]]:
    """Fresh interpreters. With ``cached_bytecode`` the .pyc files come from a private
    PYTHONPYCACHEPREFIX warmed by one extra run (what an installed package does); without it
    the environment decides (PYTHONDONTWRITEBYTECODE=1 compiles every module every time)."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "from odradek.testing import EmbeddedBroker, api_versions\n"
        "t1 = time.perf_counter()\n"
        "b = EmbeddedBroker().start(); api_versions(b)\n"
        "t2 = time.perf_counter(); b.stop()\n"
        "print(t1 - t0, t2 - t0)\n"
    )
    env = dict(os.environ)
    extra = 0
    if cached_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="odradek-bench-pycache-")
        extra = 1
    imports: list[float] = []
    totals: list[float] = []
    try:
        for i in range(runs + extra):
            out = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
                env=env,
            )
            if i < extra:
                continue  # warms the bytecode cache
            a, b = (float(x) for x in out.stdout.split())
            imports.append(a)
            totals.append(b)
    finally:
        if cached_bytecode:
            shutil.rmtree(env["PYTHONPYCACHEPREFIX"], ignore_errors=True)
    return imports, totals


def bench_stop_with_members(runs: int, storage: str) -> list[float]:
    """stop() while a confluent-kafka consumer (45 s session timeout) and a producer are
    connected and the consumer owns its partition."""
    from confluent_kafka import Consumer, Producer

    stops: list[float] = []
    for _ in range(runs):
        broker = EmbeddedBroker(storage=storage).start()  # type: ignore[arg-type]
        create_topic(broker, "t")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
        producer.produce("t", b"x")
        producer.flush(10)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "g",
                "session.timeout.ms": 45000,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 20
        while consumer.poll(0.05) is None and time.monotonic() < deadline:
            pass
        t0 = time.perf_counter()
        broker.stop()
        stops.append(time.perf_counter() - t0)
        # librdkafka's consumer close() waits for the group coordinator without a bound once
        # the broker is gone: a broker on the same port lets it finish.
        broker.restart()
        consumer.close()
        del producer
        broker.stop()
    return stops


def bench_memory(n: int, storage: str) -> tuple[float, int, int]:
    """RSS added by ``n`` idle brokers (one topic each), measured in a fresh interpreter so
    that memory freed by earlier benchmarks cannot hide the growth. Returns (bytes per
    broker, total bytes added, baseline RSS)."""
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", str(n), "--storage", storage],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    before, after = (int(x) for x in out.stdout.split())
    return (after - before) / n, after - before, before


def memory_child(n: int, storage: str) -> None:
    # Warm: one broker with a topic and a read-back, so lazily imported modules are loaded.
    with EmbeddedBroker(storage=storage) as b:  # type: ignore[arg-type]
        create_topic(b, "warm")
        api_versions(b)
    gc.collect()
    time.sleep(0.2)
    before = rss_bytes()
    brokers = [EmbeddedBroker(storage=storage).start() for _ in range(n)]  # type: ignore[arg-type]
    for i, b in enumerate(brokers):
        create_topic(b, f"t{i}")
    gc.collect()
    time.sleep(0.2)
    after = rss_bytes()
    for b in brokers:
        b.stop()
    print(before, after)


def bench_process(runs: int) -> tuple[list[float], list[float], list[float]]:
    listening: list[float] = []
    ready: list[float] = []
    stops: list[float] = []
    cmd = [
        sys.executable,
        "-m",
        "odradek",
        "broker",
        "--set",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--set",
        "storage.engine=memory",
    ]
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            t1 = time.perf_counter()
            m = re.search(r"listening on ([^ ]+):(\d+)", line)
            if not m:
                raise RuntimeError(f"unexpected first line: {line!r}")
            api_versions(f"127.0.0.1:{m[2]}")
            t2 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            t3 = time.perf_counter()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        listening.append(t1 - t0)
        ready.append(t2 - t0)
        stops.append(t3 - t2)
    return listening, ready, stops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=20)
    parser.add_argument("--process-runs", type=int, default=10)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--storage", choices=["memory", "file"], default="memory")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--memory-child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.storage)
        return

    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
    t0 = time.perf_counter()
    with EmbeddedBroker(storage=args.storage) as b:  # warm-up: imports
        api_versions(b)
    print(
        f"first start+ApiVersions+stop in this process (imports): {(time.perf_counter() - t0) * 1000:.1f} ms"
    )

    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        bench_start_stop(args.runs, args.storage)
        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
        return

    starts, readies, stops = bench_start_stop(args.runs, args.storage)
    print(f"\nEmbeddedBroker (storage={args.storage}), {len(starts)} runs")
    print(f"  start() returns        {summary(starts)}")
    print(f"  start -> ApiVersions   {summary(readies)}   (target < 50 ms)")
    print(f"  stop()                 {summary(stops)}   (target < 100 ms)")

    members = bench_stop_with_members(max(1, args.runs // 10), args.storage)
    print(f"  stop() with a consumer group member and a producer connected, {len(members)} runs")
    print(f"                         {summary(members)}")

    for cached in (False, True) if args.cold_runs else ():
        imports, totals = bench_cold(args.cold_runs, cached_bytecode=cached)
        label = (
            "cached .pyc"
            if cached
            else f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}"
        )
        print(f"\ncold, fresh interpreter ({label}), {len(totals)} runs")
        print(f"  import odradek.testing       {summary(imports)}")
        print(f"  import + start + ApiVersions {summary(totals)}")

    for n in (args.brokers, 5 * args.brokers):
        per, total, base = bench_memory(n, args.storage)
        print(
            f"\nmemory: {n} idle brokers (one topic each) add {total / 2**20:.1f} MiB RSS"
            f" = {per / 2**20:.2f} MiB per broker (target < 20 MB; process RSS before:"
            f" {base / 2**20:.0f} MiB)"
        )

    if args.process_runs:
        listening, ready, pstops = bench_process(args.process_runs)
        print(f"\n`python -m odradek broker` process (storage=memory), {len(ready)} runs")
        print(f"  spawn -> 'listening on' {summary(listening)}")
        print(f"  spawn -> ApiVersions    {summary(ready)}")
        print(f"  SIGTERM -> exit         {summary(pstops)}")


if __name__ == "__main__":
    main()
