"""Transaction markers on a replication-factor-1 topic in a cluster.

The leader of such a partition is its whole ISR: the high watermark must pass a marker as
soon as it is appended, so that the marker's acks=all wait (Kafka appends markers with
requiredAcks=-1) ends at once. A commit that waited out ``offsets.commit.timeout.ms``
(5 s here) instead would leave the marker above the high watermark when EndTxn answers.
Driven with confluent-kafka's transactional producer against three real brokers."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import Cluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "txn-markers-rf1"
COMMIT_TIMEOUT_S = 5.0
"""offsets.commit.timeout.ms of the cluster's brokers (the default): how long a leader waits
for its ISR to have a marker."""


def _high_watermark(cluster: Cluster) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "txn-markers-rf1-hw",
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        return int(high)
    finally:
        consumer.close()


def _commit(producer: Producer, tag: str, n: int) -> tuple[list[bytes], float]:
    """One transaction of ``n`` records: (the values, seconds the commit took)."""
    producer.begin_transaction()
    values = [f"{tag}-{i}".encode() for i in range(n)]
    for v in values:
        producer.produce(TOPIC, v, partition=0)
    producer.flush(30)
    started = time.monotonic()
    producer.commit_transaction(60)
    return values, time.monotonic() - started


def test_commit_on_replication_factor_1_does_not_wait_for_a_follower(cluster3: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)], request_timeout=30).values():
        f.result(timeout=30)
    cluster3.wait_every_broker(lambda md: cluster3.partitions(md, TOPIC).get(0) is not None)

    producer = Producer(
        {
            "bootstrap.servers": cluster3.bootstrap_servers,
            "transactional.id": "txn-markers-rf1",
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(60)
    first, took_first = _commit(producer, "first", 5)
    assert took_first < COMMIT_TIMEOUT_S, f"the first commit took {took_first:.1f} s"
    # 5 records and the COMMIT marker, all below the high watermark when EndTxn answers
    assert _high_watermark(cluster3) == len(first) + 1

    # the coordinator is not left retrying: the next transaction goes through at once
    second, took_second = _commit(producer, "second", 3)
    assert took_second < COMMIT_TIMEOUT_S, f"the second commit took {took_second:.1f} s"
    assert _high_watermark(cluster3) == len(first) + len(second) + 2

    consumer = Consumer(
        {
            "bootstrap.servers": cluster3.bootstrap_servers,
            "group.id": "txn-markers-rf1-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(first) + len(second):
            assert time.monotonic() < deadline, f"read {got}"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == first + second
    finally:
        consumer.close()
