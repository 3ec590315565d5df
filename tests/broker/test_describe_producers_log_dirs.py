"""DescribeProducers (61) and DescribeLogDirs (35) through kafka-python's admin client
(``describe_producers``, ``describe_log_dirs``) against a real `odradek broker` process, with
an idempotent and a transactional confluent-kafka producer writing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import UnknownTopicOrPartitionError
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from broker.test_legacy_wire import OldWire
from broker.wire import Wire, req
from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(90)

SETTINGS = {"num.partitions": 2, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(SETTINGS) as b:
        yield b


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    yield client
    client.close()


def _produce_idempotent(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, b"v%d" % i, b"k", partition=0)
    assert p.flush(10) == 0


def test_describe_producers_shows_idempotent_and_transactional_producers(
    broker: BrokerProcess, admin: KafkaAdminClient
) -> None:
    topic = "dp"
    bootstrap = broker.bootstrap_servers
    _produce_idempotent(bootstrap, topic, 3)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dp-t", "linger.ms": 0})
    txn.init_transactions(15)
    txn.begin_transaction()
    txn.produce(topic, b"a", b"k", partition=0)
    txn.produce(topic, b"b", b"k", partition=0)
    assert txn.flush(10) == 0  # open: written, not committed
    try:
        got = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        producers = got[TopicPartition(topic, 0)].active_producers
        assert got[TopicPartition(topic, 1)].active_producers == []
        assert len(producers) == 2
        idempotent, transactional = sorted(
            producers, key=lambda p: p.current_transaction_start_offset
        )
        assert idempotent.current_transaction_start_offset == -1
        assert idempotent.last_sequence == 2 and idempotent.producer_epoch == 0
        # the open transaction started at offset 3, right after the idempotent records
        assert transactional.current_transaction_start_offset == 3
        assert transactional.last_sequence == 1
        assert transactional.producer_id != idempotent.producer_id
        assert all(p.last_timestamp == -1 for p in producers)
        txn.commit_transaction(15)
        after = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
        committed = [
            p for p in after.active_producers if p.producer_id == transactional.producer_id
        ]
        assert committed[0].current_transaction_start_offset == -1
        assert committed[0].coordinator_epoch >= 0  # from its COMMIT marker
    finally:
        if txn is not None:
            txn.flush(1)


def test_describe_producers_errors(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_producers([TopicPartition("dp-missing", 0)], broker_id=0)


def test_describe_log_dirs(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = "dld"
    _produce_idempotent(broker.bootstrap_servers, topic, 5)
    deadline = time.monotonic() + 10
    result: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        result = admin.describe_log_dirs()
        if result and any(t["name"] == topic for d in result[0]["log_dirs"] for t in d["topics"]):
            break
    (one,) = result
    (log_dir,) = one["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == str(broker.data_dir.resolve())
    topics = {t["name"]: t for t in log_dir["topics"]}
    parts = {p["partition_index"]: p for p in topics[topic]["partitions"]}
    assert set(parts) == {0, 1}
    assert parts[0]["partition_size"] > 5 * 10 and parts[1]["partition_size"] == 0
    assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in parts.values())
    # only the partitions asked for
    only = admin.describe_log_dirs({topic: [1]})[0]["log_dirs"][0]["topics"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only] == [
        (topic, [1])
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_describe_log_dirs_every_version(broker: BrokerProcess, version: int) -> None:
    """Each version Kafka 3.9 serves: v0 encoded and decoded by kafka-python's message classes
    (served through the legacy codec by v1's handler), v1-v4 by kio's."""
    _produce_idempotent(broker.bootstrap_servers, "dldv", 2)
    if version == 0:
        old = OldWire(broker.bootstrap_servers)
        try:
            values = {"topics": [{"topic": "dldv", "partitions": [0]}]}
            r = old.call(DescribeLogDirsRequest, DescribeLogDirsResponse, 0, values)
        finally:
            old.close()
        (result,) = r["results"]
        (topic,) = result["topics"]
        (p,) = topic["partitions"]
        got = (result["error_code"], result["log_dir"], topic["name"], p["partition_index"])
        size = p["partition_size"]
    else:
        with Wire(broker.bootstrap_servers) as w:
            topic_request = req(
                35, version, "DescribableLogDirTopic", topic="dldv", partitions=(0,)
            )
            response = w.call(req(35, version, topics=(topic_request,)))
        (res,) = response.results
        (t,) = res.topics
        (part,) = t.partitions
        got = (int(res.error_code), res.log_dir, t.name, int(part.partition_index))
        size = int(part.partition_size)
        if version >= 4:
            assert res.total_bytes > 0 and 0 <= res.usable_bytes <= res.total_bytes
    assert got == (0, str(broker.data_dir.resolve()), "dldv", 0)
    assert size > 0
