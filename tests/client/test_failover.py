"""The admin client off a broker that left a three-broker cluster: ListOffsets goes to the new
partition leaders and the group calls to the new coordinator (metadata refreshed, the
coordinator found again, within the call's timeout), as Kafka's admin client does, even when
its cache still names the broker that left while its broker list no longer has it.

Real broker processes on one ZooKeeper (tests/cluster/harness.py); skipped without ZooKeeper."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.harness import Cluster, running_zookeeper
from odradek.client import NewTopic, TopicPartition
from odradek.client.aio import AsyncAdmin, AsyncProducer
from odradek.cluster.zookeeper import ZooKeeperServer
from odradek.coordinator import OFFSETS_TOPIC
from odradek.coordinator.records import partition_for
from odradek.coordinator.transaction import TRANSACTION_STATE_TOPIC

pytestmark = pytest.mark.timeout(115)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "client-failover-zookeeper")


@pytest.fixture(scope="module")
def _cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("client-failover")), 3)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster3(_cluster: Cluster) -> Cluster:
    """The module's three brokers, every one running and registered (a test kills one)."""
    for b in _cluster.brokers.values():
        if not b.running:
            b.start()
    # every broker, the restarted one too, has had the controller's UpdateMetadata
    _cluster.wait_every_broker(lambda md: len(md.brokers) == len(_cluster.brokers) and md.controller_id > 0)
    return _cluster


def _leaders(md: Any, topic: str) -> dict[int, int]:
    return {int(p.partition_index): int(p.leader_id) for t in md.topics if t.name == topic for p in t.partitions}


async def test_list_offsets_and_group_calls_leave_a_dead_broker(cluster3: Cluster) -> None:
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(topic, p) for p in range(3)]
    # set-up by another client, so that the one under test has only what it asked for cached
    async with AsyncAdmin({"bootstrap.servers": cluster3.bootstrap_servers}) as setup:
        await setup.create_topics([NewTopic(topic, 3, 3)])
        await setup.alter_group_offsets(group, {tp: 0 for tp in tps})

    admin = AsyncAdmin({"bootstrap.servers": cluster3.bootstrap_servers})
    await admin.start()
    try:
        # cached: every topic's leaders (an all-topics listing) and the group's coordinator
        listed = await admin.list_topics()
        assert {tp: o.offset for tp, o in (await admin.list_group_offsets(group)).items() if o} == {tp: 0 for tp in tps}
        gone = admin._cluster.coordinators[(0, group)]
        assert gone in {p.leader for p in listed[topic].partitions}, "each broker leads one partition"

        await asyncio.to_thread(cluster3.brokers[gone].kill)
        offsets_partition = partition_for(group, 3)

        def moved(md: Any) -> bool:
            live = {int(b.node_id) for b in md.brokers}
            leaders = _leaders(md, topic)
            coord = _leaders(md, OFFSETS_TOPIC).get(offsets_partition, -1)
            return gone not in live and len(leaders) == 3 and all(v in live for v in leaders.values()) and coord in live

        await asyncio.to_thread(cluster3.wait_metadata, moved, 60.0)
        # the broker list is refreshed (the id that left is unknown now); the cached partition
        # leaders and the group's coordinator still name it
        assert gone not in (await admin.describe_cluster())["brokers"]

        offsets = await admin.list_offsets({tp: "latest" for tp in tps})
        assert {tp: o for tp, (o, _ts) in offsets.items()} == {tp: 0 for tp in tps}
        committed = await admin.list_group_offsets(group)
        assert {tp: o.offset for tp, o in committed.items() if o} == {tp: 0 for tp in tps}
        assert admin._cluster.coordinators[(0, group)] != gone
    finally:
        await admin.close()


async def test_transaction_follows_its_coordinator_off_a_dead_broker(cluster3: Cluster) -> None:
    topic = f"failover-txn-{uuid.uuid4().hex[:8]}"
    async with AsyncAdmin({"bootstrap.servers": cluster3.bootstrap_servers}) as setup:
        await setup.create_topics([NewTopic(topic, 3, 3)])
    # the transaction state topic exists after a first transactional producer
    async with AsyncProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": "warm-up"}) as warm:
        await warm.init_transactions()
    leaders = _leaders(cluster3.wait_metadata(lambda md: len(_leaders(md, TRANSACTION_STATE_TOPIC)) == 3), TRANSACTION_STATE_TOPIC)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    gone = leaders[partition_for(tid, 3)]

    producer = AsyncProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": tid})
    await producer.start()
    try:
        await producer.init_transactions()  # the transaction coordinator is cached: ``gone``
        await asyncio.to_thread(cluster3.brokers[gone].kill)

        def moved(md: Any) -> bool:
            live = {int(b.node_id) for b in md.brokers}
            coord = _leaders(md, TRANSACTION_STATE_TOPIC).get(partition_for(tid, 3), -1)
            return gone not in live and coord in live and all(v in live for v in _leaders(md, topic).values())

        await asyncio.to_thread(cluster3.wait_metadata, moved, 60.0)
        await producer.refresh_metadata([topic])  # the broker list no longer has ``gone``

        async def transaction() -> None:
            producer.begin_transaction()
            for p in range(3):
                await producer.send_and_wait(topic, b"v", partition=p)
            await producer.commit_transaction()

        await asyncio.wait_for(transaction(), 30)  # bounded: a client stuck on ``gone`` fails here
    finally:
        await producer.close()
