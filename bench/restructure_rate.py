"""A/B of two odradek trees at a fixed produce rate: broker CPU per million records, RF 3 (leader
and followers) and RF 1, many short alternating rounds against clusters that stay up.

    .venv/bin/python bench/restructure_rate.py --old /tmp/odradek-old/src [--new src]
        [--rate 50000] [--records 250000] [--rounds 10] [--rf1] [--profile DIR] [--json out.json]

``bench/restructure_ab.py`` lets the producer run as fast as it can, so each run's batch sizes
(records per Produce and per follower Fetch) follow the machine's load at that moment, and CPU
per record follows them. Here both trees get the same load: one confluent-kafka producer
(acks=all, linger.ms 5, batch.size 256 KiB, 100 B records round-robin over 3 partitions) paced
to ``--rate`` records/s in 10 ms steps (it falls behind only if the machine cannot keep up: the
achieved rate is reported), ``--records`` records a round.

Setup, once: for each tree (``--old``, ``--new``: the ``src`` directory put on the brokers'
PYTHONPATH) a local Apache ZooKeeper with three ``odradek broker`` processes, and a 3-partition
RF 3 topic (min.insync.replicas 2) whose every partition is led by the controller; with
``--rf1`` also one broker without ZooKeeper per tree and a 3-partition RF 1 topic (acks=1
there). Both trees' brokers run during the whole benchmark, so both see the same background.

Each round runs old then new, or new then old (alternating from round to round): the brokers are
left until idle (each under 5% CPU over 0.5 s, at most 10 s), then the records are produced and
every replica is waited on until caught up (log end read from its segment files = the leader's
high watermark); the leader's and the followers' CPU (user + system from /proc/<pid>/stat, 10 ms
ticks) over that window, per million records. ``--profile DIR`` runs py-spy (raw collapsed
stacks, 200 Hz) on the leader and one follower of each tree in every round and prints each
tree's hottest functions at the end.

Reported: per round and the medians (with the 25th-75th percentiles) of old and new, and
new/old; the load average before and after. Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from common import PySpy, median, percentile, proc_stat, top_functions, zookeeper_cluster
from odradek.testing.process import BrokerProcess
from replication_cpu import create, wait_caught_up

PARTITIONS = 3
SIZE = 100
STEP = 0.01  # seconds per pacing step


HOOK = Path(__file__).resolve().parent / "profile_hook"


@contextlib.contextmanager
def tree(src: Path, cprofile: Path | None = None) -> Iterator[None]:
    """Brokers started inside the block run the odradek of ``src`` (they inherit PYTHONPATH);
    with ``cprofile``, also ``profile_hook`` (cProfile on SIGUSR1/SIGUSR2, into ``cprofile``)."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PROFILE_DIR")}
    os.environ["PYTHONPATH"] = str(src) if cprofile is None else f"{HOOK}{os.pathsep}{src}"
    if cprofile is not None:
        os.environ["PROFILE_DIR"] = str(cprofile)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def cpu(pid: int) -> float:
    user, system, _ = proc_stat(pid)
    return user + system


def settle(pids: list[int], timeout: float = 10.0) -> None:
    """Until every pid uses under 5% CPU over a 0.5 s window, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = [cpu(p) for p in pids]
        time.sleep(0.5)  # a measured window
        if max(cpu(p) - b for p, b in zip(pids, before, strict=True)) < 0.025:
            return


def paced_produce(
    bootstrap: str,
    topic: str,
    records: int,
    rate: int,
    acks: str,
    batch_records: int = 0,
    max_seconds: float = 120.0,
) -> tuple[int, float]:
    """(records acknowledged, seconds): ``records`` records at most ``rate`` per second (paced in
    ``STEP`` steps against the wall clock); raises on a delivery error or after ``max_seconds``.
    ``batch_records`` > 0: batches are cut at that many records (batch.num.messages, linger.ms
    1000), so the number of Produce requests does not follow the client's scheduling."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 262144,
        "message.timeout.ms": 120_000,
    }
    if batch_records > 0:
        config.update({"linger.ms": 1000, "batch.num.messages": batch_records})
    producer = Producer(config)
    producer.list_topics(topic, timeout=30)
    value = b"x" * SIZE
    acked = 0
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(err)

    per_step = max(1, int(rate * STEP))
    started = time.perf_counter()
    deadline = started + max_seconds
    sent = 0
    while sent < records:
        now = time.perf_counter()
        if now > deadline:
            raise RuntimeError(f"sent {sent} of {records} records in {max_seconds} s")
        due = min(records, int((now - started) / STEP + 1) * per_step)
        for _ in range(due - sent):
            for _attempt in range(10_000):  # bounded: the local queue drains within seconds
                try:
                    producer.produce(
                        topic, value, partition=sent % PARTITIONS, on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.01)
            else:
                raise RuntimeError("the producer's queue never drained")
            sent += 1
        producer.poll(0)
        wait = started + (due // per_step) * STEP - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # the pacing step
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors {errors[:3]}")
    return acked, elapsed


class Rf3:
    """A ZooKeeper, three brokers of one tree and a topic whose partitions all the controller leads."""

    def __init__(self, name: str, stack: contextlib.ExitStack) -> None:
        self.name = name
        c, _tmp = stack.enter_context(zookeeper_cluster(3, f"odradek-bench-rate-{name}-"))
        self.cluster = c
        self.leader = c.metadata().controller_id
        self.followers = [b for b in sorted(c.brokers) if b != self.leader]
        assignment = [
            [self.leader, *(self.followers if p % 2 == 0 else self.followers[::-1])]
            for p in range(PARTITIONS)
        ]
        self.topic = f"rate-rf3-{name}"
        create(
            c.bootstrap_servers,
            NewTopic(
                self.topic,
                num_partitions=PARTITIONS,
                replica_assignment=assignment,
                config={"min.insync.replicas": "2"},
            ),
        )
        c.wait_metadata(
            lambda md: (
                len(c.partitions(md, self.topic)) == PARTITIONS
                and all(
                    p.leader_id == self.leader and len(p.isr_nodes) == 3
                    for p in c.partitions(md, self.topic).values()
                )
            )
        )
        self.pids = {b: c.brokers[b].pid or 0 for b in (self.leader, *self.followers)}
        self.bootstrap = c.brokers[self.leader].bootstrap_servers
        self.dirs = [c.brokers[b].data_dir for b in (self.leader, *self.followers)]

    def round(
        self,
        records: int,
        rate: int,
        profile: Path | None,
        tag: str,
        cprofile: bool = False,
        batch_records: int = 0,
    ) -> dict[str, float]:
        settle(list(self.pids.values()))
        if cprofile:
            for pid in self.pids.values():
                os.kill(pid, signal.SIGUSR1)
        with contextlib.ExitStack() as spies:
            if profile is not None:
                for role, b in (("leader", self.leader), ("follower", self.followers[0])):
                    spies.enter_context(
                        PySpy(self.pids[b], profile / f"{self.name}-{role}-{tag}.txt")
                    )
            before = {b: cpu(p) for b, p in self.pids.items()}
            n, secs = paced_produce(self.bootstrap, self.topic, records, rate, "all", batch_records)
            wait_caught_up(self.bootstrap, self.topic, PARTITIONS, self.dirs)
            after = {b: cpu(p) for b, p in self.pids.items()}
        if cprofile:
            for pid in self.pids.values():
                os.kill(pid, signal.SIGUSR2)
        per_m = {b: (after[b] - before[b]) / n * 1e6 for b in self.pids}
        return {
            "rf3_leader": per_m[self.leader],
            "rf3_follower": sum(per_m[f] for f in self.followers) / len(self.followers),
            "rf3_rate": n / secs,
        }


class Rf1:
    """One broker of one tree without ZooKeeper and a 3-partition topic."""

    def __init__(self, name: str, stack: contextlib.ExitStack) -> None:
        self.broker = stack.enter_context(BrokerProcess({"num.partitions": PARTITIONS}))
        self.pid = self.broker.pid or 0
        self.topic = f"rate-rf1-{name}"
        create(self.broker.bootstrap_servers, NewTopic(self.topic, PARTITIONS, 1))

    def round(
        self, records: int, rate: int, batch_records: int = 0, cprofile: bool = False
    ) -> dict[str, float]:
        settle([self.pid])
        if cprofile:
            os.kill(self.pid, signal.SIGUSR1)
        c0 = cpu(self.pid)
        n, secs = paced_produce(
            self.broker.bootstrap_servers, self.topic, records, rate, "1", batch_records
        )
        c1 = cpu(self.pid)
        if cprofile:
            os.kill(self.pid, signal.SIGUSR2)
        return {"rf1": (c1 - c0) / n * 1e6, "rf1_rate": n / secs}


ROWS = [
    ("rf3_leader", "RF 3 leader CPU s / M records produced (acks=all)"),
    ("rf3_follower", "RF 3 follower CPU s / M records replicated (mean of 2)"),
    ("rf3_rate", "RF 3 records/s achieved"),
    ("rf1", "RF 1 broker CPU s / M records produced (acks=1)"),
    ("rf1_rate", "RF 1 records/s achieved"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the old tree's src directory")
    ap.add_argument("--new", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    ap.add_argument("--rate", type=int, default=50_000)
    ap.add_argument("--records", type=int, default=250_000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument(
        "--batch-records",
        type=int,
        default=0,
        help="cut batches at this many records (default: linger.ms 5, as restructure_ab.py)",
    )
    ap.add_argument("--rf1", action="store_true", help="also RF 1 (one broker per tree)")
    ap.add_argument("--no-rf3", action="store_true", help="leave RF 3 out (with --rf1)")
    ap.add_argument("--profile", type=Path, help="py-spy stacks into this directory")
    ap.add_argument(
        "--cprofile",
        type=Path,
        help="cProfile the brokers during each round (pstats files in DIR/old, DIR/new)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    with contextlib.ExitStack() as stack:
        rf3: dict[str, Rf3] = {}
        rf1: dict[str, Rf1] = {}
        for which, src in (("old", args.old), ("new", args.new)):
            prof = None
            if args.cprofile:
                prof = (args.cprofile / which).resolve()
                prof.mkdir(parents=True, exist_ok=True)
            with tree(src.resolve(), prof):
                if not args.no_rf3:
                    rf3[which] = Rf3(which, stack)
                if args.rf1:
                    rf1[which] = Rf1(which, stack)
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for which in order:
                row: dict[str, float] = {}
                if which in rf3:
                    row.update(
                        rf3[which].round(
                            args.records,
                            args.rate,
                            args.profile,
                            str(r),
                            bool(args.cprofile),
                            args.batch_records,
                        )
                    )
                if which in rf1:
                    row.update(
                        rf1[which].round(
                            args.records, args.rate, args.batch_records, bool(args.cprofile)
                        )
                    )
                runs[which].append(row)
                print(
                    f"round {r + 1} {which}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items())
                )
                sys.stdout.flush()
            if args.json:
                args.json.write_text(json.dumps(runs, indent=1))
    load1 = os.getloadavg()
    print()
    print(
        f"{args.rounds} rounds, {args.records:,} records of {SIZE} B at {args.rate:,}/s"
        f" (batches: {args.batch_records or 'linger.ms 5'}); "
        f"load average before {load0[0]:.1f}/{load0[1]:.1f}, after {load1[0]:.1f}/{load1[1]:.1f}"
    )
    print("| measure | old median (p25-p75) | new median (p25-p75) | new/old |")
    print("|---|---|---|---|")
    for key, label in ROWS:
        if key not in runs["old"][0]:
            continue
        old = [r[key] for r in runs["old"]]
        new = [r[key] for r in runs["new"]]
        d = 0 if key.endswith("rate") else 3

        def cell(v: list[float], d: int = d) -> str:
            return f"{median(v):.{d}f} ({percentile(v, 25):.{d}f}-{percentile(v, 75):.{d}f})"

        print(f"| {label} | {cell(old)} | {cell(new)} | {median(new) / median(old):.3f} |")
    if args.profile:
        for which in ("old", "new"):
            for role in ("leader", "follower"):
                merged = args.profile / f"{which}-{role}.txt"
                with merged.open("w") as out:
                    for f in sorted(args.profile.glob(f"{which}-{role}-*.txt")):
                        out.write(f.read_text())
                print(f"\n{which} {role}: function, self, inclusive, total samples")
                for fn, s, inc, tot in top_functions(merged, 25):
                    print(f"  {s:6d} {inc:6d} {tot:6d}  {fn}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] if len(sys.argv) > 1 else None))
