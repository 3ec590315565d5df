"""200 tests, each with its own fresh broker: isolation and cheap start/stop."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from odradek.testing import create_topic, list_topics, read_all

N = 200


@pytest.mark.parametrize("i", range(N))
def test_fresh_broker(odradek_broker, i):
    # A fresh broker has no user topics: nothing from the previous test is visible.
    assert [t for t in list_topics(odradek_broker) if not t.startswith("__")] == []
    topic = f"t{i}"
    create_topic(odradek_broker, topic, partitions=1 + i % 3)
    if i % 10 == 0:
        producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers, "linger.ms": 0})
        producer.produce(topic, value=str(i).encode(), partition=0)
        assert producer.flush(10) == 0
        assert [r.value for r in read_all(odradek_broker, topic)] == [str(i).encode()]
    else:
        assert read_all(odradek_broker, topic) == []
