"""Racks on three brokers (broker i in rack ``rack<i>``): DescribeCluster and Metadata return
each broker's rack, a topic created without an assignment has its replicas on distinct racks, a
confluent-kafka consumer with ``client.rack`` fetches from the replica in its rack (KIP-392,
after librdkafka's test 0101): partition 0's leader (broker 1) has the rack-aware replica
selector and sends the consumer to broker 2, partition 1's leader (broker 3) has none and
serves it itself. The consumer reads every record of both, in order; librdkafka's statistics
name the broker each partition is fetched from."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.zookeeper import ZooKeeperServer

from .harness import Cluster

pytestmark = pytest.mark.interop

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "racks"
RECORDS = 300
LONG_POLL_MS = 20_000


@pytest.fixture(scope="module")
def racked(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("racks")), 3)
    for i, b in c.brokers.items():
        b.settings["broker.rack"] = f"rack{i}"
        if i != 3:
            b.settings["replica.selector.class"] = SELECTOR
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_racks_in_describe_cluster_and_assignment(racked: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": racked.bootstrap_servers})
    nodes = admin.describe_cluster(request_timeout=30).result(timeout=30).nodes
    assert {n.id: n.rack for n in nodes} == {1: "rack1", 2: "rack2", 3: "rack3"}
    brokers = racked.metadata().brokers  # Metadata v12
    assert {int(b.node_id): b.rack for b in brokers} == {1: "rack1", 2: "rack2", 3: "rack3"}
    for f in admin.create_topics([NewTopic("spread", 6, 3)], request_timeout=30).values():
        f.result(timeout=30)
    md = racked.wait_metadata(lambda md: len(racked.partitions(md, "spread")) == 6)
    parts = racked.partitions(md, "spread")
    assert all(sorted(p.replica_nodes) == [1, 2, 3] for p in parts.values())
    leaders = sorted(p.leader_id for p in parts.values())
    assert leaders == [1, 1, 2, 2, 3, 3]


def _produce(bootstrap: str, first: int, end: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(first, end):
        for p in (0, 1):
            producer.produce(TOPIC, f"{p}-{i}".encode(), partition=p)
        producer.poll(0)
    assert producer.flush(60) == 0


def test_consumer_reads_from_the_replica_in_its_rack(racked: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": racked.bootstrap_servers})
    topic = NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2, 3], [3, 1, 2]])
    for f in admin.create_topics([topic], request_timeout=30).values():
        f.result(timeout=30)
    racked.wait_metadata(
        lambda md: (
            [p.leader_id for _, p in sorted(racked.partitions(md, TOPIC).items())] == [1, 3]
            and all(len(p.isr_nodes) == 3 for p in racked.partitions(md, TOPIC).values())
        )
    )
    _produce(racked.bootstrap_servers, 0, RECORDS)

    fetched_from: dict[int, int] = {}

    def on_stats(text: str) -> None:
        for p, s in json.loads(text).get("topics", {}).get(TOPIC, {}).get("partitions", {}).items():
            if int(p) >= 0 and s.get("broker", -1) >= 0:
                fetched_from[int(p)] = s["broker"]

    consumer = Consumer(
        {
            "bootstrap.servers": racked.bootstrap_servers,
            "group.id": "racks",
            "client.rack": "rack2",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            # a fetch waits this long for data unless new data wakes it, on a follower too
            "fetch.wait.max.ms": LONG_POLL_MS,
            "stats_cb": on_stats,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        got: dict[int, list[bytes | None]] = {0: [], 1: []}

        def read_until(count: int, seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while sum(map(len, got.values())) < 2 * count:
                assert time.monotonic() < deadline, f"read {[len(v) for v in got.values()]}"
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                got[msg.partition() or 0].append(msg.value())

        read_until(RECORDS, 60)
        # caught up, its fetches wait at the high watermarks: new records wake them (the
        # follower's when its high watermark moves), well before fetch.wait.max.ms
        _produce(racked.bootstrap_servers, RECORDS, 2 * RECORDS)
        read_until(2 * RECORDS, LONG_POLL_MS / 2000)
        for p in (0, 1):
            assert got[p] == [f"{p}-{i}".encode() for i in range(2 * RECORDS)]
        # the statistics after the last record: partition 0 from its rack2 replica, 1 from its leader
        deadline = time.monotonic() + 10
        while fetched_from != {0: 2, 1: 3}:
            assert time.monotonic() < deadline, f"fetched from {fetched_from}"
            consumer.poll(0.2)
    finally:
        consumer.close()
