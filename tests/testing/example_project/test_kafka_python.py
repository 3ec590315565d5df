"""kafka-python against a fresh odradek broker per test."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer

from odradek.testing import create_topic, read_all


def test_idempotent_producer_and_group_consumer(odradek_broker):
    create_topic(odradek_broker, "payments", partitions=2)
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers, linger_ms=0)
    try:
        for i in range(20):
            producer.send("payments", key=str(i).encode(), value=f"p{i}".encode())
        producer.flush(10)
    finally:
        producer.close(5)
    assert len(read_all(odradek_broker, "payments")) == 20

    consumer = KafkaConsumer(
        "payments",
        bootstrap_servers=odradek_broker.bootstrap_servers,
        group_id="billing",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
    )
    # kafka-python 3.0 never applies a rejoin that outlasts poll()'s timeout (need_rejoin()
    # lacks Java's "or a join is pending"); loading the topic's metadata before the first poll
    # avoids the metadata-triggered second join that hits it (docs/testing.md).
    consumer.partitions_for_topic("payments")
    try:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                got.extend(r.value for r in records)
        assert sorted(got) == sorted(f"p{i}".encode() for i in range(20))
        consumer.commit()
    finally:
        consumer.close()


@pytest.mark.odradek_broker(num_partitions=2, storage="file")
def test_file_storage_and_keyword_marker(odradek_broker):
    assert odradek_broker.storage == "file"
    assert odradek_broker.data_dir is not None and odradek_broker.data_dir.is_dir()
    producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap_servers)
    try:
        producer.send("auto", value=b"on-disk").get(10)
    finally:
        producer.close(5)
    records = read_all(odradek_broker, "auto")
    assert [r.value for r in records] == [b"on-disk"]
