"""odradek's own client through the fixture (the example in docs/testing.md)."""

from __future__ import annotations

from odradek.client import Consumer, Producer
from odradek.testing import create_topic


def test_roundtrip_with_odradek_client(odradek_broker):
    create_topic(odradek_broker, "orders", partitions=1)

    producer = Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})
    try:
        futures = [producer.send("orders", f"order {i}".encode(), key=b"k") for i in range(5)]
        offsets = [f.result(timeout=10).offset for f in futures]
    finally:
        producer.close()
    assert offsets == [0, 1, 2, 3, 4]

    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["orders"])
        values = []
        for _ in range(100):  # bounded
            values += [r.value for r in consumer.poll(timeout=0.2)]
            if len(values) == 5:
                break
        assert values == [f"order {i}".encode() for i in range(5)]
    finally:
        consumer.close()
