"""ACLs in a cluster on ZooKeeper: three broker processes with an authorizer; an ACL created
through one broker is enforced by another within a second (Kafka's /kafka-acl-changes
notifications), and the znode holds Kafka's JSON. Inter-broker requests come from
User:ANONYMOUS here (PLAINTEXT), which is a super user, as Kafka's set-ups make the brokers'
principal."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient
from tests.cluster.conftest import Cluster, running_zookeeper

from odradek.cluster.zookeeper import ZooKeeperServer

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


@pytest.fixture(scope="module")
def secured_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    settings = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("acl-cluster")), 3, settings)
    try:
        c.start()
        yield c
    finally:
        c.close()


def test_an_acl_made_on_one_broker_applies_on_another(
    secured_cluster: Cluster, zookeeper: ZooKeeperServer
) -> None:
    one = secured_cluster.brokers[1].bootstrap_servers
    three = secured_cluster.brokers[3].bootstrap_servers
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": one})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=TIMEOUT)
    binding = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    created = time.monotonic()
    admin.create_acls([binding], request_timeout=TIMEOUT)[binding].result(timeout=TIMEOUT)

    # broker 3 lists it (DescribeAcls answers from its own authorizer)
    other = AdminClient({"bootstrap.servers": three})
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deadline = created + TIMEOUT
    while binding not in other.describe_acls(everything).result(timeout=TIMEOUT):
        assert time.monotonic() < deadline, "broker 3 never saw the ACL"
        time.sleep(0.05)
    assert time.monotonic() - created < 2.0  # a second, plus the client's round trips

    kz = KazooClient(hosts=zookeeper.connect_string + secured_cluster.chroot)
    kz.start(timeout=10)
    try:
        data, _ = kz.get(f"/kafka-acl/Topic/{topic}")
        assert data == (
            b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
            b'"operation":"Read","host":"*"}]}'
        )
        notes = [
            kz.get(f"/kafka-acl-changes/{c}")[0] for c in kz.get_children("/kafka-acl-changes")
        ]
        assert f"TOPIC:{topic}".encode() in notes
    finally:
        kz.stop()
        kz.close()

    # the super user still produces through broker 3 (replication between brokers works too)
    producer = Producer({"bootstrap.servers": three, "acks": "all"})
    reports: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _m: reports.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert reports == [None]
