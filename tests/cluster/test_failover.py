"""End to end: three broker processes on ZooKeeper, a topic with replication factor 3 created by
confluent-kafka's AdminClient, acks=all producing and consuming with confluent-kafka, and a
partition leader SIGKILLed mid-stream: a new leader is elected from the ISR, producing and
consuming go on, and the checker (checker.py) finds every acknowledged record where it was
acknowledged. A control run feeds the checker a read-back with one record removed and shows it
reports the loss."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .checker import Ack, check
from .harness import PARTITIONS, TOPIC, Cluster, acks_all_producer, read_back

pytestmark = pytest.mark.interop

class AckingProducer:
    """A confluent-kafka producer (acks=all, idempotent) that records every acknowledgement."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = acks_all_producer(bootstrap)
        self.acks: list[Ack] = []
        self.errors: list[str] = []
        self.sent = 0

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acks.append(Ack(msg.partition(), msg.offset(), msg.value()))

    def send(self, n: int, tag: str) -> None:
        for _ in range(n):
            value = f"{tag}-{self.sent}".encode()
            self.producer.produce(
                TOPIC, value, partition=self.sent % PARTITIONS, on_delivery=self._on_delivery
            )
            self.sent += 1
            self.producer.poll(0)

    def flush(self, timeout: float) -> None:
        left = self.producer.flush(timeout)
        assert left == 0, (
            f"{left} records not acknowledged within {timeout} s; errors {self.errors[:5]}"
        )


def test_leader_sigkill_keeps_every_acknowledged_record(cluster3: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    new = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    md = cluster3.wait_metadata(
        lambda md: (
            len(cluster3.partitions(md, TOPIC)) == PARTITIONS
            and all(len(p.isr_nodes) == 3 for p in cluster3.partitions(md, TOPIC).values())
        )
    )
    leaders = {p: s.leader_id for p, s in cluster3.partitions(md, TOPIC).items()}
    assert set(leaders.values()) == {1, 2, 3}, f"leaders are spread: {leaders}"

    producer = AckingProducer(cluster3.bootstrap_servers)
    producer.send(300, "before")
    producer.flush(60)
    assert len(producer.acks) == 300

    victim = leaders[0]
    producer.send(300, "during")
    cluster3.brokers[victim].kill()  # SIGKILL the leader of partition 0 mid-stream
    md = cluster3.wait_metadata(
        lambda md: cluster3.partitions(md, TOPIC)[0].leader_id not in (-1, victim), timeout=30
    )
    new_state = cluster3.partitions(md, TOPIC)[0]
    assert victim not in new_state.isr_nodes and new_state.leader_epoch > 0
    producer.send(300, "after")
    producer.flush(90)
    assert not producer.errors, producer.errors[:5]
    assert len(producer.acks) == 900

    log = read_back(cluster3.bootstrap_servers)
    result = check(producer.acks, log)
    assert result.ok, result.summary()

    # control: the same checker reports a record removed from what was read back
    doctored = {p: list(records) for p, records in log.items()}
    lost = doctored[0].pop(len(doctored[0]) // 2)
    control = check(producer.acks, doctored)
    assert not control.ok and [a.value for a in control.lost] == [lost[1]]

    # the killed broker comes back, catches up and rejoins the ISR; auto.leader.rebalance
    # gives it back the leadership of the partition it prefers
    cluster3.brokers[victim].start()
    cluster3.wait_metadata(
        lambda md: all(len(p.isr_nodes) == 3 for p in cluster3.partitions(md, TOPIC).values())
        and cluster3.partitions(md, TOPIC)[0].leader_id == victim,
        timeout=60,
    )


def test_group_coordinator_fails_over_with_commits_intact(cluster3: Cluster) -> None:
    """A consumer group on the cluster: its coordinator is the leader of the group's
    __consumer_offsets partition; SIGKILL it and the new leader serves the commits."""
    from odradek.coordinator.records import partition_for

    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for f in admin.create_topics([NewTopic("grouped", 3, 3)], request_timeout=30).values():
        f.result(timeout=30)
    cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, "grouped")) == 3)
    producer = Producer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all"})
    for i in range(30):
        producer.produce("grouped", b"r%d" % i, partition=i % 3)
    assert producer.flush(30) == 0

    settings = {
        "bootstrap.servers": cluster3.bootstrap_servers,
        "group.id": "survivors",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    consumer = Consumer(settings)
    consumer.subscribe(["grouped"])
    got = 0
    deadline = time.monotonic() + 60
    while got < 30:
        assert time.monotonic() < deadline, f"consumed {got} of 30"
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
    consumer.commit(asynchronous=False)
    consumer.close()

    md = cluster3.metadata()
    offsets = cluster3.partitions(md, "__consumer_offsets")
    coordinator = offsets[partition_for("survivors", len(offsets))].leader_id
    cluster3.brokers[coordinator].kill()
    try:
        p = partition_for("survivors", len(offsets))
        cluster3.wait_metadata(
            lambda md: (
                cluster3.partitions(md, "__consumer_offsets")[p].leader_id not in (-1, coordinator)
            )
        )
        again = Consumer(settings)
        try:
            committed = again.committed(
                [TopicPartition("grouped", i) for i in range(3)], timeout=30
            )
        finally:
            again.close()
        assert [tp.offset for tp in committed] == [10, 10, 10]
    finally:
        cluster3.brokers[coordinator].start()
