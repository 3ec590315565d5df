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

``--against REV`` (e.g. ``553798a``, the last commit before the broker started the log
cleaner's threads: the previous release's start-up) compares this tree with REV's ``src``
(``git archive``, in a temporary directory; ``--against-src DIR``: that tree's ``src`` as it
is, e.g. a worktree), each in fresh child interpreters run in turn
(A B A B ..., so that the machine's drift hits both), and prints the medians side by side:

* ``EmbeddedBroker().start()`` returns / ``stop()`` (memory storage), --runs cycles in
  --ab-rounds children each, after one warm-up broker per child;
* ``python -m odradek broker`` as a user starts it (file storage in a new temporary log.dirs,
  port 0, the console on an ephemeral port), from exec to its ready line (--process-runs runs
  each, after one unmeasured run each), the broker's CPU (user + system, /proc) up to that
  line, and its CPU in the --after-ready seconds that follow (work left for after "ready").
  Bytecode caching follows the environment (PYTHONDONTWRITEBYTECODE=1 here: every run
  compiles the package).

With ``--against`` only the comparison runs. Targets: start < 50 ms, stop < 100 ms,
then both < 2 ms; < 20 MB per idle broker; the broker process ready in < 0.5 s.
Benchmarks are not tests: run by hand; results go to docs/benchmarks/embedded.md.
"""

from __future__ import annotations

import argparse
import gc
import json
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


_CYCLES_CHILD = """
import json, sys, time
from odradek.testing import EmbeddedBroker, api_versions
with EmbeddedBroker() as b:
    api_versions(b)
starts, stops = [], []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    b = EmbeddedBroker().start()
    t1 = time.perf_counter()
    b.stop()
    starts.append(t1 - t0)
    stops.append(time.perf_counter() - t1)
print(json.dumps([starts, stops]))
"""


def checkout_src(rev: str) -> Path:
    """REV's ``src`` in a new temporary directory (``git archive``; the caller removes it)."""
    out = Path(tempfile.mkdtemp(prefix=f"odradek-{rev[:12]}-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out / "src"


def _env(src: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(src))


def bench_cycles_ab(
    srcs: dict[str, Path], cycles: int, rounds: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Embedded start/stop of each tree, in ``rounds`` children each, taken in turn."""
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in srcs}
    for _ in range(rounds):
        for label, src in srcs.items():
            res = subprocess.run(
                [sys.executable, "-c", _CYCLES_CHILD, str(cycles)],
                capture_output=True,
                text=True,
                timeout=300,
                check=True,
                env=_env(src),
            )
            starts, stops = json.loads(res.stdout.strip().splitlines()[-1])
            out[label][0].extend(starts)
            out[label][1].extend(stops)
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_process_ready_ab(
    srcs: dict[str, Path], runs: int, after_s: float
) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """``python -m odradek broker`` of each tree, in turn: (exec -> ready line, CPU to the
    ready line, CPU in the ``after_s`` seconds after it) per run; the first run of each is a
    warm-up (file caches) and is not counted."""
    out: dict[str, tuple[list[float], list[float], list[float]]] = {k: ([], [], []) for k in srcs}
    for i in range(runs + 1):
        for label, src in srcs.items():
            log_dir = tempfile.mkdtemp(prefix="odradek-bench-ready-")
            settings = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={log_dir}"]
            config = src / "odradek" / "broker" / "config.py"  # a package in later trees
            if not config.is_file() or "http.listeners" in config.read_text():
                settings.append("http.listeners=http://127.0.0.1:0")
            cmd = [sys.executable, "-m", "odradek", "broker"]
            for item in settings:
                cmd += ["--set", item]
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=_env(src),
                cwd=log_dir,
            )
            try:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                ready = time.perf_counter() - t0
                if "listening on" not in line:
                    raise RuntimeError(f"{label}: unexpected first line: {line!r}")
                cpu_ready = _cpu_s(proc.pid)
                time.sleep(after_s)
                cpu_after = _cpu_s(proc.pid) - cpu_ready
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if proc.stdout:
                    proc.stdout.close()
                shutil.rmtree(log_dir, ignore_errors=True)
            if i:
                out[label][0].append(ready)
                out[label][1].append(cpu_ready)
                out[label][2].append(cpu_after)
    return out


def compare(rev: str, args: argparse.Namespace) -> None:
    base = Path(args.against_src).resolve() if args.against_src else checkout_src(rev)
    srcs = {"this tree": ROOT / "src", f"{rev}": base}
    try:
        cycles = bench_cycles_ab(srcs, args.runs, args.ab_rounds) if args.runs else {}
        if cycles:
            print(f"\nEmbeddedBroker (memory), {args.ab_rounds} x {args.runs} cycles each, in turn")
        for label, (starts, stops) in cycles.items():
            print(f"  {label:12s} start() {summary(starts)}")
            print(f"  {'':12s} stop()  {summary(stops)}")
        if args.process_runs:
            ready = bench_process_ready_ab(srcs, args.process_runs, args.after_ready)
            print(
                f"\n`python -m odradek broker` (file storage, console on), {args.process_runs}"
                f" runs each, in turn; medians"
            )
            for label, (walls, cpus, afters) in ready.items():
                print(
                    f"  {label:12s} exec -> ready line {statistics.median(walls):.3f} s"
                    f" (min {min(walls):.3f}, max {max(walls):.3f});"
                    f" CPU to ready {statistics.median(cpus):.2f} s;"
                    f" CPU in the {args.after_ready:g} s after ready"
                    f" {statistics.median(afters):.2f} s"
                )
    finally:
        if not args.against_src:
            shutil.rmtree(base.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=20)
    parser.add_argument("--process-runs", type=int, default=10)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--storage", choices=["memory", "file"], default="memory")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--against", default="", help="a git revision to compare with")
    parser.add_argument(
        "--against-src",
        default="",
        help="with --against: that revision's src directory as it is (e.g. a worktree whose"
        " bytecode cache is kept) instead of a git archive",
    )
    parser.add_argument("--ab-rounds", type=int, default=3)
    parser.add_argument("--after-ready", type=float, default=3.0)
    parser.add_argument("--memory-child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.storage)
        return
    if args.against:
        print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus")
        compare(args.against, args)
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
