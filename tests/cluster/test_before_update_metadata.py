"""A broker of a cluster that has had no UpdateMetadata yet (just started, its controller not
heard from) knows only itself and no controller. It answers CreateTopics with NOT_CONTROLLER,
which is retriable: it cannot judge the replication factor or whether the topic exists.
odradek's admin client finds the controller again and retries within its timeout, as Kafka's
does.

The window is held open on purpose: a ``/controller`` znode naming a broker that does not exist
(written by the test) keeps the real broker from becoming the controller, so no UpdateMetadata
reaches it until the test deletes that znode."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from tests.broker.wire import Wire, req

from odradek.client import NewTopic
from odradek.client.aio import AsyncAdmin
from odradek.cluster.zookeeper import ZooKeeperServer
from odradek.testing.process import BrokerProcess

from .harness import Cluster

NOT_CONTROLLER = 41


@pytest.fixture
def uninformed(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> Iterator[tuple[Cluster, BrokerProcess, Callable[[], None]]]:
    """(a one-broker cluster, its broker started while a fake controller holds
    ``/controller``, a function that deletes that znode so the broker becomes the controller)."""
    cluster = Cluster(zookeeper, tmp_path, 1)
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=30)
    controller = f"{cluster.chroot}/controller"
    try:
        zk.create(controller, json.dumps({"version": 1, "brokerid": 99, "timestamp": str(int(time.time() * 1000))}).encode(),
                  ephemeral=True, makepath=True)  # fmt: skip
        yield cluster, cluster.brokers[1].start(), lambda: zk.delete(controller)
    finally:
        zk.stop()
        zk.close()
        cluster.close()


def _create(topic: str) -> object:
    creatable = req(19, 7, "CreatableTopic", name=topic, num_partitions=1, replication_factor=1,
                    assignments=(), configs=())  # fmt: skip
    return req(19, 7, topics=(creatable,), timeout=timedelta(seconds=5), validate_only=False)


def test_create_topics_before_any_update_metadata_is_not_controller_then_retried(
    uninformed: tuple[Cluster, BrokerProcess, Callable[[], None]],
) -> None:
    cluster, broker, release = uninformed
    with Wire(broker.bootstrap_servers) as wire:
        answer = wire.call(_create("early"))
    assert int(answer.topics[0].error_code) == NOT_CONTROLLER, answer

    async def create_while_the_controller_appears() -> dict[str, int]:
        admin = AsyncAdmin({"bootstrap.servers": broker.bootstrap_servers, "request.timeout.ms": 30000})
        await admin.start()
        try:
            pending = asyncio.ensure_future(admin.create_topics([NewTopic("retried", 1, 1)]))
            await asyncio.sleep(0)  # the admin client's first attempt is on its way
            await asyncio.to_thread(release)  # broker 1 becomes the controller
            return await asyncio.wait_for(pending, 30)
        finally:
            await admin.close()

    assert asyncio.run(create_while_the_controller_appears()) == {"retried": 0}
    md = cluster.wait_metadata(lambda md: any(t.name == "retried" for t in md.topics))
    assert md.controller_id == 1
