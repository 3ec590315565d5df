"""aiokafka against a real broker process (aiokafka sends non-flexible protocol versions only)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import MessageSizeTooLargeError

from odradek.testing.helpers import create_topic

from .conftest import Target
from .support import (
    ASSIGNED_CONSUMER,
    CODECS,
    Collector,
    Consumed,
    Rec,
    assert_exactly,
    by_partition,
    consumed_of,
    make_records,
    murmur2_partition,
    send_kwargs,
    unique_topic,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

PARTITIONS = 4


async def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Rec],
    *,
    partition_of: Any = None,
    **config: Any,
) -> list[tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **config)
    await producer.start()
    try:
        return await send_all(producer, topic, records, partition_of=partition_of, timeout=30)
    finally:
        await producer.stop()


async def send_all(
    producer: AIOKafkaProducer,
    topic: str,
    records: Sequence[Rec],
    *,
    partition_of: Any = None,
    timeout: float,
) -> list[tuple[int, int]]:
    """Send `records` (explicit partition if `partition_of(i)` is given) and wait at most
    `timeout` s for all of them; returns the (partition, offset) of each."""
    futures = [
        await producer.send(topic, **send_kwargs(r, None if partition_of is None else partition_of(i)))
        for i, r in enumerate(records)
    ]
    mds = await asyncio.wait_for(asyncio.gather(*futures), timeout)
    return [(md.partition, md.offset) for md in mds]


def open_consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, **ASSIGNED_CONSUMER)


async def consume(
    bootstrap: str, topic: str, partitions: int, count: int, *, start: dict[int, int] | None = None
) -> list[Consumed]:
    c = open_consumer(bootstrap)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            if start and tp.partition in start:
                c.seek(tp, start[tp.partition])
            else:
                await c.seek_to_beginning(tp)
        got = Collector(count)
        while got.running():
            batches = await c.getmany(timeout_ms=100, max_records=2000)
            for tp, msgs in batches.items():
                for m in msgs:
                    got.out.append(consumed_of(tp.partition, m))
        return got.result()
    finally:
        await c.stop()


@pytest.mark.parametrize("codec", CODECS)
async def test_roundtrip_keyed_records_with_headers(kafka: Target, codec: str) -> None:
    topic = unique_topic(f"ak-{codec}")
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    records = make_records(2000, tag=f"ak-{codec}")
    reports = await produce(
        kafka.bootstrap_servers, topic, records, compression_type=None if codec == "none" else codec
    )
    got = await consume(kafka.bootstrap_servers, topic, PARTITIONS, len(records))
    assert_exactly(
        records, got, partitions=PARTITIONS, partition_of=murmur2_partition, reports=reports
    )


async def check_list_offsets(bootstrap: str, topic: str, by: dict[int, list[Rec]]) -> None:
    c = open_consumer(bootstrap)
    await c.start()
    try:
        tps = {p: TopicPartition(topic, p) for p in by}
        assert await c.beginning_offsets(list(tps.values())) == {tps[p]: 0 for p in by}
        assert await c.end_offsets(list(tps.values())) == {tps[p]: len(r) for p, r in by.items()}
        for p, recs in by.items():
            for k in (0, 1, len(recs) // 2, len(recs) - 1):
                for ts in (recs[k].timestamp, recs[k].timestamp - 1):
                    found = (await c.offsets_for_times({tps[p]: ts}))[tps[p]]
                    assert found is not None, (p, k, ts)
                    assert (found.offset, found.timestamp) == (k, recs[k].timestamp), (p, k, ts)
            assert (await c.offsets_for_times({tps[p]: recs[-1].timestamp + 1}))[tps[p]] is None
    finally:
        await c.stop()


async def test_list_offsets_earliest_latest_by_timestamp(kafka: Target) -> None:
    kafka.require("latest_offset")
    topic = unique_topic("ak-offsets")
    create_topic(kafka.bootstrap_servers, topic, 3)
    records = make_records(600, tag="ak-offsets")
    reports = await produce(kafka.bootstrap_servers, topic, records, partition_of=lambda i: i % 3)
    assert reports == [(i % 3, i // 3) for i in range(len(records))]
    await check_list_offsets(kafka.bootstrap_servers, topic, by_partition(records, 3))


async def test_restart_keeps_everything(kafka: Target) -> None:
    kafka.require("restart")
    topic = unique_topic("ak-restart")
    create_topic(kafka.bootstrap_servers, topic, 3)
    records = make_records(1500, tag="ak-restart")
    await produce(
        kafka.bootstrap_servers,
        topic,
        records,
        partition_of=lambda i: i % 3,
        compression_type="zstd",
    )
    await asyncio.to_thread(kafka.restart)
    got = await consume(kafka.bootstrap_servers, topic, 3, len(records))
    assert_exactly(records, got, partitions=3, placement=[i % 3 for i in range(len(records))])
    by = by_partition(records, 3)
    await check_list_offsets(kafka.bootstrap_servers, topic, by)
    more = make_records(30, tag="ak-after", base_timestamp=records[-1].timestamp + 10)
    reports = await produce(kafka.bootstrap_servers, topic, more, partition_of=lambda i: i % 3)
    assert reports == [(i % 3, len(by[i % 3]) + i // 3) for i in range(len(more))]


async def test_message_too_large_then_still_usable(kafka: Target) -> None:
    kafka.require("message_max_bytes")
    topic = unique_topic("ak-large")
    create_topic(kafka.bootstrap_servers, topic, 1)
    # The client's own limit is raised so that the broker (message.max.bytes = 1048588) decides.
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers,
        max_request_size=5_000_000,
        request_timeout_ms=20000,
    )
    await producer.start()
    try:
        with pytest.raises(MessageSizeTooLargeError):
            await asyncio.wait_for(
                producer.send_and_wait(topic, key=b"big", value=os.urandom(1_100_000), partition=0),
                20,
            )
        small = make_records(20, tag="ak-small")
        reports = await send_all(producer, topic, small, partition_of=lambda i: 0, timeout=20)
        assert [offset for _p, offset in reports] == list(range(20))
    finally:
        await producer.stop()
    got = await consume(kafka.bootstrap_servers, topic, 1, len(small))
    assert_exactly(small, got, partitions=1, placement=[0] * len(small))
