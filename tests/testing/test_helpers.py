"""Wire helpers against an embedded odradek broker."""

from __future__ import annotations

import pytest

pytest.importorskip("odradek.broker.server")

from odradek.testing import (
    EmbeddedBroker,
    KafkaProtocolError,
    ResourceSnapshot,
    api_versions,
    create_topic,
    delete_topic,
    list_topics,
    read_all,
)
from odradek.testing.helpers import bootstrap_of

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


def test_bootstrap_of(broker):
    assert bootstrap_of(broker) == broker.bootstrap_servers
    assert bootstrap_of("h:1") == "h:1"
    with pytest.raises(TypeError):
        bootstrap_of(42)  # type: ignore[arg-type]


def test_api_versions(broker):
    versions = api_versions(broker.bootstrap_servers)
    assert versions[18][0] == 0
    assert 0 in versions and 1 in versions and 3 in versions


def test_create_list_delete(broker):
    create_topic(broker, "h-a", partitions=3, configs={"retention.ms": 60000})
    assert list_topics(broker)["h-a"] == 3
    with pytest.raises(KafkaProtocolError) as info:
        create_topic(broker, "h-a")
    assert info.value.error_code == 36
    create_topic(broker, "h-a", exist_ok=True)
    delete_topic(broker, "h-a")
    assert "h-a" not in list_topics(broker)
    delete_topic(broker, "h-a", missing_ok=True)
    with pytest.raises(KafkaProtocolError):
        delete_topic(broker, "h-a")


def test_read_all_unknown_topic(broker):
    with pytest.raises(KafkaProtocolError) as info:
        read_all(broker, "does-not-exist")
    assert info.value.error_code == 3


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_read_all_every_codec_and_partition(broker, codec):
    from confluent_kafka import Producer

    topic = f"h-codec-{codec}"
    create_topic(broker, topic, partitions=3)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "linger.ms": 5}
    )
    sent = {}
    for i in range(60):
        value = f"{codec}-{i}".encode() * (1 + i % 4)
        producer.produce(topic, value=value, key=str(i).encode(), headers=[("n", str(i).encode())])
        sent[str(i).encode()] = value
    assert producer.flush(10) == 0
    records = read_all(broker, topic)
    assert len(records) == 60
    assert {r.key: r.value for r in records} == sent
    assert all(r.headers == (("n", r.key),) for r in records)
    for p in range(3):
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == list(range(len(offsets)))
    assert [r.partition for r in records] == sorted(r.partition for r in records)


def test_read_all_many_batches_beyond_one_fetch(broker):
    from confluent_kafka import Producer

    create_topic(broker, "h-big")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(300):
        producer.produce("h-big", value=bytes([i % 256]) * 10_000)
        if i % 50 == 0:
            producer.flush(10)
    producer.flush(10)
    records = read_all(broker, "h-big", max_bytes=256 * 1024)
    assert [r.offset for r in records] == list(range(300))


def test_resource_snapshot_sees_a_listener():
    import socket

    before = ResourceSnapshot.take()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    during = ResourceSnapshot.take()
    assert during.listening_sockets == before.listening_sockets + 1
    assert during.fds == before.fds + 1
    s.close()
    assert not before.diff(ResourceSnapshot.take())
