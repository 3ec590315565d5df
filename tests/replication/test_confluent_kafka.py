"""confluent-kafka (librdkafka, unmodified) producing with acks=all and idempotence to a
leader whose partition is replicated to two followers (standalone broker processes driven by
LeaderAndIsr frames), then consuming; the followers' copies are read back after moving the
leadership. The topic exists in the leader's own metadata (CreateTopics there), so the client,
bootstrapped to the leader alone, finds it there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing.process import BrokerProcess

from .controller import Controller, brokers, read, values

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

N = 200


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[int, BrokerProcess]]:
    with brokers(3, {"min.insync.replicas": 2}) as procs:
        yield procs


def test_acks_all_idempotent_producer_through_replication(
    cluster: dict[int, BrokerProcess],
) -> None:
    topic = "replicated"
    bootstrap = cluster[1].bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(15)
    controller = Controller(cluster)
    # epoch 0: what the leader's own metadata tells the client (Fetch v12 names the epoch)
    controller.elect(topic, 0, leader=1, leader_epoch=0, isr=[1, 2, 3], replicas=[1, 2, 3])

    acked: list[int] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.offset())  # type: ignore[attr-defined]

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(N):
        producer.produce(topic, value=b"v%d" % i, partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == [] and sorted(acked) == list(range(N))

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-repl",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        for _ in range(60):  # bounded: at most 60 batches of up to 1 s
            for msg in consumer.consume(N, 1.0):
                if msg.error() is None:
                    got.append(msg.value())
            if len(got) >= N:
                break
    finally:
        consumer.close()
    assert got == [b"v%d" % i for i in range(N)]
    # both followers hold every acknowledged record
    for epoch, leader in ((1, 2), (2, 3)):
        controller.elect(
            topic, 0, leader=leader, leader_epoch=epoch, isr=[1, 2, 3], replicas=[1, 2, 3]
        )
        assert values(read(cluster[leader], topic, N)) == [b"v%d" % i for i in range(N)]
