"""A/B of two odradek trees, same run, alternating: broker CPU per million records produced and
consumed (RF 1 and RF 3), failover and controlled-shutdown times.

    git worktree add /tmp/odradek-old bfa1772
    .venv/bin/python bench/restructure_ab.py --old /tmp/odradek-old/src [--new src]
        [--records 1000000] [--pairs 3] [--json out.json]

The brokers are ``python -m odradek broker`` processes whose PYTHONPATH is the tree under test
(``--old`` or ``--new``); the harness (this script, ``bench/common.py``, tests/cluster's
``Cluster``) and the clients (confluent-kafka) are the same for both. Each pair runs old then
new, or new then old (alternating from pair to pair), each with fresh brokers:

* RF 1: one broker without ZooKeeper; a 3-partition topic; ``--records`` records of 100 B
  (acks=1, linger.ms 5, batch.size 256 KiB, round-robin over the partitions), then all of them
  consumed from the beginning (one consumer, assign()). Broker CPU (user + system, from
  /proc/<pid>/stat) from before the first record to the last acknowledgement (produce) and over
  the whole read (consume), per million records.
* RF 3: three brokers on a local Apache ZooKeeper; a topic with 3 partitions all led by the
  controller (explicit assignment), min.insync.replicas 2; the same records with acks=all,
  CPU of the leader and of each follower until every replica has caught up; then consumed from
  the leader (its CPU).
* failover: on the same cluster, a 3-partition RF 3 topic; partition 0's leader is killed with
  SIGKILL, then (after it is back) another leader is stopped with SIGTERM (controlled
  shutdown); each time, the time from the signal to the first acknowledgement of a record
  produced after it, and the longest gap between acknowledgements until the new leader has
  served for a second (acks=all, linger.ms 0; ``bench/cluster.py``'s ``failover``).

Before each phase the brokers are left until idle (CPU below 5% over 0.5 s, at most 15 s), so
that work started after "ready" is not charged to the first phase. Reported: the medians over
the pairs, old and new, and new/old. CPU seconds, not wall time, are the measure: the machine
is shared. Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from cluster import failover
from common import cpu_seconds, median, proc_stat, zookeeper_cluster
from odradek.testing.process import BrokerProcess
from replication_cpu import create, produce, wait_caught_up

PARTITIONS = 3
SIZE = 100
PHASE_TIMEOUT = 180.0


@contextlib.contextmanager
def tree(src: Path) -> Iterator[None]:
    """Brokers started inside the block run the odradek of ``src`` (they inherit PYTHONPATH)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(src)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def settle(pids: list[int], timeout: float = 15.0) -> None:
    """Until every pid uses under 5% CPU over a 0.5 s window, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = [cpu_seconds(p, include_children=False) for p in pids]
        time.sleep(0.5)  # a measured window
        used = [
            cpu_seconds(p, include_children=False) - b for p, b in zip(pids, before, strict=True)
        ]
        if max(used) < 0.025:
            return


def cpu(pid: int) -> float:
    user, system, _ = proc_stat(pid)
    return user + system


def consume(bootstrap: str, topic: str, total: int) -> None:
    """Read ``total`` records of ``topic`` from the beginning (all partitions)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ab-{topic}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = 0
        deadline = time.monotonic() + PHASE_TIMEOUT
        while got < total and time.monotonic() < deadline:
            msgs = consumer.consume(num_messages=min(10_000, total - got), timeout=0.5)
            bad = [m.error() for m in msgs if m.error() is not None]
            if bad:
                raise RuntimeError(f"consume errors: {bad[:3]}")
            got += len(msgs)
    finally:
        consumer.close()
    if got < total:
        raise RuntimeError(f"consumed {got} of {total} records of {topic}")


def rf1(records: int, tag: str) -> dict[str, float]:
    with BrokerProcess({"num.partitions": PARTITIONS}) as broker:
        pid = broker.pid or 0
        topic = f"ab-rf1-{tag}"
        create(broker.bootstrap_servers, NewTopic(topic, PARTITIONS, 1))
        settle([pid])
        c0 = cpu(pid)
        n, secs = produce(broker.bootstrap_servers, topic, PARTITIONS, records, SIZE, 120, "1")
        c1 = cpu(pid)
        settle([pid])
        c2 = cpu(pid)
        consume(broker.bootstrap_servers, topic, n)
        c3 = cpu(pid)
    return {
        "rf1_produce": (c1 - c0) / n * 1e6,
        "rf1_consume": (c3 - c2) / n * 1e6,
        "rf1_rate": n / secs,
    }


def rf3(records: int, tag: str) -> dict[str, float]:
    with zookeeper_cluster(3, "odradek-bench-ab-") as (c, _tmp):
        leader = c.metadata().controller_id
        followers = [b for b in sorted(c.brokers) if b != leader]
        assignment = [
            [leader, *(followers if p % 2 == 0 else followers[::-1])] for p in range(PARTITIONS)
        ]
        topic = f"ab-rf3-{tag}"
        create(
            c.bootstrap_servers,
            NewTopic(
                topic,
                num_partitions=PARTITIONS,
                replica_assignment=assignment,
                config={"min.insync.replicas": "2"},
            ),
        )
        c.wait_metadata(
            lambda md: (
                len(c.partitions(md, topic)) == PARTITIONS
                and all(
                    p.leader_id == leader and len(p.isr_nodes) == 3
                    for p in c.partitions(md, topic).values()
                )
            )
        )
        pids = {b: c.brokers[b].pid or 0 for b in (leader, *followers)}
        bootstrap = c.brokers[leader].bootstrap_servers
        dirs = [c.brokers[b].data_dir for b in (leader, *followers)]
        settle(list(pids.values()))
        before = {b: cpu(p) for b, p in pids.items()}
        n, secs = produce(bootstrap, topic, PARTITIONS, records, SIZE, 120, "all")
        wait_caught_up(bootstrap, topic, PARTITIONS, dirs)
        after = {b: cpu(p) for b, p in pids.items()}
        settle(list(pids.values()))
        l0 = cpu(pids[leader])
        consume(bootstrap, topic, n)
        l1 = cpu(pids[leader])
        out = {
            "rf3_leader_produce": (after[leader] - before[leader]) / n * 1e6,
            "rf3_follower_produce": sum(after[f] - before[f] for f in followers)
            / len(followers)
            / n
            * 1e6,
            "rf3_leader_consume": (l1 - l0) / n * 1e6,
            "rf3_rate": n / secs,
        }
        fo = f"ab-failover-{tag}"
        create(c.bootstrap_servers, NewTopic(fo, 3, 3, config={"min.insync.replicas": "2"}))
        c.wait_metadata(lambda md: len(c.partitions(md, fo)) == 3)
        first, gap = failover(c, fo, controlled=False)
        out["failover_sigkill_s"], out["failover_sigkill_gap_s"] = first, gap
        first, gap = failover(c, fo, controlled=True)
        out["failover_controlled_s"], out["failover_controlled_gap_s"] = first, gap
    return out


ROWS = [
    ("rf1_produce", "RF 1 broker CPU s / M records produced (acks=1)"),
    ("rf1_consume", "RF 1 broker CPU s / M records consumed"),
    ("rf3_leader_produce", "RF 3 leader CPU s / M records produced (acks=all)"),
    ("rf3_follower_produce", "RF 3 follower CPU s / M records replicated (mean of 2)"),
    ("rf3_leader_consume", "RF 3 leader CPU s / M records consumed"),
    ("failover_sigkill_s", "failover: SIGKILL -> first ack (s)"),
    ("failover_sigkill_gap_s", "failover: longest gap between acks (s)"),
    ("failover_controlled_s", "controlled shutdown: SIGTERM -> first ack (s)"),
    ("failover_controlled_gap_s", "controlled shutdown: longest gap between acks (s)"),
    ("rf1_rate", "RF 1 records/s produced (acks=1)"),
    ("rf3_rate", "RF 3 records/s produced (acks=all)"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the old tree's src directory")
    ap.add_argument("--new", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument(
        "--only", choices=("rf1", "rf3"), help="run one phase (the other's rows are left out)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for pair in range(args.pairs):
        order = ("old", "new") if pair % 2 == 0 else ("new", "old")
        for which in order:
            src = args.old if which == "old" else args.new
            with tree(src.resolve()):
                tag = f"{which}{pair}"
                row: dict[str, float] = {}
                if args.only != "rf3":
                    row.update(rf1(args.records, tag))
                if args.only != "rf1":
                    row.update(rf3(args.records, tag))
            runs[which].append(row)
            print(f"pair {pair + 1} {which}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items()))
            sys.stdout.flush()
            if args.json:
                args.json.write_text(json.dumps(runs, indent=1))
    print()
    print(f"{args.pairs} pairs, {args.records:,} records of {SIZE} B; medians (old, new, new/old)")
    print("| measure | old | new | new/old |")
    print("|---|---|---|---|")
    for key, label in ROWS:
        if key not in runs["old"][0]:
            continue
        old = median(r[key] for r in runs["old"])
        new = median(r[key] for r in runs["new"])
        digits = 0 if key.endswith("rate") else 2
        print(f"| {label} | {old:.{digits}f} | {new:.{digits}f} | {new / old:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:] if len(sys.argv) > 1 else None))
