"""Dynamic broker configs in a cluster: stored in ZooKeeper with Kafka's layout, applied on every
broker (the cluster default) or on one (per broker id), kept across a restart. Three real
broker processes on a real ZooKeeper, altered and described with confluent-kafka's AdminClient
(librdkafka routes a BROKER resource named by an id to that broker; it cannot name the cluster
default ``""``, which is altered over the raw protocol, sent to one chosen broker), znodes read
with kazoo."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kazoo.client import KazooClient

from broker.wire import Wire, req

from .harness import Cluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

KEY = "log.retention.ms"
"""Applied live to the logs without a topic override; the values used are long (harmless to the
other tests sharing the cluster)."""
TIMEOUT = 15.0


def _alter(admin: AdminClient, name: str, op: AlterConfigOpType, value: str | None) -> None:
    res = ConfigResource(
        ResourceType.BROKER,
        name,
        incremental_configs=[ConfigEntry(KEY, value, incremental_operation=op)],
    )
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)


def _alter_default(cluster: Cluster, broker_id: int, value: str | None, key: str = KEY) -> None:
    """IncrementalAlterConfigs (v1) of the cluster default, sent to broker ``broker_id``."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = req(44, 1, "AlterableConfig", name=key, config_operation=op.value, value=value)
    res = req(
        44, 1, "AlterConfigsResource", resource_type=ResourceType.BROKER.value, resource_name="",
        configs=(entry,),
    )  # fmt: skip
    with Wire(cluster.brokers[broker_id].bootstrap_servers) as wire:
        r = wire.call(req(44, 1, resources=(res,), validate_only=False))
    assert (int(r.responses[0].error_code), r.responses[0].error_message) == (0, None)


def _described(admin: AdminClient, broker_id: int, key: str = KEY) -> tuple[str | None, int]:
    """(value, source) of ``key`` as broker ``broker_id`` describes itself."""
    res = ConfigResource(ResourceType.BROKER, str(broker_id))
    entry = admin.describe_configs([res])[res].result(TIMEOUT)[key]
    return entry.value, int(entry.source)


def _await(what: str, check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not so after {timeout} s: {what}")
        time.sleep(0.1)


def _await_described(admin: AdminClient, expected: dict[int, tuple[str | None, int]]) -> None:
    got: dict[int, tuple[str | None, int]] = {}

    def check() -> bool:
        got.update({b: _described(admin, b) for b in expected})
        return got == expected

    _await(f"{expected} described (last {got})", check)


@pytest.fixture
def admin(cluster3: Cluster) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    # leave no dynamic config behind for the next test (a new client: a broker restarted by
    # the test listens on another port)
    _alter_default(cluster3, 1, None)
    client = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for name in ("1", "2", "3"):
        _alter(client, name, AlterConfigOpType.DELETE, None)


@pytest.fixture
def zk(cluster3: Cluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster3.zookeeper.connect_string + cluster3.chroot)
    client.start(timeout=TIMEOUT)
    yield client
    client.stop()
    client.close()


def _znode(zk: KazooClient, path: str) -> object:
    return json.loads(zk.get(path)[0])


def _change_notifications(zk: KazooClient) -> list[object]:
    return [_znode(zk, f"/config/changes/{c}") for c in sorted(zk.get_children("/config/changes"))]


def test_default_and_per_broker_configs_through_zookeeper(
    cluster3: Cluster, admin: AdminClient, zk: KazooClient
) -> None:
    try:
        _scenario(cluster3, admin, zk)
    except BaseException:
        print(cluster3.logs(20000))
        raise


def _scenario(cluster3: Cluster, admin: AdminClient, zk: KazooClient) -> None:
    static = _described(admin, 1)
    assert static[1] != ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    per_broker = ConfigSource.DYNAMIC_BROKER_CONFIG.value

    # the cluster default, sent to broker 1: every broker applies it
    _alter_default(cluster3, 1, "604800111")
    assert _znode(zk, "/config/brokers/<default>") == {
        "version": 1,
        "config": {KEY: "604800111"},
    }
    assert _change_notifications(zk)[-1] == {"version": 2, "entity_path": "brokers/<default>"}
    _await_described(admin, {b: ("604800111", default) for b in (1, 2, 3)})

    # one broker's override: only there
    _alter(admin, "2", AlterConfigOpType.SET, "604800222")
    assert _znode(zk, "/config/brokers/2") == {"version": 1, "config": {KEY: "604800222"}}
    assert _change_notifications(zk)[-1] == {"version": 2, "entity_path": "brokers/2"}
    _await_described(
        admin, {1: ("604800111", default), 2: ("604800222", per_broker), 3: ("604800111", default)}
    )

    # deleting the override: broker 2 is back on the default (Kafka keeps the empty znode)
    _alter(admin, "2", AlterConfigOpType.DELETE, None)
    assert _znode(zk, "/config/brokers/2") == {"version": 1, "config": {}}
    _await_described(admin, {b: ("604800111", default) for b in (1, 2, 3)})

    # a change made while a broker is down reaches it when it starts again
    cluster3.brokers[3].stop()
    _alter_default(cluster3, 2, "604800333")
    cluster3.brokers[3].start()
    # every broker, broker 3 too, has the controller's view (broker 3 on its new port) before a
    # new client bootstraps: a broker that has had no UpdateMetadata yet lists no brokers, and a
    # librdkafka client whose first Metadata is answered so waits for its next refresh (minutes)
    # to learn any broker
    ports = {i: b.port for i, b in cluster3.brokers.items()}
    cluster3.wait_every_broker(lambda md: {b.node_id: b.port for b in md.brokers} == ports)
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})  # its new port
    _await_described(admin, {b: ("604800333", default) for b in (1, 2, 3)})

    # deleting the default: every broker is back on its static config
    _alter_default(cluster3, 3, None)
    assert _znode(zk, "/config/brokers/<default>") == {"version": 1, "config": {}}
    _await_described(admin, {b: static for b in (1, 2, 3)})


def _produce(cluster: Cluster, topic: str, value: bytes) -> KafkaError | None:
    """One record, acks=1, no retries: the delivery error (None when written)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1, "retries": 0})
    errors: list[KafkaError | None] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        errors.append(err)

    producer.produce(topic, value, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    return errors[0]


def test_a_default_set_through_one_broker_limits_produce_on_another(
    cluster3: Cluster, admin: AdminClient
) -> None:
    """message.max.bytes, the broker default of the topic's max.message.bytes, set through broker
    1 and enforced by broker 3 (the only replica of the topic) at once."""
    topic = f"dyn-mmb-{int(time.time() * 1000)}"
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[3]])])[
        topic
    ].result(TIMEOUT)
    try:
        cluster3.wait_metadata(
            lambda md: (p := cluster3.partitions(md, topic).get(0)) is not None and p.leader_id == 3
        )
        assert _produce(cluster3, topic, b"x" * 3000) is None
        _alter_default(cluster3, 1, "1000", key="message.max.bytes")
        default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        _await(
            "broker 3 has the new default",
            lambda: _described(admin, 3, "message.max.bytes") == ("1000", default),
        )
        err = _produce(cluster3, topic, b"x" * 3000)
        assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
        _alter_default(cluster3, 1, None, key="message.max.bytes")
        _await(
            "broker 3 dropped the default",
            lambda: _described(admin, 3, "message.max.bytes")[1] != default,
        )
        assert _produce(cluster3, topic, b"x" * 3000) is None
    finally:
        _alter_default(cluster3, 1, None, key="message.max.bytes")
        try:
            admin.delete_topics([topic])[topic].result(TIMEOUT)
        except KafkaException:
            pass
