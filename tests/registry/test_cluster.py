"""The registry on a three-broker cluster (ZooKeeper): one writer elected through the group
``schema-registry``, writes through any broker, reads from every broker; the writer killed, a
new one takes over with nothing lost and no id handed out twice."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from cluster.conftest import Cluster, running_zookeeper
from odradek.cluster.zookeeper import ZooKeeperServer

from .conftest import registry_url

pytestmark = pytest.mark.timeout(110)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "registry-zookeeper")


def _schema(name: str, *extra: str) -> Schema:
    fields = [{"name": "a", "type": "int"}] + [
        {"name": f, "type": "int", "default": 0} for f in extra
    ]
    return Schema(json.dumps({"type": "record", "name": name, "fields": fields}), "AVRO")


def _writer(cluster: Cluster, urls: dict[int, str], timeout: float = 30.0) -> int:
    """The broker whose registry holds ``_schemas-0`` in the group ``schema-registry``, as the
    group coordinator describes it once the group is stable with one member per running broker
    (bounded wait). The registries' "is the writer" log lines do not tell: a registry that got
    the partition before the last member joined logs it, then loses it in the next rebalance."""
    from confluent_kafka import ConsumerGroupState, KafkaException
    from confluent_kafka.admin import AdminClient

    by_url = {u: i for i, u in urls.items()}
    deadline = time.monotonic() + timeout
    seen = None
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    while True:
        running = [i for i, b in cluster.brokers.items() if b.running]
        try:
            group = admin.describe_consumer_groups(["schema-registry"], request_timeout=10)[
                "schema-registry"
            ].result()
            seen = group
            if group.state == ConsumerGroupState.STABLE and len(group.members) == len(running):
                for m in group.members:
                    parts = m.assignment.topic_partitions if m.assignment else []
                    if any(tp.topic == "_schemas" and tp.partition == 0 for tp in parts):
                        i = by_url.get(m.client_id.split("@", 1)[-1])
                        if i in running:
                            return i
        except KafkaException:
            pass  # the coordinator moves (a broker died): ask again
        if time.monotonic() > deadline:
            raise AssertionError(f"no writer elected: {seen}\n{cluster.logs()}")
        time.sleep(0.2)


def _eventually(fn, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except (SchemaRegistryError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_writer_election_forwarding_and_failover(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    cluster = Cluster(zookeeper, tmp_path, 3, {"schema.registry.listeners": "http://127.0.0.1:0"})
    try:
        cluster.start()
        urls = {i: registry_url(b, 60) for i, b in cluster.brokers.items()}
        writer = _writer(cluster, urls)
        others = [i for i in urls if i != writer]
        # a write through a broker that does not write: forwarded, and visible there at once
        via = SchemaRegistryClient({"url": urls[others[0]]})
        first = via.register_schema("c-value", _schema("A"))
        assert SchemaRegistryClient({"url": urls[others[0]]}).get_versions("c-value") == [1]
        # every broker serves it from its own copy of _schemas
        for i in urls:
            client = SchemaRegistryClient({"url": urls[i]})
            _eventually(lambda client=client: client.get_schema(first))
        second = SchemaRegistryClient({"url": urls[writer]}).register_schema(
            "c-value", _schema("A", "b")
        )
        assert second == first + 1

        cluster.brokers[writer].kill()
        survivor = SchemaRegistryClient({"url": urls[others[1]], "timeout": 45, "max.retries": 0})
        try:
            third = survivor.register_schema("d-value", _schema("B"))  # waits for the new writer
        except SchemaRegistryError as exc:
            raise AssertionError(
                f"no write after the writer {writer} died: {exc}\n{cluster.logs()}"
            ) from exc
        assert third == second + 1  # nothing lost, no id handed out twice
        assert _writer(cluster, urls) in others
        assert survivor.get_versions("c-value") == [1, 2]
        other = SchemaRegistryClient({"url": urls[others[0]]})
        _eventually(lambda: other.get_schema(third))
    finally:
        cluster.close()


def test_store_writes_right_after_the_leader_of_schemas_dies(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    """The writer's producer has written to the leader of ``_schemas-0``; that broker (here also
    the controller) dies and the next write comes before the partition has a new leader. The
    write lands once the controller has moved the leadership (seconds), not when the store's
    deadline expires: the producer asks for metadata again when it cannot reach the leader,
    rather than trying the dead broker until ``metadata.max.age.ms``."""
    import asyncio

    from odradek.registry.records import ConfigRecord
    from odradek.registry.store import SchemaStore

    cluster = Cluster(zookeeper, tmp_path, 3)
    try:
        cluster.start()
        md = cluster.wait_metadata(lambda m: m.controller_id > 0)
        victim = md.controller_id
        # the victim leads _schemas-0: created with it first in the replica list
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        others = [i for i in cluster.brokers if i != victim]
        topic = NewTopic(
            "_schemas",
            num_partitions=1,
            replica_assignment=[[victim, *others]],
            config={"cleanup.policy": "compact"},
        )
        admin.create_topics([topic])["_schemas"].result(30)
        cluster.wait_metadata(
            lambda m: (p := cluster.partitions(m, "_schemas").get(0)) is not None
            and p.leader_id == victim
            and len(p.isr_nodes) == 3
        )
        bootstrap = ",".join(cluster.brokers[i].bootstrap_servers for i in others)

        async def run() -> float:
            store = SchemaStore(bootstrap, timeout_s=25.0)
            await store.start()
            try:
                await store.write(ConfigRecord(None, "FULL"))
                cluster.brokers[victim].kill()
                loop = asyncio.get_running_loop()
                began = loop.time()
                await store.write(ConfigRecord(None, "NONE"))
                assert store.state.configs == {None: "NONE"}
                return loop.time() - began
            finally:
                await store.close()

        took = asyncio.run(run())
        # a new controller (ZooKeeper session 3 s) and a new leader: seconds, not the deadline
        assert took < 20.0, f"the write took {took:.1f} s\n{cluster.logs()}"
    finally:
        cluster.close()
