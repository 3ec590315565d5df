"""Broker CPU per million records replicated, for the leader and each follower.

    .venv/bin/python bench/replication_cpu.py [--records 1000000] [--runs 5] [--partitions 3]

Three ``odradek broker`` processes (broker.id 1-3) on a local Apache ZooKeeper (Debian's
package), all on 127.0.0.1 (``common.zookeeper_cluster``). Each repetition creates a fresh
topic with RF 3 and min.insync.replicas 2 whose partitions are assigned ``[L, A, B]`` or
``[L, B, A]`` (explicit replica assignment), L being the controller: broker L leads every
partition (and does the controller's little work), brokers A and B are pure followers. One
confluent-kafka producer (acks=all, linger.ms 5, batch.size 256 KiB, ``--size``-byte records
round-robin over the partitions) sends ``--records`` records, or as many as it can in
``--max-seconds``. Each broker process's CPU time (user and system, from /proc/<pid>/stat,
10 ms ticks) is read before the first record and again once every replica has caught up: each
replica's log end (read from its segment files) equals the leader's high watermark
(ListOffsets), for every partition.

In the same repetition, alternating which goes first, the same workload goes to a topic with RF
1 on one more broker process without ZooKeeper (CPU per million records appended with no
replication); acks=all there is acks=1. Reported per repetition and as medians (min-max): CPU
seconds per million records for the leader, each follower and the RF 1 broker (and the system
part), their ratios to RF 1, the records/s, and each broker's idle CPU (a 2 s window after the
repetition) so the background (ZooKeeper pings, parked follower fetches, the controller) can be
told apart.

Diagnostics: ``--acks 1`` (the leader does not wait for its followers), ``--count-requests``
(the brokers run their console; the requests each answered are read from /metrics),
``--profile DIR`` (py-spy on the three brokers during the last RF 3 phase).

CPU seconds, not wall time, are the measure: the machine has 2 cores shared by the three brokers,
ZooKeeper, the producer and other work. Every loop is bounded in count and in time.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import LogEnd, PySpy, cpu_seconds, median, proc_stat, zookeeper_cluster
from odradek.testing.process import BrokerProcess


def create(bootstrap: str, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([topic], request_timeout=60).values():
        f.result(timeout=60)


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    size: int,
    max_seconds: float,
    acks: str = "all",
) -> tuple[int, float]:
    """(records acknowledged, seconds): ``records`` records (fewer if ``max_seconds`` runs out)
    with ``acks``; raises on any delivery error."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 262144,
            "message.timeout.ms": 120_000,
        }
    )
    producer.list_topics(topic, timeout=30)
    value = b"x" * size
    acked = 0
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(err)

    started = time.perf_counter()
    deadline = started + max_seconds
    for i in range(records):
        if i % 1000 == 0 and time.perf_counter() > deadline:
            break
        for _attempt in range(10_000):  # bounded: the local queue drains within seconds
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        else:
            raise RuntimeError("the producer's queue never drained")
        producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors {errors[:3]}")
    return acked, elapsed


def wait_caught_up(
    bootstrap: str, topic: str, partitions: int, data_dirs: list[Path], timeout: float = 120
) -> None:
    """Until every replica's log end equals the leader's high watermark, for every partition
    (``data_dirs``: the replicas' log directories; the first is the leader's)."""
    ends = {(d, p): LogEnd(d / f"{topic}-{p}") for d in data_dirs for p in range(partitions)}
    # read_uncommitted: a read_committed ListOffsets would make the leader load its producer
    # state (a replay of the whole log, once per partition) just for this check
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-watermarks",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            done = True
            for p in range(partitions):
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=10, cached=False
                )
                if any(ends[d, p].read() != high for d in data_dirs):
                    done = False
                    break
            if done:
                return
            if time.monotonic() > deadline:
                state = {f"{d.name}/{p}": e.end for (d, p), e in ends.items()}
                raise TimeoutError(f"replicas of {topic} not caught up in {timeout} s: {state}")
            time.sleep(0.02)
    finally:
        consumer.close()


def measure(
    pids: dict[int, int],
    work: Callable[[], tuple[int, float]],
    caught_up: Callable[[], None],
    consoles: dict[int, str] | None = None,
) -> tuple[int, float, dict[int, tuple[float, float]], dict[int, dict[str, float]]]:
    """(records, seconds of producing, (user, system) CPU seconds each pid spent from before
    ``work`` until ``caught_up`` returned, and with ``consoles`` the requests each broker
    answered)."""
    requests0 = request_counts(consoles) if consoles else {}
    before = {b: proc_stat(pid)[:2] for b, pid in pids.items()}
    records, seconds = work()
    caught_up()
    after = {b: proc_stat(pid)[:2] for b, pid in pids.items()}
    cpu = {b: (after[b][0] - before[b][0], after[b][1] - before[b][1]) for b in pids}
    requests: dict[int, dict[str, float]] = {}
    if consoles:
        for b, counts in request_counts(consoles).items():
            requests[b] = {k: v - requests0[b].get(k, 0) for k, v in counts.items()}
            requests[b] = {k: v for k, v in requests[b].items() if v}
    return records, seconds, cpu, requests


def idle_cpu(pids: dict[int, int], seconds: float = 2.0) -> dict[int, float]:
    """CPU seconds per second each pid uses while nothing is produced."""
    before = {b: cpu_seconds(pid) for b, pid in pids.items()}
    time.sleep(seconds)  # a measured window, not a wait for an event
    return {b: (cpu_seconds(pid) - before[b]) / seconds for b, pid in pids.items()}


@contextlib.contextmanager
def profiled(pids: dict[int, int], out: Path | None) -> Iterator[None]:
    """py-spy on every pid for the block when ``out`` is given; prints each one's top functions."""
    if out is None:
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        spies = {
            b: stack.enter_context(PySpy(pid, out / f"broker-{b}.txt")) for b, pid in pids.items()
        }
        yield
    for b, spy in spies.items():
        print(f"-- broker {b}: top functions by own samples (self, inclusive, total)")
        for name, own, incl, total in spy.top(12):
            print(f"   {own:6d} {incl:6d} {total:6d}  {name}")


REQUESTS = re.compile(
    r'^kafka_network_requestmetrics_requests_total\{request="(\w+)",[^}]*\} (\S+)$'
)
METRICS_MAX_AGE_S = 5.0  # odradek.console.broker renders /metrics at most this often


def request_counts(urls: dict[int, str]) -> dict[int, dict[str, float]]:
    """Requests answered so far per API, per broker (from /metrics, after waiting out its cache:
    only for ``--count-requests`` runs, with nothing else running)."""
    time.sleep(METRICS_MAX_AGE_S + 0.5)  # the broker's /metrics snapshot is up to 5 s old
    out: dict[int, dict[str, float]] = {}
    for b, url in urls.items():
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
            text = response.read().decode()
        counts: dict[str, float] = {}
        for line in text.splitlines():
            if m := REQUESTS.match(line):
                counts[m.group(1)] = counts.get(m.group(1), 0) + float(m.group(2))
        out[b] = counts
    return out


def fmt_range(values: list[float], digits: int = 2) -> str:
    return f"{median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=120, help="per produce phase")
    ap.add_argument(
        "--acks",
        default="all",
        choices=["all", "1"],
        help="diagnostic: acks=1 leaves out the wait for the followers",
    )
    ap.add_argument(
        "--profile", type=Path, help="py-spy the brokers in the last RF 3 run, into this directory"
    )
    ap.add_argument(
        "--count-requests",
        action="store_true",
        help="diagnostic: run the brokers with their console and print the requests each one "
        "answered per run (from /metrics; adds the console's own work and 6 s waits)",
    )
    args = ap.parse_args(argv)
    console = {"http.listeners": "http://127.0.0.1:0"} if args.count_requests else {}
    rows: list[dict[str, float]] = []
    with (
        zookeeper_cluster(3, "odradek-bench-replcpu-", {**console}) as (c, tmp),
        BrokerProcess(
            {"num.partitions": args.partitions, **console},
            data_dir=tmp / "single",
            log_level="info",
        ) as single,
    ):
        # The controller leads every partition, so the two followers do nothing but follow.
        leader = c.metadata().controller_id
        followers = tuple(b for b in sorted(c.brokers) if b != leader)
        assignment = [
            [leader, *(followers if p % 2 == 0 else followers[::-1])]
            for p in range(args.partitions)
        ]
        pids3 = {b: c.brokers[b].pid or 0 for b in (leader, *followers)}
        pid1 = {0: single.pid or 0}
        consoles3 = {b: c.brokers[b].console_url(30) for b in pids3} if console else None
        consoles1 = {0: single.console_url(30)} if console else None
        print(f"leader of every partition and controller: broker {leader}; followers {followers}")

        def produce_measured(
            label: str,
            pids: dict[int, int],
            bootstrap: str,
            topic: str,
            dirs: list[Path],
            consoles: dict[int, str] | None,
        ) -> tuple[int, float, dict[int, tuple[float, float]]]:
            """(records, seconds, CPU per pid) of one phase: the workload to ``topic`` through
            ``bootstrap`` until every replica in ``dirs`` (the leader's first) has caught up;
            prints the requests each broker answered when ``consoles`` are given."""
            n, secs, cpu, requests = measure(
                pids,
                lambda: produce(
                    bootstrap,
                    topic,
                    args.partitions,
                    args.records,
                    args.size,
                    args.max_seconds,
                    args.acks,
                ),
                lambda: wait_caught_up(bootstrap, topic, args.partitions, dirs),
                consoles,
            )
            for b, counts in requests.items():
                print(f"  {label} broker {b} answered {counts}")
            return n, secs, cpu

        def rf3(rep: int) -> dict[str, float]:
            topic = f"replcpu-rf3-{rep}"
            new = NewTopic(
                topic,
                num_partitions=args.partitions,
                replica_assignment=assignment,
                config={"min.insync.replicas": "2"},
            )
            create(c.bootstrap_servers, new)
            c.wait_metadata(
                lambda md: (
                    len(c.partitions(md, topic)) == args.partitions
                    and all(
                        p.leader_id == leader and len(p.isr_nodes) == 3
                        for p in c.partitions(md, topic).values()
                    )
                )
            )
            dirs = [c.brokers[b].data_dir for b in (leader, *followers)]
            last = rep == args.runs - 1
            with profiled(pids3, args.profile if last else None):
                n, secs, cpu = produce_measured(
                    "RF 3", pids3, c.brokers[leader].bootstrap_servers, topic, dirs, consoles3
                )
            out = {"rf3_records": n, "rf3_rate": n / secs}
            for b in pids3:
                out[f"rf3_cpu_per_m_{b}"] = sum(cpu[b]) / n * 1e6
                out[f"rf3_sys_per_m_{b}"] = cpu[b][1] / n * 1e6
            return out

        def rf1(rep: int) -> dict[str, float]:
            topic = f"replcpu-rf1-{rep}"
            create(single.bootstrap_servers, NewTopic(topic, args.partitions, 1))
            n, secs, cpu = produce_measured(
                "RF 1", pid1, single.bootstrap_servers, topic, [single.data_dir], consoles1
            )
            return {
                "rf1_records": n,
                "rf1_rate": n / secs,
                "rf1_cpu_per_m": sum(cpu[0]) / n * 1e6,
                "rf1_sys_per_m": cpu[0][1] / n * 1e6,
            }

        for rep in range(args.runs):
            row: dict[str, float] = {}
            for phase in (rf3, rf1) if rep % 2 == 0 else (rf1, rf3):
                row.update(phase(rep))
            idle = idle_cpu({**pids3, **pid1})
            for b, v in idle.items():
                row[f"idle_cpu_{b}"] = v
            rf1_cpu = row["rf1_cpu_per_m"]
            row["ratio_leader"] = row[f"rf3_cpu_per_m_{leader}"] / rf1_cpu
            for f in followers:
                row[f"ratio_follower_{f}"] = row[f"rf3_cpu_per_m_{f}"] / rf1_cpu
            row["ratio_total"] = sum(row[f"rf3_cpu_per_m_{b}"] for b in pids3) / rf1_cpu
            row["ratio_rate"] = row["rf3_rate"] / row["rf1_rate"]
            rows.append(row)
            print(
                f"run {rep + 1}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items()), flush=True
            )

    print()
    print(
        f"{args.runs} runs, {args.records:,} records of {args.size} B over {args.partitions} "
        f"partitions (acked per run: RF 3 {min(r['rf3_records'] for r in rows):,.0f}+, "
        f"RF 1 {min(r['rf1_records'] for r in rows):,.0f}+); medians (min-max)"
    )
    col = {k: [r[k] for r in rows] for k in rows[0]}
    print(
        "| broker | CPU s per million records (user + system) | of which system "
        "| ratio to RF 1 | idle CPU (s/s) |"
    )
    print("|---|---|---|---|---|")
    for role, b in [("leader", leader), *(("follower", f) for f in followers)]:
        ratio = col["ratio_leader"] if b == leader else col[f"ratio_follower_{b}"]
        print(
            f"| {role} (broker {b}), RF 3 | {fmt_range(col[f'rf3_cpu_per_m_{b}'])} "
            f"| {fmt_range(col[f'rf3_sys_per_m_{b}'])} | {fmt_range(ratio)} "
            f"| {fmt_range(col[f'idle_cpu_{b}'], 3)} |"
        )
    total = [sum(r[f"rf3_cpu_per_m_{b}"] for b in (leader, *followers)) for r in rows]
    print(f"| all three, RF 3 | {fmt_range(total)} | | {fmt_range(col['ratio_total'])} | |")
    print(
        f"| one broker, RF 1 | {fmt_range(col['rf1_cpu_per_m'])} "
        f"| {fmt_range(col['rf1_sys_per_m'])} | 1 | {fmt_range(col['idle_cpu_0'], 3)} |"
    )
    print()
    print(
        f"records/s: RF 3 acks={args.acks} {fmt_range(col['rf3_rate'], 0)}, RF 1 "
        f"{fmt_range(col['rf1_rate'], 0)}, ratio {fmt_range(col['ratio_rate'])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
