"""Metadata asked of a broker of a cluster that has had no UpdateMetadata yet (just started, its
controller not heard from): it lists no brokers, no controller and no topics, as a ZK-mode Kafka
broker does while its MetadataCache is empty. Its own image holds itself alone then; listing that
would tell a client the other brokers are gone (librdkafka drops every broker a Metadata answer
leaves out). Once the controller's UpdateMetadata arrives it answers the controller's view.

The window is held open on purpose: a ``/controller`` znode naming a broker that does not exist
(written by the test) keeps the real broker from becoming the controller, so no UpdateMetadata
reaches it until the test deletes that znode."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kazoo.client import KazooClient
from tests.broker.wire import Wire, req

from odradek.cluster.zookeeper import ZooKeeperServer

from .harness import Cluster


def _all_topics() -> object:
    return req(3, 12, topics=None, allow_auto_topic_creation=False,
               include_topic_authorized_operations=False)  # fmt: skip


def test_metadata_before_any_update_metadata_lists_no_brokers(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    cluster = Cluster(zookeeper, tmp_path, 1)
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=30)
    controller = f"{cluster.chroot}/controller"
    try:
        zk.create(controller, json.dumps({"version": 1, "brokerid": 99, "timestamp": str(int(time.time() * 1000))}).encode(),
                  ephemeral=True, makepath=True)  # fmt: skip
        broker = cluster.brokers[1].start()
        with Wire(broker.bootstrap_servers) as wire:
            md = wire.call(_all_topics())
        assert (list(md.brokers), int(md.controller_id), list(md.topics)) == ([], -1, [])

        zk.delete(controller)  # broker 1 becomes the controller and tells itself
        md = cluster.wait_metadata(lambda md: md.controller_id == 1, broker_id=1)
        assert [(b.node_id, b.port) for b in md.brokers] == [(1, broker.port)]
    finally:
        zk.stop()
        zk.close()
        cluster.close()
