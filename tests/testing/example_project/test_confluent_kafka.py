"""confluent-kafka (librdkafka) against a fresh odradek broker per test."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import create_topic, read_all


def _produce(bootstrap: str, topic: str, values: list[bytes], **extra: object) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **extra})  # type: ignore[dict-item]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=str(i).encode())
    assert producer.flush(10) == 0


def _consume(consumer: Consumer, n: int, timeout: float = 20.0) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg.value())
    return got


def test_produce_and_read_back(odradek_broker):
    create_topic(odradek_broker, "orders", partitions=2)
    _produce(odradek_broker.bootstrap_servers, "orders", [b"a", b"b", b"c"])
    records = read_all(odradek_broker, "orders")
    assert sorted(r.value for r in records) == [b"a", b"b", b"c"]


def test_consumer_group(odradek_broker):
    create_topic(odradek_broker, "events", partitions=3)
    values = [f"v{i}".encode() for i in range(30)]
    _produce(odradek_broker.bootstrap_servers, "events", values, **{"compression.type": "zstd"})
    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": "g1",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.subscribe(["events"])
        assert sorted(_consume(consumer, 30)) == sorted(values)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("events", p) for p in range(3)], timeout=10)
        assert sum(tp.offset for tp in committed) == 30
    finally:
        consumer.close()


@pytest.mark.odradek_broker(settings={"num.partitions": 4})
def test_marker_settings_auto_create(odradek_broker):
    _produce(odradek_broker.bootstrap_servers, "auto-created", [b"x"])
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["auto-created"].partitions) == 4


def test_admin_client_creates_topic(odradek_broker):
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic("made-by-admin", num_partitions=2, replication_factor=1)]
    )
    futures["made-by-admin"].result(10)
    assert read_all(odradek_broker, "made-by-admin") == []


def test_fresh_broker_is_empty(odradek_broker):
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    topics = admin.list_topics(timeout=10).topics
    assert not [t for t in topics if not t.startswith("__")]


@pytest.mark.no_leak_check
def test_session_broker_is_shared_1(odradek_broker_session):
    topic = f"shared-{uuid.uuid4().hex}"
    _produce(odradek_broker_session.bootstrap_servers, topic, [b"one"])
    assert [r.value for r in read_all(odradek_broker_session, topic)] == [b"one"]
    _produce(odradek_broker_session.bootstrap_servers, "shared", [b"one"])


@pytest.mark.no_leak_check
def test_session_broker_is_shared_2(odradek_broker_session):
    _produce(odradek_broker_session.bootstrap_servers, "shared", [b"two"])
    values = [r.value for r in read_all(odradek_broker_session, "shared")]
    assert values == [b"one", b"two"]
