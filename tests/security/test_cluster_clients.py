"""kcat, kafka-python and KafkaJS against one secured three-broker cluster on ZooKeeper,
configured with Kafka's names only:

* SASL_SSL with SCRAM-SHA-512 between the brokers (``sasl.mechanism.inter.broker.protocol``,
  the broker's own SCRAM credential written to ``/config/users/broker`` before any broker
  starts) and for clients; PEM key and trust stores; ``authorizer.class.name`` AclAuthorizer,
  ``super.users`` the brokers' and the administrator's principals. Each broker also has a
  PLAINTEXT listener, first, which the Cluster harness polls for metadata (as
  ``User:ANONYMOUS``, which no ACL names).
* One user per client, created with AlterUserScramCredentials, with ALLOW WRITE/READ/DESCRIBE
  on exactly its own topic (3 partitions, replication factor 3, led by the three brokers) and
  READ/DESCRIBE on its own group. Each client produces ``COUNT`` records to the topic, reads them
  all back through the group, and is refused a topic it has no ACL for with its own
  authorization error (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from cluster.conftest import Cluster, running_zookeeper
from odradek.cluster.zk import KafkaZkClient
from odradek.cluster.zookeeper import ZooKeeperServer
from odradek.security.scram import scram_credential

from .conftest import Certs, server_tls

pytestmark = pytest.mark.interop

MECHANISM = "SCRAM-SHA-512"
PARTITIONS = 3
COUNT = 30
DENIED = "secret"
CLIENTS = ("kcat", "kpy", "kjs")
BROKER_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-pw";'
)
SCENARIO = Path(__file__).with_name("kafkajs_cluster_acl.js")


@dataclass
class Secured:
    cluster: Cluster
    bootstrap: str  # every broker's SASL_SSL address
    certs: Certs

    def topic(self, client: str) -> str:
        return f"orders-{client}"

    def group(self, client: str) -> str:
        return f"group-{client}"

    def password(self, client: str) -> str:
        return f"{client}-pw"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zk-cluster-clients")


def _conf(bootstrap: str, certs: Certs, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": MECHANISM,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(certs.ca_pem),
    }


def _allow(resource: ResourceType, name: str, user: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        resource, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
        AclPermissionType.ALLOW,
    )  # fmt: skip


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    settings: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "sasl.enabled.mechanisms": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
        **server_tls(certs),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:admin",
    }
    cluster = Cluster(zookeeper, Path(tmp_path_factory.mktemp("cluster-clients")), 3, settings)
    # the brokers' and the administrator's credentials, before any broker starts
    zk = KafkaZkClient(zookeeper.connect_string + cluster.chroot, session_timeout_ms=10_000)
    zk.start()
    try:
        for user in ("broker", "admin"):
            credential = scram_credential(MECHANISM, f"{user}-pw", 4096).to_config()
            zk.set_or_create_entity_config("users", user, {MECHANISM: credential})
    finally:
        zk.close()
    try:
        cluster.start()
        bootstrap = _sasl_bootstrap(cluster)
        admin = AdminClient(_conf(bootstrap, certs, "admin", "admin-pw"))
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(
                c, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), f"{c}-pw".encode()
            )
            for c in CLIENTS
        ]
        for f in admin.alter_user_scram_credentials(upserts).values():
            f.result(30)
        names = [f"orders-{c}" for c in CLIENTS] + [DENIED]
        new = [NewTopic(t, PARTITIONS, 3) for t in names]
        for f in admin.create_topics(new, request_timeout=30).values():
            f.result(30)
        acls = [
            _allow(ResourceType.TOPIC, f"orders-{c}", c, op)
            for c in CLIENTS
            for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
        ] + [
            _allow(ResourceType.GROUP, f"group-{c}", c, op)
            for c in CLIENTS
            for op in (AclOperation.READ, AclOperation.DESCRIBE)
        ]
        for f in admin.create_acls(acls, request_timeout=30).values():
            f.result(30)
        # every partition has three in-sync replicas and the leaders are the three brokers
        deadline = time.monotonic() + 30
        while True:
            md = admin.list_topics(timeout=10)
            parts = [p for t in names if t in md.topics for p in md.topics[t].partitions.values()]
            if len(parts) == len(names) * PARTITIONS and all(len(p.isrs) == 3 for p in parts):
                break
            assert time.monotonic() < deadline, "partitions never got three in-sync replicas"
            time.sleep(0.1)
        for t in names:
            leaders = {p.leader for p in md.topics[t].partitions.values()}
            assert leaders == {1, 2, 3}, (t, leaders)
        del admin  # no client of the fixture's outlives the cluster
        yield Secured(cluster, bootstrap, certs)
    finally:
        cluster.close()


def _sasl_bootstrap(cluster: Cluster) -> str:
    """Every broker's SASL_SSL address (``host:port``, comma-separated, by broker id), read from
    its ``/brokers/ids/<id>`` registration: the brokers bind ephemeral ports."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper.connect_string + cluster.chroot)
    zk.start(timeout=10)
    try:
        out = []
        for i in sorted(zk.get_children("/brokers/ids"), key=int):
            registration = json.loads(zk.get(f"/brokers/ids/{i}")[0])
            for endpoint in registration["endpoints"]:
                listener, _, hostport = endpoint.partition("://")
                if listener == "SASL_SSL":
                    out.append(hostport)
        return ",".join(out)
    finally:
        zk.stop()
        zk.close()


def _values() -> list[str]:
    return [f"v{i}" for i in range(COUNT)]


# -- kcat (Debian's, librdkafka 2.0.2) -------------------------------------------------------------


def _kcat_security(s: Secured, user: str) -> list[str]:
    return [
        "-b", s.bootstrap,
        "-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanisms={MECHANISM}",
        "-X", f"sasl.username={user}", "-X", f"sasl.password={s.password(user)}",
        "-X", f"ssl.ca.location={s.certs.ca_pem}",
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat(secured: Secured) -> None:
    s, user = secured, "kcat"
    lines = "".join(f"k{i}:v{i}\n" for i in range(COUNT))
    # -K: a key per record: murmur2 of k0..k29 spreads them over the three partitions
    produced = subprocess.run(
        ["kcat", *_kcat_security(s, user), "-P", "-t", s.topic(user), "-K", ":",
         "-X", "partitioner=murmur2_random"],
        input=lines.encode(), capture_output=True, timeout=30,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    assert b"ERROR" not in produced.stderr, produced.stderr
    consumed = subprocess.run(
        ["kcat", *_kcat_security(s, user), "-G", s.group(user), "-X", "auto.offset.reset=earliest",
         "-f", "%p %s\\n", "-c", str(COUNT), s.topic(user)],
        capture_output=True, timeout=30,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    got = [line.split() for line in consumed.stdout.decode().splitlines()]
    assert sorted(v for _, v in got) == sorted(_values())
    assert {p for p, _ in got} == {"0", "1", "2"}  # every broker led some of them

    denied = subprocess.run(
        ["kcat", *_kcat_security(s, user), "-P", "-t", DENIED],
        input=b"nope\n", capture_output=True, timeout=30,
    )  # fmt: skip
    assert denied.returncode != 0, denied.stderr
    assert b"Delivery failed for message: Broker: Topic authorization failed" in denied.stderr, (
        denied.stderr
    )


# -- kafka-python ----------------------------------------------------------------------------------


def _kafka_python_conf(s: Secured, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": s.bootstrap.split(","),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(s.certs.ca_pem),
        "sasl_mechanism": MECHANISM,
        "sasl_plain_username": user,
        "sasl_plain_password": s.password(user),
    }


def test_kafka_python(secured: Secured) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    s, user = secured, "kpy"
    producer = KafkaProducer(**_kafka_python_conf(s, user), acks="all", max_block_ms=20_000)
    try:
        futures = [
            producer.send(s.topic(user), f"v{i}".encode(), partition=i % PARTITIONS)
            for i in range(COUNT)
        ]
        for f in futures:
            f.get(timeout=20)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(DENIED, b"nope").get(timeout=20)
    finally:
        producer.close(timeout=5)

    consumer = KafkaConsumer(
        s.topic(user),
        **_kafka_python_conf(s, user),
        group_id=s.group(user),
        auto_offset_reset="earliest",
    )
    got: list[tuple[int, str]] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < COUNT and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got.extend((tp.partition, r.value.decode()) for r in records)
        consumer.commit()
    finally:
        consumer.close()
    assert sorted(v for _, v in got) == sorted(_values())
    assert {p for p, _ in got} == {0, 1, 2}


# -- KafkaJS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafkajs() -> Path:
    from interop.test_kafkajs import install_kafkajs

    return install_kafkajs()


def test_kafkajs(secured: Secured, kafkajs: Path) -> None:
    s, user = secured, "kjs"
    env = dict(os.environ, NODE_PATH=str(kafkajs))
    done = subprocess.run(
        ["node", str(SCENARIO), s.bootstrap, str(s.certs.ca_pem), user, s.password(user),
         s.topic(user), str(PARTITIONS), s.group(user), DENIED, str(COUNT)],
        capture_output=True, text=True, timeout=90, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-4000:]}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(out["sent"]) == [0] * PARTITIONS  # one answer per partition, no error
    assert sorted(m["value"] for m in out["received"]) == sorted(_values())
    assert {m["partition"] for m in out["received"]} == {0, 1, 2}
    assert out["denied"] is not None, out
    assert out["denied"]["name"] == "KafkaJSNonRetriableError", out["denied"]
    assert out["denied"]["type"] == "TOPIC_AUTHORIZATION_FAILED", out["denied"]
