"""A replicated cluster against one broker, and failover times.

    .venv/bin/python bench/cluster.py [--records 100000] [--failovers 3]

* **throughput**: the same confluent-kafka workload (``--records`` records of 100 bytes, linger
  5 ms, 3 partitions, one producer) into (a) a topic with RF 3 and min.insync.replicas 2 on
  three local brokers on ZooKeeper with acks=all, and (b) a topic with RF 1 on one broker
  (no ZooKeeper) with acks=1; records/s of each and their ratio;
* **failover**: a producer (acks=all) sends a record to partition 0 every 2 ms; the leader of
  partition 0 is SIGKILLed or SIGTERMed (controlled shutdown); reported: the time from the
  signal to the first acknowledgement of a record sent after it, and the longest gap between
  two acknowledgements from the signal until the new leader has served for a second (the
  unavailability). Median of ``--failovers`` rounds each, zookeeper.session.timeout.ms 3000.

Brokers are real ``odradek broker`` processes (tests/cluster/conftest.py's ``Cluster``) on
127.0.0.1; ZooKeeper is Debian's.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common import zookeeper_cluster
from odradek.testing.process import BrokerProcess

if TYPE_CHECKING:
    from tests.cluster.conftest import Cluster

VALUE = b"x" * 100


def _create(bootstrap: str, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([topic], request_timeout=60).values():
        f.result(timeout=60)


def throughput(bootstrap: str, topic: str, acks: str, records: int) -> float:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.num.messages": 10000}
    )
    producer.list_topics(topic, timeout=30)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % 3)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0
    return records / (time.perf_counter() - started)


def failover(c: Cluster, topic: str, controlled: bool) -> tuple[float, float]:
    """(signal -> first acknowledgement of a record sent after it, longest gap between
    acknowledgements from the signal until the new leader has served for a second)."""
    md = c.wait_metadata(
        lambda md: (
            len(md.brokers) == 3
            and all(len(p.isr_nodes) == 3 for p in c.partitions(md, topic).values())
        )
    )
    victim = c.partitions(md, topic)[0].leader_id
    producer = Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "linger.ms": 0,
            "retry.backoff.ms": 20,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    acked: list[float] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is None:
            acked.append(time.monotonic())

    for _ in range(50):  # warm: leader known, connections up
        producer.produce(topic, VALUE, partition=0, on_delivery=on_delivery)
    producer.flush(30)
    stopper = threading.Thread(target=c.brokers[victim].stop)
    signalled = time.monotonic()
    if controlled:
        stopper.start()
    else:
        c.brokers[victim].kill()
    moved_at = 0.0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        producer.produce(topic, VALUE, partition=0, on_delivery=on_delivery)
        producer.poll(0.002)
        if not moved_at and acked and acked[-1] > signalled:
            md = c.metadata()
            if c.partitions(md, topic)[0].leader_id not in (-1, victim):
                moved_at = time.monotonic()
        if moved_at and time.monotonic() > moved_at + 1:
            break
    producer.flush(60)
    if controlled:
        stopper.join()
    c.brokers[victim].start()
    before = [t for t in acked if t <= signalled]
    after = [t for t in acked if t > signalled]
    if not after:
        return float("nan"), float("nan")
    times = before[-1:] + after
    gap = max(b - a for a, b in itertools.pairwise(times)) if len(times) > 1 else 0.0
    return after[0] - signalled, gap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--failovers", type=int, default=3)
    args = ap.parse_args()
    with (
        zookeeper_cluster(3, "odradek-bench-cluster-") as (c, tmp),
        BrokerProcess({"num.partitions": 3}, data_dir=tmp / "single") as single,
    ):
        _create(
            c.bootstrap_servers, NewTopic("bench-rf3", 3, 3, config={"min.insync.replicas": "2"})
        )
        _create(single.bootstrap_servers, NewTopic("bench-rf1", 3, 1))
        c.wait_metadata(lambda md: len(c.partitions(md, "bench-rf3")) == 3)
        rf3 = throughput(c.bootstrap_servers, "bench-rf3", "all", args.records)
        rf1 = throughput(single.bootstrap_servers, "bench-rf1", "1", args.records)
        print(f"acks=all RF3 min.insync 2, 3 brokers: {rf3:,.0f} records/s")
        print(f"acks=1 RF1, 1 broker:                 {rf1:,.0f} records/s")
        print(f"ratio: {rf3 / rf1:.2f}")
        _create(
            c.bootstrap_servers,
            NewTopic("bench-failover", 3, 3, config={"min.insync.replicas": "2"}),
        )
        for controlled in (False, True):
            rounds = [failover(c, "bench-failover", controlled) for _ in range(args.failovers)]
            what = "controlled shutdown (SIGTERM)" if controlled else "SIGKILL"
            first = [r[0] for r in rounds]
            gaps = [r[1] for r in rounds]
            print(
                f"{what}: signal -> first ack median {statistics.median(first):.2f} s "
                f"({', '.join(f'{t:.2f}' for t in first)}); longest gap between acks median "
                f"{statistics.median(gaps):.2f} s ({', '.join(f'{t:.2f}' for t in gaps)})"
            )


if __name__ == "__main__":
    main()
