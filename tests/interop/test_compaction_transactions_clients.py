"""Third-party clients on a compacted topic holding transactions, cleaned by a real `odradek
broker` process: confluent-kafka's transactional producer commits and aborts, the cleaner
removes the aborted records and records delete horizons (KIP-534) in the batches that keep a
tombstone or a marker, and confluent-kafka, kafka-python and odradek.client consumers
(read_committed and read_uncommitted) read the latest value per key with the tombstone's own
timestamp."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.records import iter_batches
from odradek.testing.process import BrokerProcess

from .support import wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

SETTINGS = {
    "log.cleaner.backoff.ms": "50",
    "num.partitions": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
}
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "600000",  # tombstones and markers stay, with their horizon
}
T = 1_600_000_000_000  # the records' own timestamps (CreateTime), far from the horizon
FILLERS = 40


def _read_confluent(bootstrap: str, topic: str, isolation: str) -> list[tuple[Any, ...]]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    got: list[tuple[Any, ...]] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(error)
            got.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        c.close()
    return got


def _read_kafka_python(bootstrap: str, topic: str, isolation: str) -> list[tuple[Any, ...]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level=isolation,
        consumer_timeout_ms=3000,
    )
    got: list[tuple[Any, ...]] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and consumer.position(tp) < end:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key, r.value, r.timestamp) for r in records)
    finally:
        consumer.close()
    return got


def _read_odradek(bootstrap: str, topic: str, isolation: str) -> list[tuple[Any, ...]]:
    from odradek.client import Consumer, TopicPartition

    got: list[tuple[Any, ...]] = []
    config = {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,
    }
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        deadline = time.monotonic() + 20
        idle = 0
        while time.monotonic() < deadline and idle < 4:
            batch = consumer.poll(0.5)
            idle = 0 if batch else idle + 1
            got.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)
    return got


def _flagged_batches(data_dir: Path, topic: str) -> list[tuple[int, int, bool]]:
    """(base offset, delete horizon, is control) of every batch with a delete horizon on disk."""
    out = []
    for path in sorted(data_dir.rglob(f"{topic}-0/*.log")):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        for b in iter_batches(data):
            if b.delete_horizon_ms is not None:
                out.append((b.base_offset, b.delete_horizon_ms, b.is_control))
    return out


def test_clients_read_a_cleaned_topic_with_transactions_and_tombstones() -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"ct-{uuid.uuid4().hex[:8]}"
    with BrokerProcess(SETTINGS) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=TOPIC_CONFIG)])[topic].result(15)
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ct", "linger.ms": 0})
        p.init_transactions(15)
        p.begin_transaction()
        p.produce(topic, b"v1", b"k1", timestamp=T)
        p.produce(topic, b"v2", b"k2", timestamp=T)
        p.commit_transaction(15)
        p.begin_transaction()
        p.produce(topic, b"aborted", b"k1", timestamp=T + 1)
        p.produce(topic, b"aborted", b"k3", timestamp=T + 1)
        assert p.flush(10) == 0  # written, then aborted (unsent records would just be purged)
        p.abort_transaction(15)
        p.begin_transaction()
        p.produce(topic, None, b"k2", timestamp=T + 2)  # tombstone
        p.commit_transaction(15)
        # later non-transactional writes close the segments holding the transactions
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

        def fill() -> None:
            for i in range(FILLERS):
                plain.produce(topic, b"f" * 40, b"f%d" % i, timestamp=T + 10 + i)
                plain.flush(10)
            assert plain.flush(10) == 0

        fill()

        def cleaned() -> bool:
            got = _read_confluent(bootstrap, topic, "read_uncommitted")
            return all(v != b"aborted" for _, _, v, _ in got)

        wait_for(cleaned, 30, "the cleaner to remove the aborted records", interval=0.2)

        # the tombstone's batch has its horizon from the first cleaning that kept it; the
        # abort marker gets one at a cleaning after the one that removed its transaction's
        # records (later writes make the cleaner run again)
        def both_flagged() -> list[tuple[int, int, bool]] | None:
            found = _flagged_batches(broker.data_dir, topic)
            return found if sorted({c for _, _, c in found}) == [False, True] else None

        for _ in range(5):  # bounded: a cleaning runs within 50 ms of dirty data
            try:
                flagged = wait_for(both_flagged, 3, "delete horizons", interval=0.1)
                break
            except TimeoutError:
                fill()
        else:
            pytest.fail(
                f"no delete horizon on the abort marker: {_flagged_batches(broker.data_dir, topic)}"
            )
        now_ms = int(time.time() * 1000)
        assert all(now_ms < h <= now_ms + 600_000 for _, h, _ in flagged), flagged

        expected = {b"k1": (b"v1", T), b"k2": (None, T + 2)}
        expected.update({b"f%d" % i: (b"f" * 40, T + 10 + i) for i in range(FILLERS)})
        for read in (_read_confluent, _read_kafka_python, _read_odradek):
            for isolation in ("read_committed", "read_uncommitted"):
                got = read(bootstrap, topic, isolation)
                offsets = [o for o, *_ in got]
                assert offsets == sorted(set(offsets)), (read.__name__, isolation)
                latest = {k: (v, ts) for _, k, v, ts in got}
                assert latest == expected, (read.__name__, isolation, got)
