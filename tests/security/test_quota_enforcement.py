"""Client quotas enforced on a real broker process: a confluent-kafka producer limited by
``producer_byte_rate`` is held near its quota and told ``throttle_time_ms`` (librdkafka's
throttle callback), and a consumer limited by ``consumer_byte_rate`` likewise. The quotas are
set with AlterClientQuotas frames; the rates are measured over a few seconds and asserted
within a factor (a client without a quota goes many times faster here)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from odradek.testing.helpers import create_topic
from odradek.testing.process import BrokerProcess

from .conftest import set_quota

QUOTA = 100 * 1024  # bytes per second
SECONDS = 4.0
VALUE = b"x" * 1000


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # two one-second samples: the rate is measured over at least one second, so a client
    # starts throttled after about one second's worth of its quota (Kafka's default, 11
    # samples, lets it burst for ten)
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "quota.window.num": "2",
        "quota.window.size.seconds": "1",
    }
    with BrokerProcess(settings) as b:
        yield b


def produce_for(
    broker: BrokerProcess, topic: str, client_id: str, seconds: float
) -> tuple[float, list[int]]:
    """Produce as fast as the broker lets ``client_id`` for ``seconds``: (bytes acknowledged
    per second, throttle times reported)."""
    throttles: list[int] = []
    acked = [0]

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked[0] += len(VALUE)

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 256,
            "batch.size": 16384,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    start = time.monotonic()
    deadline = start + seconds
    sent = 0
    while time.monotonic() < deadline and sent < 200_000:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    elapsed = time.monotonic() - start
    rate = acked[0] / elapsed
    producer.purge()
    producer.flush(10)
    return rate, throttles


def test_producer_held_near_its_quota(broker: BrokerProcess) -> None:
    create_topic(broker, "quota-produce", partitions=1)
    set_quota(broker, "slow-producer", "producer_byte_rate", QUOTA)
    rate, throttles = produce_for(broker, "quota-produce", "slow-producer", SECONDS)
    assert throttles and max(throttles) > 0, "no throttle_time_ms reported"
    assert QUOTA / 3 < rate < QUOTA * 2, (
        f"{rate / 1024:.0f} KiB/s against a {QUOTA // 1024} KiB/s quota"
    )
    # another client id has no quota: it goes much faster
    free, free_throttles = produce_for(broker, "quota-produce", "free-producer", 1.5)
    assert free > QUOTA * 4, f"{free / 1024:.0f} KiB/s unthrottled"
    assert not any(free_throttles)


def test_consumer_held_near_its_quota(broker: BrokerProcess) -> None:
    create_topic(broker, "quota-fetch", partitions=1)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "batch.size": 16384}
    )
    total = 2000  # ~2 MB: more than the consumer may read in the test's seconds
    for _ in range(total):
        while True:
            try:
                producer.produce("quota-fetch", VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    set_quota(broker, "slow-consumer", "consumer_byte_rate", QUOTA)
    throttles: list[int] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "slow-consumer",
            "group.id": "quota-fetch-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 64 * 1024,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    try:
        consumer.subscribe(["quota-fetch"])
        got = 0
        first: float | None = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and got < total:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            if first is None:
                first = time.monotonic()  # rate measured from the first record
            got += 1
            if time.monotonic() - first >= SECONDS:
                break
        assert first is not None
        rate = got * len(VALUE) / (time.monotonic() - first)
    finally:
        consumer.close()
    assert throttles and max(throttles) > 0, "no throttle_time_ms reported"
    assert QUOTA / 3 < rate < QUOTA * 2.5, (
        f"{rate / 1024:.0f} KiB/s against a {QUOTA // 1024} KiB/s quota"
    )
