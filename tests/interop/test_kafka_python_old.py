"""kafka-python 3.0 forced to old protocol versions with ``api_version=(0, 9)`` and ``(0, 10)``.

Produce (magic 0 / magic 1 message sets, plain and gzip-wrapped), consume in a group, commit;
the broker's request counts show the old versions were the ones used, and a modern client
reads back what the old one wrote (the message sets were stored as v2 batches) and the offsets
it committed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from .old_clients import ConsoleBroker, running_console_broker, wait_for_counts

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

N = 60

OLD_VERSIONS = {
    (0, 9): {("Produce", 1), ("Fetch", 1), ("ListOffsets", 0), ("OffsetCommit", 2)},
    (0, 10): {("Produce", 2), ("Fetch", 2), ("ListOffsets", 0), ("OffsetCommit", 2)},
}
"""Requests each setting must have sent (the old ones among them)."""


@pytest.fixture(scope="module")
def kafka() -> Iterator[ConsoleBroker]:
    yield from running_console_broker()


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("api_version", [(0, 9), (0, 10)], ids=["0.9", "0.10"])
def test_old_kafka_python_produces_consumes_commits(
    kafka: ConsoleBroker, api_version: tuple[int, int], compression: str | None
) -> None:
    bootstrap = kafka.bootstrap_servers
    topic = f"old-kp-{api_version[1]}-{compression or 'none'}"
    group = f"group-{topic}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        compression_type=compression,
        enable_idempotence=False,  # needs 0.11
        acks=1,
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
            for i in range(N)
        ]
        producer.flush(30)
        sent = [f.get(timeout=10) for f in futures]
    finally:
        producer.close()
    assert sorted((m.partition, m.offset) for m in sent) == sorted(
        (p, o) for p in (0, 1) for o in range(N // 2)
    )

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        api_version=api_version,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    try:
        got = []
        for message in consumer:
            got.append(message)
            if len(got) == N:
                break
        consumer.commit()
    finally:
        consumer.close()
    assert sorted((m.key, m.value) for m in got) == sorted(
        (b"k%d" % i, b"v%d" % i) for i in range(N)
    )
    if api_version == (0, 10):  # magic 1 carries the producer's CreateTime
        assert all(m.timestamp > 0 and m.timestamp_type == 0 for m in got)
    else:  # magic 0 has no timestamp
        assert all(m.timestamp in (None, -1) for m in got)

    # a modern client sees the records as v2 batches and the offsets the old one committed
    modern = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = {p: modern.committed(TopicPartition(topic, p)) for p in (0, 1)}
        modern.assign([TopicPartition(topic, 0)])
        modern.seek_to_beginning()
        records = []
        for _ in range(20):
            for batch in modern.poll(timeout_ms=1000).values():
                records.extend(batch)
            if len(records) >= N // 2:
                break
    finally:
        modern.close()
    assert committed == {0: N // 2, 1: N // 2}
    assert [(r.offset, r.value) for r in records] == [(i, b"v%d" % (2 * i)) for i in range(N // 2)]

    wanted = OLD_VERSIONS[api_version]
    wait_for_counts(kafka, lambda counts: all(counts.get(w, 0) > 0 for w in wanted))
