"""Topic ids with confluent-kafka (librdkafka 2.16 sends Fetch 16 once the broker offers it,
KIP-516): produce and consume through Fetch by topic id, and a consumer that keeps polling
while its topic is deleted and created again under the same name (the new topic has a new
id: the consumer's fetches by the old id get UNKNOWN_TOPIC_ID, it refreshes its metadata and
reads the new topic from its start)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import Target
from .support import unique_topic, wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

_SENT = re.compile(r"Sent (\w+)Request \(v(\d+)")


class SentVersions(logging.Handler):
    """Collects (api, version) of every request librdkafka logs with debug=protocol."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.sent: set[tuple[str, int]] = set()

    def emit(self, record: logging.LogRecord) -> None:
        for api, version in _SENT.findall(record.getMessage()):
            self.sent.add((api, int(version)))

    def versions(self, api: str) -> set[int]:
        return {v for a, v in self.sent if a == api}


def _logger(name: str) -> tuple[logging.Logger, SentVersions]:
    handler = SentVersions()
    logger = logging.getLogger(f"odradek.tests.librdkafka.{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    return logger, handler


def _create(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(15)
    wait_for(lambda: topic in admin.list_topics(topic, timeout=5).topics, 15, f"{topic} created")


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    errors: list[Any] = []
    for v in values:
        producer.produce(topic, value=v, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(15) == 0
    assert errors == [None] * len(values)


def _poll_until(consumer: Consumer, want: list[bytes], timeout: float) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while got != want and len(got) < len(want) and time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


def test_produce_and_consume_through_fetch_by_topic_id(kafka: Target) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = unique_topic("tid")
    _create(AdminClient({"bootstrap.servers": bootstrap}), topic)
    values = [b"v%d" % i for i in range(20)]
    _produce(bootstrap, topic, values)
    logger, sent = _logger("consume")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("g"),
            "auto.offset.reset": "earliest",
            "debug": "protocol",
        },
        logger=logger,
    )
    try:
        consumer.subscribe([topic])
        assert _poll_until(consumer, values, 30) == values
    finally:
        consumer.close()
    assert sent.versions("Fetch") and min(sent.versions("Fetch")) >= 13, sent.sent


def test_consumer_follows_a_topic_deleted_and_created_again(kafka: Target) -> None:
    bootstrap = kafka.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = unique_topic("recreated")
    _create(admin, topic)
    _produce(bootstrap, topic, [b"old-0", b"old-1", b"old-2"])
    logger, sent = _logger("recreate")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("g"),
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
            "debug": "protocol",
        },
        logger=logger,
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert _poll_until(consumer, [b"old-0", b"old-1", b"old-2"], 30) == [
            b"old-0",
            b"old-1",
            b"old-2",
        ]
        admin.delete_topics([topic])[topic].result(15)
        wait_for(lambda: topic not in admin.list_topics(timeout=5).topics, 15, f"{topic} deleted")
        _create(admin, topic)
        _produce(bootstrap, topic, [b"new-0", b"new-1"])
        assert _poll_until(consumer, [b"new-0", b"new-1"], 40) == [b"new-0", b"new-1"]
    finally:
        consumer.close()
    assert min(sent.versions("Fetch")) >= 13, sent.sent
