"""Transactions: transactional produce throughput against idempotent produce, and read_committed
consume against read_uncommitted.

    .venv/bin/python bench/transactions.py                  # 200,000 records x 3 reps
    .venv/bin/python bench/transactions.py --records 50000  # quicker

One ``odradek broker`` process (file storage in a temporary directory) and confluent-kafka
(librdkafka) clients, records of 100 B to a topic of ``--partitions`` partitions. In each
repetition, side by side:

1. produce: (a) an idempotent producer (``enable.idempotence=true``: the same acks=all and
   sequence checks a transactional producer has) sends every record, then flushes; (b) a
   transactional producer sends the same records in transactions of ``--txn-size`` (1,000)
   records: ``begin_transaction``, 1,000 ``produce``, ``commit_transaction`` (the two run in
   alternating order from one repetition to the next). Measured: records/s
   (wall clock, first produce to the last acknowledgement / commit) and the broker's CPU
   seconds per million records.
2. consume: a fresh consumer reads the transactional topic from the beginning to its end
   (``enable.partition.eof``) with ``isolation.level`` read_uncommitted, then read_committed
   (the latter also sees every COMMIT marker and checks the last stable offset). Measured:
   records/s and broker CPU seconds per million.

Medians over ``--reps`` and the ratios are printed; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.process import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cpu_seconds

VALUE = b"x" * 100


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def send(p: Producer, topic: str, records: range, partitions: int) -> None:
    """Records ``records`` (their numbers) round-robin over the partitions, waiting (bounded)
    while the producer's local queue is full."""
    for i in records:
        for _attempt in range(10_000):  # the local queue drains within seconds
            try:
                p.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        else:
            raise RuntimeError("the producer's queue never drained")


def produce_idempotent(bootstrap: str, topic: str, n: int, partitions: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    start = time.perf_counter()
    send(p, topic, range(n), partitions)
    left = p.flush(120)
    assert left == 0, f"{left} records not acknowledged"
    return time.perf_counter() - start


def produce_transactional(
    bootstrap: str, topic: str, n: int, partitions: int, txn_size: int
) -> float:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    p.init_transactions(30)
    start = time.perf_counter()
    for first in range(0, n, txn_size):
        p.begin_transaction()
        send(p, topic, range(first, min(n, first + txn_size)), partitions)
        p.commit_transaction(60)
    return time.perf_counter() - start


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, want: int) -> float:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    at_end: set[int] = set()
    start = time.perf_counter()
    deadline = start + 300
    while len(at_end) < partitions and time.perf_counter() < deadline:
        for m in c.consume(10000, 0.5):
            err = m.error()
            if err is None:
                got += 1
                at_end.discard(m.partition())
            elif err.code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
    elapsed = time.perf_counter() - start
    c.close()
    assert got == want, f"{isolation}: read {got} records, expected {want}"
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--txn-size", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    n, parts = args.records, args.partitions
    results: dict[str, list[tuple[float, float]]] = {}

    def measure(name: str, pid: int, fn: Any, *fn_args: Any) -> None:
        cpu0 = cpu_seconds(pid)
        elapsed = fn(*fn_args)
        cpu = cpu_seconds(pid) - cpu0
        results.setdefault(name, []).append((n / elapsed, cpu / n * 1e6))
        print(f"  {name:34s} {n / elapsed:12,.0f} rec/s  broker CPU {cpu / n * 1e6:6.2f} s/M")

    with BrokerProcess({"listeners": "PLAINTEXT://127.0.0.1:0"}) as broker:
        bootstrap = broker.bootstrap_servers
        pid = broker.pid
        assert pid is not None
        for rep in range(args.reps):
            print(f"rep {rep + 1}/{args.reps}")
            plain, txn = f"plain-{rep}", f"txn-{rep}"
            create_topic(bootstrap, plain, parts)
            create_topic(bootstrap, txn, parts)
            producers = [
                ("produce idempotent", produce_idempotent, (bootstrap, plain, n, parts)),
                (
                    f"produce transactional ({args.txn_size}/txn)",
                    produce_transactional,
                    (bootstrap, txn, n, parts, args.txn_size),
                ),
            ]
            for name, fn, fn_args in producers if rep % 2 == 0 else producers[::-1]:
                measure(name, pid, fn, *fn_args)
            measure(
                "consume read_uncommitted",
                pid,
                consume,
                bootstrap,
                txn,
                parts,
                "read_uncommitted",
                n,
            )
            measure(
                "consume read_committed", pid, consume, bootstrap, txn, parts, "read_committed", n
            )
    print(f"\nmedians of {args.reps} ({n:,} records of 100 B, {parts} partition(s)):")
    med = {
        k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
        for k, v in results.items()
    }
    for k, (rate, cpu) in med.items():
        print(f"  {k:34s} {rate:12,.0f} rec/s  broker CPU {cpu:6.2f} s/M")
    names = list(med)
    print(f"  transactional / idempotent produce rate: {med[names[1]][0] / med[names[0]][0]:.2f}")
    print(f"  read_committed / read_uncommitted rate:  {med[names[3]][0] / med[names[2]][0]:.2f}")


if __name__ == "__main__":
    main()
