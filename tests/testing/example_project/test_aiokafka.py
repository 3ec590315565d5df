"""aiokafka in async tests: the broker runs on its own thread, so the fixture works unchanged
in async tests; EmbeddedBroker can also be started from inside the running loop."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from odradek.testing import EmbeddedBroker, create_topic


async def _roundtrip(bootstrap: str, topic: str, n: int) -> list[bytes]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(n):
            await producer.send_and_wait(topic, f"m{i}".encode(), key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="async-group",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
    )
    await consumer.start()
    try:
        got: list[bytes] = []

        async def collect() -> None:
            async for message in consumer:
                got.append(message.value)
                if len(got) == n:
                    return

        await asyncio.wait_for(collect(), 20)
        await consumer.commit()
        return got
    finally:
        await consumer.stop()


async def test_aiokafka_with_fixture(odradek_broker):
    create_topic(odradek_broker, "async-topic", partitions=1)
    got = await _roundtrip(odradek_broker.bootstrap_servers, "async-topic", 10)
    assert got == [f"m{i}".encode() for i in range(10)]


async def test_aiokafka_with_async_context_manager():
    async with EmbeddedBroker({"num.partitions": 2}) as broker:
        got = await _roundtrip(broker.bootstrap_servers, "ctx-topic", 5)
    assert sorted(got) == sorted(f"m{i}".encode() for i in range(5))


async def test_aiokafka_broker_on_the_test_loop():
    async with EmbeddedBroker(thread=False) as broker:
        got = await _roundtrip(broker.bootstrap_servers, "same-loop", 3)
    assert got == [b"m0", b"m1", b"m2"]
