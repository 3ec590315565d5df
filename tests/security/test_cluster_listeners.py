"""Per-listener endpoints in a cluster, as Kafka has them: three broker processes, each with a
PLAINTEXT and a SASL_SSL listener (ephemeral ports; SASL_SSL between brokers, PLAIN), a rack
each.

* ``/brokers/ids/<id>`` holds Kafka's version 5 registration: every endpoint, the listener
  security protocol map, host and port of the PLAINTEXT endpoint, the rack (read with kazoo);
* a client is told, for every broker, the endpoint of the listener its request arrived on:
  confluent-kafka bootstrapped on one broker's SASL_SSL port (SCRAM-SHA-512) sees only SASL_SSL
  ports and produces to and consumes from a partition led by each broker; kafka-python on a
  PLAINTEXT port sees only PLAINTEXT ports and reads the same records.
"""

from __future__ import annotations

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

from cluster.conftest import Cluster, running_zookeeper
from cluster.harness import listener_ports
from odradek.cluster.zookeeper import ZooKeeperServer

from .conftest import Certs, server_tls

pytestmark = pytest.mark.interop

TOPIC = "per-listener"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-pw" user_broker="broker-pw";'
)
KAFKA_V5_KEYS = {
    "listener_security_protocol_map",
    "endpoints",
    "rack",
    "jmx_port",
    "features",
    "host",
    "timestamp",
    "port",
    "version",
}


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zk-listeners")


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    settings: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        **server_tls(certs),
    }
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("listeners")), 3, settings)
    for i, b in c.brokers.items():
        b.settings["broker.rack"] = f"r{i}"
    try:
        c.start()
        yield c
    finally:
        c.close()


def _sasl_conf(port: int, certs: Certs) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-pw",
        "ssl.ca.location": str(certs.ca_pem),
    }


def test_registrations_and_metadata_follow_the_request_listener(
    cluster: Cluster, zookeeper: ZooKeeperServer, certs: Certs
) -> None:
    regs = cluster.registrations()
    assert sorted(regs) == [1, 2, 3]
    ports = {i: listener_ports(r) for i, r in regs.items()}
    for i, reg in regs.items():
        # Kafka's BrokerIdZNode v5: every endpoint in listener order, the protocol map, host and
        # port of the PLAINTEXT endpoint, the rack
        assert set(reg) == KAFKA_V5_KEYS, reg
        assert reg["version"] == 5 and reg["jmx_port"] == -1 and reg["features"] == {}
        assert reg["endpoints"] == [
            f"PLAINTEXT://127.0.0.1:{ports[i]['PLAINTEXT']}",
            f"SASL_SSL://127.0.0.1:{ports[i]['SASL_SSL']}",
        ]
        assert reg["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT",
            "SASL_SSL": "SASL_SSL",
        }
        assert reg["host"] == "127.0.0.1" and reg["port"] == ports[i]["PLAINTEXT"]
        assert reg["rack"] == f"r{i}" and int(reg["timestamp"]) > 0
        assert ports[i]["PLAINTEXT"] == cluster.brokers[i].port

    # a SCRAM user, created on a PLAINTEXT port (no authorizer)
    plain_admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap_servers})
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw"
    )
    for f in plain_admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)

    # confluent-kafka on broker 1's SASL_SSL port: every broker at its SASL_SSL port
    sasl_port = ports[1]["SASL_SSL"]
    admin = _wait_admin(_sasl_conf(sasl_port, certs))
    md = admin.list_topics(timeout=10)
    assert {b.id: b.port for b in md.brokers.values()} == {
        i: p["SASL_SSL"] for i, p in ports.items()
    }
    new = NewTopic(TOPIC, 3, replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    cluster.wait_metadata(
        lambda md: (
            {p: s.leader_id for p, s in cluster.partitions(md, TOPIC).items()} == {0: 1, 1: 2, 2: 3}
        )
    )

    producer = Producer({**_sasl_conf(sasl_port, certs), "acks": "all", "linger.ms": 5})
    errors: list[str] = []
    for p in range(3):
        for n in range(20):
            producer.produce(
                TOPIC,
                f"p{p}-{n}".encode(),
                partition=p,
                on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
            )
    assert producer.flush(60) == 0 and not errors, errors[:3]

    consumer = Consumer(
        {**_sasl_conf(sasl_port, certs), "group.id": "g", "enable.auto.commit": False}
    )
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(3)])
        deadline = time.monotonic() + 60
        while any(len(v) < 20 for v in got.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    assert got == {p: [f"p{p}-{n}".encode() for n in range(20)] for p in range(3)}

    # kafka-python on broker 2's PLAINTEXT port: every broker at its PLAINTEXT port
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpPartition

    kp = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{ports[2]['PLAINTEXT']}",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        kp.assign([KpPartition(TOPIC, p) for p in range(3)])
        kp.seek_to_beginning()
        read: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        while any(len(v) < 20 for v in read.values()) and time.monotonic() < deadline:
            for tp, records in kp.poll(timeout_ms=500).items():
                read[tp.partition].extend(r.value for r in records)
        seen = {b.node_id: b.port for b in kp._client.cluster.brokers()}
    finally:
        kp.close()
    assert read == got
    assert seen == {i: p["PLAINTEXT"] for i, p in ports.items()}


def _wait_admin(conf: dict[str, Any]) -> AdminClient:
    """An admin client once the user is known to the broker (the credential reaches every
    broker through ZooKeeper's change notification)."""
    deadline = time.monotonic() + 20
    while True:
        admin = AdminClient(conf)
        try:
            admin.list_topics(timeout=5)
            return admin
        except Exception:
            assert time.monotonic() < deadline, "the SASL_SSL listener does not accept alice"
            time.sleep(0.2)
