"""Three broker processes on ZooKeeper whose brokers talk to each other over SASL_SSL (PLAIN
between brokers, TLS verified against the test CA), clients on SASL_SSL with SCRAM-SHA-512:

* a SCRAM user created through one broker (AlterUserScramCredentials) is stored in ZooKeeper at
  ``/config/users/<user>`` as Kafka stores it and every broker accepts it (change notification);
* a topic with replication factor 3 and min.insync.replicas 2 takes acks=all records; its
  partition 0 leader is SIGKILLed mid-stream; a new leader is elected (replication runs over
  the authenticated inter-broker channel) and every acknowledged record is read back.

Each broker also has a PLAINTEXT listener, first, which the Cluster fixture polls for metadata.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from cluster.checker import Ack, check
from cluster.conftest import Cluster, running_zookeeper
from odradek.cluster.zookeeper import ZooKeeperServer

from .conftest import Certs, server_tls

pytestmark = pytest.mark.interop

TOPIC = "secured"
PARTITIONS = 3
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-pw" user_broker="broker-pw" user_admin="admin-pw";'
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zk-security")


@pytest.fixture(scope="module")
def secure_cluster(
    zookeeper: ZooKeeperServer, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, dict[int, int]]]:
    settings: dict[str, object] = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        **server_tls(certs),
    }
    cluster = Cluster(zookeeper, Path(tmp_path_factory.mktemp("secure")), 3, settings)
    sasl_ports: dict[int, int] = {}
    for i, b in cluster.brokers.items():
        sasl_ports[i] = _free_port()
        b.settings["listeners"] = f"PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{sasl_ports[i]}"
    try:
        cluster.start()
        yield cluster, sasl_ports
    finally:
        cluster.close()


def _conf(
    ports: dict[int, int], certs: Certs, user: str, password: str, mech: str
) -> dict[str, Any]:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in ports.values()),
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": mech,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(certs.ca_pem),
    }


def test_scram_users_in_zookeeper_and_leader_kill_loses_nothing(
    secure_cluster: tuple[Cluster, dict[int, int]], certs: Certs, zookeeper: ZooKeeperServer
) -> None:
    cluster, ports = secure_cluster
    admin = AdminClient(_conf({1: ports[1]}, certs, "admin", "admin-pw", "PLAIN"))
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-pw"
    )
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)

    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper.connect_string + cluster.chroot)
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/config/users/alice")
    finally:
        zk.stop()
        zk.close()
    stored = json.loads(data)
    assert stored["version"] == 1
    credential = stored["config"]["SCRAM-SHA-512"]
    assert credential.startswith("salt=") and ",stored_key=" in credential
    assert credential.endswith(",iterations=8192") and "alice-pw" not in credential

    # every broker accepts alice (brokers 2 and 3 learnt her from the change notification)
    deadline = time.monotonic() + 20
    for i in (1, 2, 3):
        while True:
            try:
                md = AdminClient(
                    _conf({i: ports[i]}, certs, "alice", "alice-pw", "SCRAM-SHA-512")
                ).list_topics(timeout=5)
                assert md.brokers
                break
            except Exception:
                assert time.monotonic() < deadline, f"broker {i} does not accept alice"
                time.sleep(0.2)

    conf = _conf(ports, certs, "alice", "alice-pw", "SCRAM-SHA-512")
    admin = AdminClient(conf)
    new = NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    md = cluster.wait_metadata(
        lambda md: (
            len(cluster.partitions(md, TOPIC)) == PARTITIONS
            and all(len(p.isr_nodes) == 3 for p in cluster.partitions(md, TOPIC).values())
        )
    )
    victim = cluster.partitions(md, TOPIC)[0].leader_id

    acks: list[Ack] = []
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acks.append(Ack(msg.partition(), msg.offset(), msg.value()))

    producer = Producer(
        {
            **conf,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    sent = 0

    def send(n: int, tag: str) -> None:
        nonlocal sent
        for _ in range(n):
            producer.produce(
                TOPIC, f"{tag}-{sent}".encode(), partition=sent % PARTITIONS, on_delivery=delivered
            )
            sent += 1
            producer.poll(0)

    send(200, "before")
    assert producer.flush(60) == 0
    send(200, "during")
    cluster.brokers[victim].kill()
    cluster.wait_metadata(
        lambda md: cluster.partitions(md, TOPIC)[0].leader_id not in (-1, victim), timeout=30
    )
    send(200, "after")
    assert producer.flush(90) == 0
    assert not errors, errors[:5]
    assert len(acks) == 600

    live = {i: p for i, p in ports.items() if i != victim}
    consumer = Consumer(
        {
            **_conf(live, certs, "alice", "alice-pw", "SCRAM-SHA-512"),
            "group.id": "checker",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            "fetch.queue.backoff.ms": 10,
        }
    )
    want = {p: sum(1 for a in acks if a.partition == p) for p in range(PARTITIONS)}
    log: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while any(len(log[p]) < want[p] for p in log) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                log[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    result = check(acks, log)
    assert result.ok, result.summary()
    cluster.brokers[victim].start()
