"""Quick smoke tests with third-party clients (the thorough ones live in tests/interop)."""

from __future__ import annotations

import time

import pytest

from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(90)


def test_confluent_kafka_produce_consume(broker: BrokerProcess) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic("ck-smoke", 3)]).values():
        f.result(10)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "compression.type": "zstd"}
    )
    reports: list[tuple[int, int]] = []

    def cb(err: object, msg: object) -> None:
        assert err is None, err
        reports.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(3000):
        p.produce(
            "ck-smoke",
            key=b"k%d" % (i % 17),
            value=b"v%d" % i,
            headers=[("h", b"%d" % i)],
            on_delivery=cb,
        )
    assert p.flush(30) == 0
    assert len(reports) == 3000
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "ck-smoke",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    c.assign([TopicPartition("ck-smoke", q, OFFSET_BEGINNING) for q in range(3)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 3000 and time.monotonic() < deadline:
        for m in c.consume(1000, 0.2):
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.value(), m.headers()))
    c.close()
    assert sorted((q, o) for q, o, _, _ in got) == sorted(reports)
    assert {v for _, _, v, _ in got} == {b"v%d" % i for i in range(3000)}


def test_kafka_python_default_idempotent_producer(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)  # idempotent, acks=all
    futures = [producer.send("kp-smoke", key=b"k", value=b"v%d" % i) for i in range(200)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(200))
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, consumer_timeout_ms=5000)
    tp = TopicPartition("kp-smoke", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 200:
            break
    consumer.close()
    assert values == [b"v%d" % i for i in range(200)]


async def test_aiokafka_roundtrip(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type="gzip")
    await producer.start()
    try:
        for i in range(100):
            await producer.send("ak-smoke", key=b"k", value=b"v%d" % i)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tp = TopicPartition("ak-smoke", 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        values = []
        while len(values) < 100:
            batch = await consumer.getmany(timeout_ms=2000)
            if not batch:
                break
            for msgs in batch.values():
                values.extend(m.value for m in msgs)
        assert values == [b"v%d" % i for i in range(100)]
    finally:
        await consumer.stop()
