"""kafka-python 3.x against a real broker process, producer on DEFAULT settings (idempotent,
acks=all: InitProducerId and per-partition sequence checks must work)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import MessageSizeTooLargeError

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


def producer_config(kafka: Target) -> dict[str, Any]:
    """Default settings against odradek; Tansu has no working InitProducerId, so when debugging
    the tests against Tansu the producer is non-idempotent."""
    if kafka.name == "tansu":
        return {"enable_idempotence": False, "acks": 1}
    return {}


def produce(
    kafka: Target,
    topic: str,
    records: Sequence[Rec],
    *,
    partition_of: Any = None,
    **config: Any,
) -> list[tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers, **{**producer_config(kafka), **config}
    )
    try:
        if kafka.name != "tansu":  # default settings: idempotent, acks=all, InitProducerId used
            assert producer.config["enable_idempotence"] is True
            assert producer.config["acks"] in ("all", -1)
            assert producer._transaction_manager is not None
        futures = [
            producer.send(topic, **send_kwargs(r, None if partition_of is None else partition_of(i)))
            for i, r in enumerate(records)
        ]
        producer.flush(30)
        out = []
        for f in futures:
            md = f.get(timeout=10)
            out.append((md.partition, md.offset))
        if kafka.name != "tansu":
            assert producer._transaction_manager.producer_id_and_epoch.producer_id >= 0
        return out
    finally:
        producer.close(timeout=5)


def open_consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, **ASSIGNED_CONSUMER)


def consume(
    bootstrap: str, topic: str, partitions: int, count: int, *, start: dict[int, int] | None = None
) -> list[Consumed]:
    c = open_consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            if start and tp.partition in start:
                c.seek(tp, start[tp.partition])
            else:
                c.seek_to_beginning(tp)
        got = Collector(count)
        while got.running():
            for tp, msgs in c.poll(timeout_ms=100, max_records=2000).items():
                for m in msgs:
                    got.out.append(consumed_of(tp.partition, m))
        return got.result()
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_keyed_records_with_headers(kafka: Target, codec: str) -> None:
    topic = unique_topic(f"kp-{codec}")
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    records = make_records(2000, tag=f"kp-{codec}")
    reports = produce(kafka, topic, records, compression_type=None if codec == "none" else codec)
    got = consume(kafka.bootstrap_servers, topic, PARTITIONS, len(records))
    assert_exactly(
        records, got, partitions=PARTITIONS, partition_of=murmur2_partition, reports=reports
    )


def check_list_offsets(bootstrap: str, topic: str, by: dict[int, list[Rec]]) -> None:
    c = open_consumer(bootstrap)
    try:
        tps = {p: TopicPartition(topic, p) for p in by}
        assert c.beginning_offsets(list(tps.values())) == {tps[p]: 0 for p in by}
        assert c.end_offsets(list(tps.values())) == {tps[p]: len(r) for p, r in by.items()}
        for p, recs in by.items():
            for k in (0, 1, len(recs) // 2, len(recs) - 1):
                for ts in (recs[k].timestamp, recs[k].timestamp - 1):
                    found = c.offsets_for_times({tps[p]: ts})[tps[p]]
                    assert found is not None, (p, k, ts)
                    assert (found.offset, found.timestamp) == (k, recs[k].timestamp), (p, k, ts)
            assert c.offsets_for_times({tps[p]: recs[-1].timestamp + 1})[tps[p]] is None
    finally:
        c.close()


def test_list_offsets_earliest_latest_by_timestamp(kafka: Target) -> None:
    kafka.require("latest_offset")
    topic = unique_topic("kp-offsets")
    create_topic(kafka.bootstrap_servers, topic, 3)
    records = make_records(600, tag="kp-offsets")
    reports = produce(kafka, topic, records, partition_of=lambda i: i % 3)
    assert reports == [(i % 3, i // 3) for i in range(len(records))]
    check_list_offsets(kafka.bootstrap_servers, topic, by_partition(records, 3))


def test_restart_keeps_everything(kafka: Target) -> None:
    kafka.require("restart")
    topic = unique_topic("kp-restart")
    create_topic(kafka.bootstrap_servers, topic, 3)
    records = make_records(1500, tag="kp-restart")
    produce(kafka, topic, records, partition_of=lambda i: i % 3, compression_type="gzip")
    kafka.restart()
    got = consume(kafka.bootstrap_servers, topic, 3, len(records))
    assert_exactly(records, got, partitions=3, placement=[i % 3 for i in range(len(records))])
    by = by_partition(records, 3)
    check_list_offsets(kafka.bootstrap_servers, topic, by)
    # A new idempotent producer after the restart appends after the old records.
    more = make_records(30, tag="kp-after", base_timestamp=records[-1].timestamp + 10)
    reports = produce(kafka, topic, more, partition_of=lambda i: i % 3)
    assert reports == [(i % 3, len(by[i % 3]) + i // 3) for i in range(len(more))]


def test_message_too_large_then_still_usable(kafka: Target) -> None:
    """The broker refuses a 1.1 MB record with MESSAGE_TOO_LARGE and keeps the partition clean.

    kafka-python 3.0's idempotent producer classifies a non-retriable batch error as fatal
    (TransactionManager.classify_batch_error -> ERROR_CLASS_FATAL, as the Java client does for a
    non-transactional producer): that producer object refuses further sends whatever the broker.
    "The client stays usable" is therefore checked with a fresh default producer and a consumer on
    the same partition, which must start at offset 0.
    """
    kafka.require("message_max_bytes")
    topic = unique_topic("kp-large")
    create_topic(kafka.bootstrap_servers, topic, 1)
    # The client's own limit is raised so that the broker (message.max.bytes = 1048588) decides.
    producer = KafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers,
        max_request_size=5_000_000,
        **producer_config(kafka),
    )
    try:
        big = producer.send(topic, key=b"big", value=os.urandom(1_100_000), partition=0)
        with pytest.raises(MessageSizeTooLargeError) as info:
            big.get(timeout=20)
        assert "1048588" in str(info.value) or "too large" in str(info.value).lower(), info.value
    finally:
        producer.close(timeout=5)
    small = make_records(20, tag="kp-small")
    reports = produce(kafka, topic, small, partition_of=lambda i: 0)
    assert reports == [(0, i) for i in range(20)]
    got = consume(kafka.bootstrap_servers, topic, 1, len(small))
    assert_exactly(small, got, partitions=1, placement=[0] * len(small))
