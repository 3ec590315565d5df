"""confluent-kafka (librdkafka 2.x) against a real broker process."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.testing.helpers import create_topic

from .conftest import Target
from .support import (
    CODECS,
    Collector,
    Consumed,
    Rec,
    assert_exactly,
    by_partition,
    librdkafka_partition,
    make_records,
    unique_topic,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

PARTITIONS = 4


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Rec],
    *,
    partition_of: Any = None,
    **config: Any,
) -> list[tuple[int, int]]:
    """Produce `records` (keyed; explicit partition if `partition_of(i)` is given), flush, and
    return the (partition, offset) of each from the delivery reports. Fails on any delivery error."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    reports: list[Any] = [None] * len(records)

    def on_delivery(i: int) -> Any:
        def cb(err: KafkaError | None, msg: Any) -> None:
            reports[i] = err if err is not None else (msg.partition(), msg.offset())

        return cb

    for i, r in enumerate(records):
        kwargs: dict[str, Any] = {}
        if partition_of is not None:
            kwargs["partition"] = partition_of(i)
        while True:
            try:
                producer.produce(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    timestamp=r.timestamp,
                    on_delivery=on_delivery(i),
                    **kwargs,
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0, "undelivered records after 30 s"
    errors = [(i, e) for i, e in enumerate(reports) if not isinstance(e, tuple)]
    assert not errors, f"delivery errors: {errors[:3]}"
    return reports


def consumer(bootstrap: str, **config: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("interop-ck"),
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            **config,
        }
    )


def consume(
    bootstrap: str, topic: str, partitions: int, count: int, *, start: dict[int, int] | None = None
) -> list[Consumed]:
    """Read `count` records from the given start offsets (default: beginning) with assign(), then
    poll a little longer to catch records that should not be there."""
    c = consumer(bootstrap)
    try:
        c.assign(
            [
                TopicPartition(topic, p, (start or {}).get(p, OFFSET_BEGINNING))
                for p in range(partitions)
            ]
        )
        got = Collector(count)
        while got.running():
            for m in c.consume(num_messages=1000, timeout=0.1):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consume error: {err}")
                ts_type, ts = m.timestamp()
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None
                headers = m.headers() or []
                assert isinstance(headers, list)
                got.out.append(
                    Consumed(
                        partition,
                        offset,
                        m.key(),
                        m.value(),
                        tuple((k, v) for k, v in headers),  # type: ignore[misc]
                        ts,
                        ts_type - 1,  # TIMESTAMP_CREATE_TIME == 1
                    )
                )
        return got.result()
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_keyed_records_with_headers(kafka: Target, codec: str) -> None:
    topic = unique_topic(f"ck-{codec}")
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    records = make_records(2000, tag=f"ck-{codec}")
    reports = produce(kafka.bootstrap_servers, topic, records, **{"compression.type": codec})
    for r, (p, _off) in zip(records, reports, strict=True):
        assert r.key is not None
        assert p == librdkafka_partition(r.key, PARTITIONS)
    got = consume(kafka.bootstrap_servers, topic, PARTITIONS, len(records))
    assert_exactly(
        records, got, partitions=PARTITIONS, partition_of=librdkafka_partition, reports=reports
    )


def check_list_offsets(
    bootstrap: str, topic: str, by: dict[int, list[Rec]], *, max_ts: bool
) -> None:
    """Earliest, latest, by timestamp (and max timestamp) through both the consumer and admin APIs,
    against records produced with explicit partitions and strictly increasing timestamps."""
    c = consumer(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for p, recs in by.items():
            tp = TopicPartition(topic, p)
            assert c.get_watermark_offsets(tp, timeout=10, cached=False) == (0, len(recs))
            probes: list[tuple[int, int]] = [(0, 0), (recs[0].timestamp, 0)]
            for k in (1, len(recs) // 2, len(recs) - 1):
                probes.append((recs[k].timestamp, k))
                probes.append((recs[k].timestamp - 1, k))  # between k-1 and k: first >= is k
            probes.append((recs[-1].timestamp + 1, -1))  # past the end: no offset
            # One partition appears once per request (Kafka answers INVALID_REQUEST to duplicates).
            found = [
                c.offsets_for_times([TopicPartition(topic, p, ts)], timeout=10)[0]
                for ts, _ in probes
            ]
            assert [f.offset for f in found] == [k for _, k in probes], f"partition {p}"
            assert all(f.error is None for f in found), found

        specs: dict[TopicPartition, Any] = {}
        for p in by:
            specs[TopicPartition(topic, p, 0)] = OffsetSpec.earliest()
        result = {tp.partition: f.result(10) for tp, f in admin.list_offsets(specs).items()}
        assert {p: r.offset for p, r in result.items()} == dict.fromkeys(by, 0)

        specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in by}
        result = {tp.partition: f.result(10) for tp, f in admin.list_offsets(specs).items()}
        assert {p: r.offset for p, r in result.items()} == {p: len(r) for p, r in by.items()}

        k = 7
        specs = {TopicPartition(topic, p): OffsetSpec.for_timestamp(by[p][k].timestamp) for p in by}
        result = {tp.partition: f.result(10) for tp, f in admin.list_offsets(specs).items()}
        assert {p: (r.offset, r.timestamp) for p, r in result.items()} == {
            p: (k, by[p][k].timestamp) for p in by
        }
        if max_ts:
            specs = {TopicPartition(topic, p): OffsetSpec.max_timestamp() for p in by}
            result = {tp.partition: f.result(10) for tp, f in admin.list_offsets(specs).items()}
            assert {p: (r.offset, r.timestamp) for p, r in result.items()} == {
                p: (len(r) - 1, r[-1].timestamp) for p, r in by.items()
            }
    finally:
        c.close()


def test_list_offsets_earliest_latest_by_timestamp(kafka: Target) -> None:
    kafka.require("latest_offset")
    topic = unique_topic("ck-offsets")
    create_topic(kafka.bootstrap_servers, topic, 3)
    records = make_records(900, tag="ck-offsets")
    reports = produce(kafka.bootstrap_servers, topic, records, partition_of=lambda i: i % 3)
    by = by_partition(records, 3)
    assert reports == [(i % 3, i // 3) for i in range(len(records))]
    check_list_offsets(kafka.bootstrap_servers, topic, by, max_ts=kafka.name != "tansu")


def test_restart_keeps_everything(kafka: Target) -> None:
    kafka.require("restart")
    topic = unique_topic("ck-restart")
    create_topic(kafka.bootstrap_servers, topic, 3)
    records = make_records(1500, tag="ck-restart")
    produce(
        kafka.bootstrap_servers,
        topic,
        records,
        partition_of=lambda i: i % 3,
        **{"compression.type": "lz4"},
    )
    kafka.restart()
    by = by_partition(records, 3)
    got = consume(kafka.bootstrap_servers, topic, 3, len(records))
    assert_exactly(records, got, partitions=3, placement=[i % 3 for i in range(len(records))])
    check_list_offsets(kafka.bootstrap_servers, topic, by, max_ts=True)
    # Appends continue after the last offset written before the restart.
    more = make_records(30, tag="ck-after", base_timestamp=records[-1].timestamp + 10)
    reports = produce(kafka.bootstrap_servers, topic, more, partition_of=lambda i: i % 3)
    assert reports == [(i % 3, len(by[i % 3]) + i // 3) for i in range(len(more))]
    got = consume(
        kafka.bootstrap_servers, topic, 3, len(more), start={p: len(r) for p, r in by.items()}
    )
    assert_exactly(
        more,
        got,
        partitions=3,
        placement=[i % 3 for i in range(len(more))],
        start_offsets={p: len(r) for p, r in by.items()},
    )


def test_message_too_large_then_still_usable(kafka: Target) -> None:
    kafka.require("message_max_bytes")
    topic = unique_topic("ck-large")
    create_topic(kafka.bootstrap_servers, topic, 1)
    # The client's own limit is raised so that the broker (message.max.bytes = 1048588) decides.
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "linger.ms": 0,
            "message.max.bytes": 5_000_000,
            "batch.size": 5_000_000,
        }
    )
    reports: list[Any] = []
    producer.produce(
        topic,
        key=b"big",
        value=os.urandom(1_100_000),
        partition=0,
        on_delivery=lambda err, msg: reports.append(err or msg.offset()),
    )
    assert producer.flush(20) == 0
    assert len(reports) == 1 and isinstance(reports[0], KafkaError), reports
    assert reports[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, reports[0]
    # Same producer, same partition: small records still go through, from offset 0.
    small = make_records(20, tag="ck-small")
    for r in small:
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            timestamp=r.timestamp,
            partition=0,
            on_delivery=lambda err, msg: reports.append(err or msg.offset()),
        )
    assert producer.flush(20) == 0
    assert reports[1:] == list(range(20))
    got = consume(kafka.bootstrap_servers, topic, 1, len(small))
    assert_exactly(small, got, partitions=1, placement=[0] * len(small))
