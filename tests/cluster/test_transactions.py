"""Transactions on the cluster: the transaction coordinator of a transactional id is the leader
of its ``__transaction_state`` partition (RF 3, min.insync.replicas 2, records written with
acks=all); SIGKILL it and the new leader loads the partition and carries on. Driven with
confluent-kafka's transactional producer and a read_committed consumer."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC, partition_for

from .harness import Cluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

TOPIC = "txn-failover"
TXN_ID = "failover-txn"


def _producer(cluster: Cluster) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": TXN_ID,
            "transaction.timeout.ms": 60_000,
            "message.timeout.ms": 60_000,
        }
    )


def _transaction(producer: Producer, tag: str, n: int, commit: bool = True) -> list[bytes]:
    producer.begin_transaction()
    values = [f"{tag}-{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        producer.produce(TOPIC, v, partition=i % 3)
    if commit:
        producer.commit_transaction(60)
    else:
        producer.abort_transaction(60)
    return values


def _read_committed(cluster: Cluster, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "txn-failover-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        got: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + 60
        # read until every partition reported its end (the LSO) after the expected count
        while len(eof) < 3 or len(got) < expected:
            assert time.monotonic() < deadline, f"read {len(got)} of {expected}: {got}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191:  # _PARTITION_EOF
                    eof.add(msg.partition())
                continue
            eof.discard(msg.partition())
            got.append(msg.value())
        return got
    finally:
        consumer.close()


def test_transaction_coordinator_fails_over(cluster3: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for f in admin.create_topics([NewTopic(TOPIC, 3, 3)], request_timeout=30).values():
        f.result(timeout=30)
    cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, TOPIC)) == 3)

    producer = _producer(cluster3)
    producer.init_transactions(60)
    committed = _transaction(producer, "before", 9)
    _transaction(producer, "aborted", 6, commit=False)

    md = cluster3.wait_metadata(
        lambda md: len(cluster3.partitions(md, TRANSACTION_STATE_TOPIC)) == 3
    )
    state = cluster3.partitions(md, TRANSACTION_STATE_TOPIC)
    p = partition_for(TXN_ID, len(state))
    coordinator = state[p].leader_id
    assert sorted(state[p].replica_nodes) == [1, 2, 3]  # transaction.state.log.replication.factor
    cluster3.brokers[coordinator].kill()
    try:
        cluster3.wait_metadata(
            lambda md: (
                cluster3.partitions(md, TRANSACTION_STATE_TOPIC)[p].leader_id
                not in (-1, coordinator)
            )
        )
        # the same producer carries on with the new coordinator
        committed += _transaction(producer, "after", 9)

        # a new instance with the same transactional.id fences the old one
        fencer = _producer(cluster3)
        fencer.init_transactions(60)
        with pytest.raises(KafkaException) as fenced:
            _transaction(producer, "zombie", 3)
        assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
        committed += _transaction(fencer, "fencer", 6)
        fencer.flush(10)

        got = _read_committed(cluster3, len(committed))
        assert sorted(got) == sorted(committed)
    finally:
        cluster3.brokers[coordinator].start()
