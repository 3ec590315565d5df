"""200 tests, each with its own fresh broker: isolation and cheap start/stop.

Every test produces through a real client (confluent-kafka; kafka-python in every tenth test,
because each new kafka-python producer waits ~100 ms on its own metadata refresh timer) and
reads the topic back; a fresh broker must show none of the previous test's topics.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from odradek.testing import create_topic, list_topics, read_all

N = 200


@pytest.mark.parametrize("i", range(N))
def test_fresh_broker(odradek_broker, i):
    assert [t for t in list_topics(odradek_broker) if not t.startswith("__")] == []
    topic = f"t{i}"
    create_topic(odradek_broker, topic, partitions=1 + i % 3)
    value = str(i).encode()
    if i % 10 != 5:
        producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers, "linger.ms": 0})
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(10) == 0
    else:
        kp = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers, linger_ms=0)
        try:
            kp.send(topic, value=value, partition=0).get(10)
        finally:
            kp.close(5)
    records = read_all(odradek_broker, topic)
    assert [(r.partition, r.offset, r.value) for r in records] == [(0, 0, value)]
