"""odradek.client and confluent-kafka (librdkafka) exchange records on the odradek broker with
identical keys, values, headers and timestamps, both ways; and share a consumer group."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from odradek.client import Admin, Consumer, NewTopic, Producer, TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.timeout(90), pytest.mark.interop]

RECORDS = [
    (b"key-%d" % i if i % 4 else None, b"value-%d" % i if i % 5 else b"", [("h1", b"a%d" % i), ("h2", None)] if i % 3 else [], 1_700_000_000_000 + i * 7)
    for i in range(60)
]


def _topic(broker: Any, partitions: int = 3) -> str:
    name = f"interop-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, partitions)])
    return name


def _norm(key: Any, value: Any, headers: Any, ts: int) -> tuple[Any, ...]:
    return (key, value or b"", tuple((k, v) for k, v in (headers or [])), ts)


def test_odradek_to_confluent(broker: Any) -> None:
    name = _topic(broker)
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": "lz4"}) as p:
        for k, v, h, ts in RECORDS:
            p.send(name, v, key=k, headers=h, timestamp=ts)
        p.flush()
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    try:
        c.assign([confluent_kafka.TopicPartition(name, p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append(_norm(m.key(), m.value(), m.headers(), m.timestamp()[1]))
    finally:
        c.close()
    assert sorted(got, key=repr) == sorted((_norm(*r) for r in RECORDS), key=repr)


def test_confluent_to_odradek(broker: Any) -> None:
    name = _topic(broker)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random", "compression.type": "zstd"})
    for k, v, h, ts in RECORDS:
        p.produce(name, value=v, key=k, headers=h or None, timestamp=ts)
    assert p.flush(20) == 0
    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(name, p) for p in range(3)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            got += c.poll(0.5)
    assert sorted((_norm(r.key, r.value, r.headers, r.timestamp) for r in got), key=repr) == sorted((_norm(*r) for r in RECORDS), key=repr)
    # librdkafka's murmur2_random places keyed records like Java and like odradek.client
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as ours:
        for r in got:
            if r.key is not None:
                assert ours.send(name, b"", key=r.key).result(10).partition == r.partition


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_shared_group_with_confluent(broker: Any, strategy: str) -> None:
    name = _topic(broker, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        for i in range(80):
            p.send(name, b"%d" % i, partition=i % 4)
    theirs = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                                       "partition.assignment.strategy": strategy, "fetch.queue.backoff.ms": 10, "session.timeout.ms": 6000,
                                       "heartbeat.interval.ms": 200})
    ours = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                     "partition.assignment.strategy": strategy, "heartbeat.interval.ms": 200, "session.timeout.ms": 6000})
    try:
        theirs.subscribe([name])
        ours.subscribe([name])
        seen_ours: list[Any] = []
        seen_theirs: list[Any] = []
        deadline = time.monotonic() + 45
        def balanced() -> bool:
            return len(ours.assignment()) == 2 and len(theirs.assignment()) == 2

        while (len(set(seen_ours) | set(seen_theirs)) < 80 or not balanced()) and time.monotonic() < deadline:
            m = theirs.poll(0.1)
            if m is not None and not m.error():
                seen_theirs.append((m.partition(), m.offset()))
            seen_ours += [(r.partition, r.offset) for r in ours.poll(0.1)]
        a_ours = ours.assignment()
        a_theirs = {TopicPartition(tp.topic, tp.partition) for tp in theirs.assignment()}
        assert len(a_ours) == 2 and len(a_theirs) == 2 and a_ours.isdisjoint(a_theirs)
        assert len(set(seen_ours) | set(seen_theirs)) == 80
    finally:
        theirs.close()
        ours.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_shared_group_with_kafka_python(broker: Any, strategy: str) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    name = _topic(broker, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
        for i in range(40):
            p.send(name, b"%d" % i, partition=i % 4)
    assignor = RangePartitionAssignor if strategy == "range" else RoundRobinPartitionAssignor
    theirs = KafkaConsumer(name, bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                           partition_assignment_strategy=[assignor], heartbeat_interval_ms=200, session_timeout_ms=6000)
    ours = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                     "partition.assignment.strategy": strategy, "heartbeat.interval.ms": 200, "session.timeout.ms": 6000})
    try:
        ours.subscribe([name])
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 45

        def balanced() -> bool:
            return len(ours.assignment()) == 2 and len(theirs.assignment()) == 2

        while (len(seen) < 40 or not balanced()) and time.monotonic() < deadline:
            for recs in theirs.poll(100).values():
                seen |= {(r.partition, r.offset) for r in recs}
            seen |= {(r.partition, r.offset) for r in ours.poll(0.1)}
        a_theirs = {TopicPartition(tp.topic, tp.partition) for tp in theirs.assignment()}
        assert len(seen) == 40
        assert len(ours.assignment()) == 2 and len(a_theirs) == 2 and ours.assignment().isdisjoint(a_theirs)
    finally:
        theirs.close()
        ours.close()
