"""`odradek mirror` throughput and CPU against a plain consume of the same topic.

    .venv/bin/python bench/mirror.py [--records 200000] [--size 100] [--partitions 4]
    .venv/bin/python bench/mirror.py --latency [--rate 10000] [--seconds 10]

Two ``odradek broker`` processes (source A, target B; a fresh B per mode) on 127.0.0.1. The
source topic gets ``--records`` keyed records of ``--size`` bytes with one header. Then, in this
order: ``odradek perf consume`` reads the topic (wall time and CPU of that process), and
``odradek mirror`` copies it at least once and then exactly once (each into its own fresh
target): records/s from the first record seen on the target to the last, and the mirror
process's CPU seconds per million records (from /proc/<pid>/stat). ``--latency``: records
are produced at ``--rate`` records/s for ``--seconds`` with their send time in a header; a
consumer of the remote topic reports send-to-receive p50/p99 (at least once, then exactly once
read_committed). Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds
from odradek.client import Admin, NewTopic, Producer, TopicPartition
from odradek.testing.process import BrokerProcess

SETTINGS = {"group.initial.rebalance.delay.ms": 0}


def end_total(bootstrap: str, topic: str, partitions: int, read_committed: bool) -> int:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        if topic not in admin.list_topics():
            return 0
        got = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(partitions)}, read_committed=read_committed)
    return sum(o for o, _ts in got.values())


def produce(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    value = b"x" * size
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 262144}) as p:
        step = 10_000
        for lo in range(0, n, step):
            rows = range(lo, min(n, lo + step))
            p.send_batch(topic, [value] * len(rows), keys=[b"k%d" % i for i in rows],
                         headers=[[("seq", b"%d" % i)] for i in rows]).result(60)


def plain_consume(bootstrap: str, topic: str, n: int) -> tuple[float, float]:
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "perf", "consume", "--topic", topic, "--messages", str(n),
                             "-b", bootstrap], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode() if proc.stdout else ""
    wall = time.monotonic() - start
    print(out.strip())
    return wall, usage.ru_utime + usage.ru_stime


def mirror(a: BrokerProcess, topic: str, n: int, partitions: int, eos: bool, tmp: Path) -> tuple[float, float]:
    with BrokerProcess(SETTINGS) as b:

        props = tmp / f"mm2-{eos}.properties"
        props.write_text("\n".join([
            "clusters = A, B", f"A.bootstrap.servers = {a.bootstrap_servers}", f"B.bootstrap.servers = {b.bootstrap_servers}",
            "A->B.enabled = true", f"A->B.topics = {topic}", "replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1", "heartbeats.topic.replication.factor = 1",
            "checkpoints.topic.replication.factor = 1", f"exactly.once.source.support = {'enabled' if eos else 'disabled'}",
        ]) + "\n")
        log = open(tmp / f"mirror-{eos}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "odradek", "mirror", str(props)], stderr=log, stdout=subprocess.DEVNULL)
        remote = f"A.{topic}"
        deadline = time.monotonic() + 600
        first = None
        try:
            while time.monotonic() < deadline:
                got = end_total(b.bootstrap_servers, remote, partitions, eos)
                if got and first is None:
                    first = (time.monotonic(), got, cpu_seconds(proc.pid))
                if got >= n:
                    break
                time.sleep(0.05)
            else:
                raise SystemExit("mirror did not finish in 600 s")
            done = time.monotonic()
            cpu = cpu_seconds(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()
        assert first is not None
        t0, n0, cpu0 = first
        return (n - n0) / max(1e-6, done - t0), (cpu - cpu0) / max(1, n - n0) * 1e6


def latency(a: BrokerProcess, rate: int, seconds: float, eos: bool, tmp: Path) -> tuple[float, float, int]:
    import threading

    from odradek.client import Consumer

    topic = f"lat{int(eos)}.events"
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 4, 1)])
    with BrokerProcess(SETTINGS) as b:
        props = tmp / f"lat-{eos}.properties"
        props.write_text("\n".join([
            "clusters = A, B", f"A.bootstrap.servers = {a.bootstrap_servers}", f"B.bootstrap.servers = {b.bootstrap_servers}",
            "A->B.enabled = true", f"A->B.topics = {topic}", "replication.factor = 1",
            "offset-syncs.topic.replication.factor = 1", "heartbeats.topic.replication.factor = 1",
            "checkpoints.topic.replication.factor = 1", f"exactly.once.source.support = {'enabled' if eos else 'disabled'}",
        ]) + "\n")
        log = open(tmp / f"lat-{eos}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "odradek", "mirror", str(props)], stderr=log, stdout=subprocess.DEVNULL)
        total = int(rate * seconds)
        samples: list[float] = []

        def produce() -> None:
            with Producer({"bootstrap.servers": a.bootstrap_servers, "linger.ms": 1}) as p:
                start = time.monotonic()
                for i in range(total):
                    pause = start + i / rate - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    p.send(topic, b"x" * 100, key=b"k%d" % i, headers=[("sent", b"%d" % time.time_ns())])
                p.flush()

        try:
            deadline = time.monotonic() + 60
            while end_total(b.bootstrap_servers, f"A.{topic}", 4, False) == 0 and "copying" not in (tmp / f"lat-{eos}.log").read_text():
                if time.monotonic() > deadline:
                    raise SystemExit("the mirror did not start in 60 s")
                time.sleep(0.1)
            t = threading.Thread(target=produce, daemon=True)
            t.start()
            config = {"bootstrap.servers": b.bootstrap_servers, "auto.offset.reset": "earliest", "enable.auto.commit": "false",
                      "isolation.level": "read_committed" if eos else "read_uncommitted"}
            with Consumer(config) as c:
                deadline = time.monotonic() + seconds + 60
                while len(samples) < total and time.monotonic() < deadline:
                    try:
                        if not c.assignment():
                            c.assign([TopicPartition(f"A.{topic}", p) for p in range(4)])
                    except Exception:
                        time.sleep(0.2)
                        continue
                    for r in c.poll(0.5):
                        now = time.time_ns()
                        samples.extend((now - int(v)) / 1e6 for k, v in r.headers if k == "sent" and v)
            t.join(30)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            log.close()
    samples.sort()
    return samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))], len(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    if args.latency:
        with tempfile.TemporaryDirectory() as d, BrokerProcess(SETTINGS) as a:
            for eos in (False, True):
                p50, p99, n = latency(a, args.rate, args.seconds, eos, Path(d))
                print(f"mirror {'exactly once ' if eos else 'at least once'} at {args.rate} records/s: "
                      f"p50 {p50:.1f} ms, p99 {p99:.1f} ms ({n} records)")
        return
    topic = "bench.events"
    with tempfile.TemporaryDirectory() as d, BrokerProcess(SETTINGS) as a:

        produce(a.bootstrap_servers, topic, args.records, args.size, args.partitions)
        wall, cpu = plain_consume(a.bootstrap_servers, topic, args.records)
        print(f"plain consume: {args.records / wall:,.0f} records/s (process wall incl. start), "
              f"{cpu / args.records * 1e6:.1f} CPU s per million records")
        for eos in (False, True):
            rate, cpu_per_m = mirror(a, topic, args.records, args.partitions, eos, Path(d))
            print(f"mirror {'exactly once ' if eos else 'at least once'}: {rate:,.0f} records/s, "
                  f"{cpu_per_m:.1f} CPU s per million records")


if __name__ == "__main__":
    main()
