"""A broker that missed a topic's deletion (SIGSTOPped past its ZooKeeper session) forgets
the topic once it is back: the controller sends a broker that registers again a full
UpdateMetadata, which replaces its metadata image."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.zk import KafkaZkClient

from .harness import Cluster

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


def test_a_broker_back_from_a_pause_forgets_a_topic_deleted_meanwhile(cluster3: Cluster) -> None:
    c = cluster3
    controller = c.metadata(1).controller_id
    zombie = max(b for b in c.brokers if b != controller)
    others = sorted(b for b in c.brokers if b != zombie)
    topic = f"gone-{uuid.uuid4().hex[:8]}"
    live = ",".join(c.brokers[b].bootstrap_servers for b in others)
    admin = AdminClient({"bootstrap.servers": live})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[others])  # none on the zombie
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    c.wait_metadata(lambda md: bool(c.partitions(md, topic)), broker_id=zombie)

    pid = c.brokers[zombie].pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        # its session expires: the controller sees it leave
        c.wait_metadata(
            lambda md: zombie not in {b.node_id for b in md.brokers}, broker_id=others[0]
        )
        for f in admin.delete_topics([topic], request_timeout=30).values():
            f.result(timeout=30)
        zk = KafkaZkClient(c.zookeeper.connect_string + c.chroot)
        zk.start()
        try:  # the deletion completes without the zombie
            deadline = time.monotonic() + 30
            while zk.exists(f"/brokers/topics/{topic}"):
                assert time.monotonic() < deadline, "the topic deletion did not complete"
                time.sleep(0.1)
        finally:
            zk.close()
    finally:
        os.kill(pid, signal.SIGCONT)
    # back: it registers again, and the full UpdateMetadata it gets no longer names the topic
    md = c.wait_metadata(
        lambda md: len(md.brokers) == 3 and not c.partitions(md, topic), broker_id=zombie
    )
    assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
