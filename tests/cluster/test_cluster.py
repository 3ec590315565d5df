"""Three real broker processes on a real ZooKeeper: membership, the controller, topic admin
through ZooKeeper, controlled shutdown and controller failover, seen through Metadata and
confluent-kafka's AdminClient."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from odradek.cli.cluster import status_lines
from odradek.cluster.zk import KafkaZkClient

from .harness import Cluster

pytestmark = pytest.mark.interop


def _admin(c: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap_servers})


def _create(admin: AdminClient, topic: NewTopic) -> None:
    for f in admin.create_topics([topic], request_timeout=30).values():
        f.result(timeout=30)


def test_every_broker_sees_every_broker_and_one_controller(cluster3: Cluster) -> None:
    controllers = set()
    for md in cluster3.wait_every_broker(lambda md: len(md.brokers) == 3).values():
        assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
        assert {b.port for b in md.brokers} == {b.port for b in cluster3.brokers.values()}
        controllers.add(md.controller_id)
    assert len(controllers) == 1 and controllers <= {1, 2, 3}
    admin = _admin(cluster3)  # kept referenced: a collected client cancels its futures
    described = admin.describe_cluster(request_timeout=10).result(timeout=10)
    assert sorted(n.id for n in described.nodes) == [1, 2, 3]
    assert described.controller.id in controllers


def test_topic_rf3_is_spread_grown_and_deleted_everywhere(cluster3: Cluster) -> None:
    admin = _admin(cluster3)
    _create(admin, NewTopic("spread", num_partitions=6, replication_factor=3))
    md = cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, "spread")) == 6)
    parts = cluster3.partitions(md, "spread")
    for p in parts.values():
        assert sorted(p.replica_nodes) == [1, 2, 3]
        assert p.leader_id == p.replica_nodes[0]  # the preferred replica leads
        assert sorted(p.isr_nodes) == [1, 2, 3]
        assert p.offline_replicas == ()
    assert {p.leader_id for p in parts.values()} == {1, 2, 3}
    # Kafka's znode layout, readable with zkCli
    zk = KafkaZkClient(cluster3.zookeeper.connect_string + cluster3.chroot)
    zk.start()
    try:
        state = json.loads(zk.zk.get("/brokers/topics/spread/partitions/0/state")[0])
        assert state["leader"] == parts[0].leader_id and state["leader_epoch"] == 0
        assert sorted(state["isr"]) == [1, 2, 3]
        assignment = json.loads(zk.zk.get("/brokers/topics/spread")[0])
        assert assignment["partitions"]["0"] == list(parts[0].replica_nodes)
        assert assignment["topic_id"]
    finally:
        zk.close()
    # every broker answers the same
    cluster3.wait_every_broker(lambda md: len(cluster3.partitions(md, "spread")) == 6)

    for f in admin.create_partitions([NewPartitions("spread", 9)], request_timeout=30).values():
        f.result(timeout=30)
    md = cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, "spread")) == 9)
    assert all(len(p.replica_nodes) == 3 for p in cluster3.partitions(md, "spread").values())

    for f in admin.delete_topics(["spread"], request_timeout=30).values():
        f.result(timeout=30)
    cluster3.wait_every_broker(lambda md: not cluster3.partitions(md, "spread"))


def test_replication_factor_beyond_the_live_brokers_is_refused(cluster3: Cluster) -> None:
    admin = _admin(cluster3)
    with pytest.raises(KafkaException) as info:
        _create(admin, NewTopic("too-many", num_partitions=1, replication_factor=4))
    assert info.value.args[0].name() == "INVALID_REPLICATION_FACTOR"


def test_controlled_shutdown_moves_leadership_and_the_controller_fails_over(
    cluster3: Cluster,
) -> None:
    admin = _admin(cluster3)
    _create(admin, NewTopic("moving", num_partitions=3, replication_factor=3))
    md = cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, "moving")) == 3)
    controller = md.controller_id
    led = [p for p in cluster3.partitions(md, "moving").values() if p.leader_id == controller]
    assert led, "the controller leads one partition of three (leaders are spread)"

    started = time.monotonic()
    cluster3.brokers[controller].stop()  # SIGTERM: controlled shutdown first
    took = time.monotonic() - started
    md = cluster3.wait_metadata(
        lambda md: (
            md.controller_id not in (-1, controller)
            and len(md.brokers) == 2
            and all(
                p.leader_id not in (-1, controller)
                for p in cluster3.partitions(md, "moving").values()
            )
        )
    )
    assert took < 10, f"a controlled shutdown took {took:.1f} s"
    for p in cluster3.partitions(md, "moving").values():
        assert controller not in p.isr_nodes
        assert p.offline_replicas == (controller,)
    lines = status_lines(md)
    under = lines[lines.index(next(x for x in lines if x.startswith("under-replicated"))) :]
    assert sum("\tTopic: moving\t" in x for x in under) == 3  # other tests' topics may add more

    # it comes back: registered again, seen by everyone
    cluster3.brokers[controller].start()
    md = cluster3.wait_metadata(lambda md: len(md.brokers) == 3)
    assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=120
    )


def test_reassignment_moves_replicas_with_their_data_and_preferred_election(
    cluster3: Cluster,
) -> None:
    admin = _admin(cluster3)
    topic = NewTopic("moved", num_partitions=1, replica_assignment=[[1, 2]])
    _create(admin, topic)
    cluster3.wait_metadata(
        lambda md: sorted(cluster3.partitions(md, "moved")[0].isr_nodes) == [1, 2]
    )
    producer = Producer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all"})
    for i in range(50):
        producer.produce("moved", b"m%d" % i, partition=0)
    assert producer.flush(30) == 0

    out = _cli("topics", "reassign", "moved", "0=3,1", "-b", cluster3.bootstrap_servers)
    assert out.returncode == 0 and "moved-0: OK" in out.stdout, out.stdout + out.stderr
    cluster3.wait_metadata(
        lambda md: (
            tuple(cluster3.partitions(md, "moved")[0].replica_nodes) == (3, 1)
            and sorted(cluster3.partitions(md, "moved")[0].isr_nodes) == [1, 3]
        ),
        timeout=60,
    )
    # the preferred replica (3, new) leads after a preferred election; reading from it shows
    # the data moved with the replica
    out = _cli("topics", "elect-leaders", "moved", "-b", cluster3.bootstrap_servers)
    assert out.returncode == 0 and "moved-0" in out.stdout, out.stdout + out.stderr
    cluster3.wait_metadata(lambda md: cluster3.partitions(md, "moved")[0].leader_id == 3)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster3.bootstrap_servers,
            "group.id": "moved-reader",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition("moved", 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 50 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    assert values == [b"m%d" % i for i in range(50)]
