"""Admin completeness through confluent-kafka's AdminClient (librdkafka) against a real broker
process: delete_records, alter_configs / incremental_alter_configs on BROKER (by id: librdkafka
cannot name the cluster-wide default "") and GROUP resources, describe_configs with sources and synonyms, describe_topics / describe_cluster
with include_authorized_operations, the deprecated topic configs librdkafka's 0092 sets, and
dynamic configs plus deleted records surviving a broker restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    KafkaError,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

BROKER_SETTINGS = {
    "log.retention.hours": 100,
    "group.coordinator.rebalance.protocols": "classic,consumer",  # group configs, as Kafka 4.0
}
TIMEOUT = 15


@pytest.fixture
def admin(kafka: Any) -> Iterator[AdminClient]:
    kafka.require("admin-completeness")
    client = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    yield client
    # leave no dynamic broker config behind for the next test (librdkafka cannot name the
    # cluster-wide default resource "": tests/broker/test_dynamic_broker_configs.py covers it)
    resource = ConfigResource(ResourceType.BROKER, "0", set_config={})
    client.alter_configs([resource])[resource].result(TIMEOUT)


def _create(admin: AdminClient, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    topic = unique_topic("adm")
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    fs[topic].result(TIMEOUT)
    return topic


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=0)
        p.flush(TIMEOUT)  # one batch per record
    assert p.flush(TIMEOUT) == 0


def _describe(admin: AdminClient, rtype: ResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(rtype, name)
    result = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return dict(result)


def _offsets(admin: AdminClient, topic: str) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(TIMEOUT).offset
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(TIMEOUT).offset
    return earliest, latest


def test_delete_records(kafka: Any, admin: AdminClient) -> None:
    topic = _create(admin, config={"segment.bytes": "200"})
    _produce(kafka.bootstrap_servers, topic, 10)
    tp = TopicPartition(topic, 0, 6)
    deleted = admin.delete_records([tp])[tp].result(TIMEOUT)
    assert deleted.low_watermark == 6
    assert _offsets(admin, topic) == (6, 10)
    # above the high watermark: OFFSET_OUT_OF_RANGE, as Kafka
    too_far = TopicPartition(topic, 0, 11)
    with pytest.raises(Exception) as info:
        admin.delete_records([too_far])[too_far].result(TIMEOUT)
    assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    # OFFSET_END (-1): up to the high watermark
    end = TopicPartition(topic, 0, -1)
    assert admin.delete_records([end])[end].result(TIMEOUT).low_watermark == 10


def test_topic_configs_kafka_accepts(admin: AdminClient) -> None:
    topic = _create(admin, config={"message.downconversion.enable": "true"})
    # what librdkafka's 0092_mixed_msgver does
    resource = ConfigResource(
        ResourceType.TOPIC, topic, set_config={"message.format.version": "0.10.0.0"}
    )
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = _describe(admin, ResourceType.TOPIC, topic)
    assert configs["message.format.version"].value == "0.10.0.0"
    assert configs["message.format.version"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_broker_configs_alter_and_describe(admin: AdminClient) -> None:
    broker = ConfigResource(
        ResourceType.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    admin.alter_configs([broker])[broker].result(TIMEOUT)
    ops = [
        ConfigEntry("background.threads", "9", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(
            "log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
        ),
    ]
    res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=ops)
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    configs = _describe(admin, ResourceType.BROKER, "0")
    assert configs["background.threads"].value == "9"
    assert configs["background.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs["log.cleanup.policy"].value == "delete,compact"
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "58000"
    hours = configs["log.retention.hours"]
    assert hours.source == ConfigSource.STATIC_BROKER_CONFIG.value and hours.is_read_only
    assert "log.retention.hours" in hours.synonyms  # (librdkafka keys synonyms by name)
    retention = configs["log.retention.ms"]
    assert retention.value is None and not retention.is_read_only
    assert configs["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    # a topic without override follows the per-broker dynamic default
    per_broker = ConfigResource(
        ResourceType.BROKER, "0", set_config={"log.retention.ms": "86400000"}
    )
    admin.alter_configs([per_broker])[per_broker].result(TIMEOUT)
    topic = _create(admin)
    retention = _describe(admin, ResourceType.TOPIC, topic)["retention.ms"]
    assert retention.value == "86400000"
    assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    # a read-only key is refused
    static = ConfigResource(ResourceType.BROKER, "0", set_config={"num.partitions": "4"})
    with pytest.raises(Exception) as info:
        admin.alter_configs([static])[static].result(TIMEOUT)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_group_configs(admin: AdminClient) -> None:
    group = unique_topic("grp")
    ops = [
        ConfigEntry(
            "consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET
        )
    ]
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=ops)
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    configs = _describe(admin, ResourceType.GROUP, group)
    assert configs["consumer.session.timeout.ms"].value == "50000"
    assert configs["consumer.heartbeat.interval.ms"].value == "5000"
    bad = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "consumer.session.timeout.ms", "1000", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    with pytest.raises(Exception) as info:
        admin.incremental_alter_configs([bad])[bad].result(TIMEOUT)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    delete = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "consumer.session.timeout.ms", "", incremental_operation=AlterConfigOpType.DELETE
            )
        ],
    )
    admin.incremental_alter_configs([delete])[delete].result(TIMEOUT)
    assert _describe(admin, ResourceType.GROUP, group)["consumer.session.timeout.ms"].value == (
        "45000"
    )


def test_authorized_operations(admin: AdminClient) -> None:
    topic = _create(admin)
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(TIMEOUT)
    assert set(described.authorized_operations) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    plain = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    assert not plain.authorized_operations
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    }
    assert not admin.describe_cluster().result(TIMEOUT).authorized_operations


def test_dynamic_configs_and_deleted_records_survive_restart(
    kafka: Any, admin: AdminClient
) -> None:
    kafka.require("restart")
    topic = _create(admin)
    _produce(kafka.bootstrap_servers, topic, 4)
    tp = TopicPartition(topic, 0, 3)
    assert admin.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 3
    broker = ConfigResource(ResourceType.BROKER, "0", set_config={"log.retention.ms": "5000000"})
    admin.alter_configs([broker])[broker].result(TIMEOUT)
    kafka.restart()
    after = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    deadline = time.monotonic() + TIMEOUT
    while True:  # the client reconnects on its own schedule
        try:
            entry = _describe(after, ResourceType.BROKER, "0")["log.retention.ms"]
            break
        except Exception:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    assert (entry.value, entry.source) == ("5000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert _offsets(after, topic) == (3, 4)
