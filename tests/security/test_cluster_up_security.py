"""`odradek cluster up --security` end to end: three brokers on SASL_SSL only (SCRAM-SHA-512,
generated certificates), the admin password printed once, ``client.properties`` used as is by
confluent-kafka (producer, consumer, admin), ``odradek users scram --command-config`` and
``cluster status``; ZooKeeper holds the users as Kafka stores them; a user without ACLs is
refused (the admin is a super user, nobody else)."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.cluster.zookeeper import zookeeper_available

pytestmark = [pytest.mark.interop, pytest.mark.timeout(110)]


def _odradek(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=timeout
    )


def _librdkafka_conf(path: Path) -> dict[str, Any]:
    """client.properties exactly as written (kcat -F reads the same keys)."""
    conf: dict[str, Any] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            conf[key] = value
    return conf


def test_cluster_up_security(tmp_path: Path) -> None:
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    d = tmp_path / "secure"
    up = _odradek(
        "cluster", "up", "--security", "-n", "3", "--port", "0", "--http-port", "0", "-d", str(d)
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads((d / "cluster.json").read_text())
        props = d / "client.properties"
        assert state["security"] is True and state["client_properties"] == str(props)
        password = re.search(r"^admin password \(shown once\): (\S+)$", up.stdout, re.M)
        assert password is not None, up.stdout
        assert f"client properties: {props}" in up.stdout
        # owner-only files: the client's properties, the key stores, the brokers' secrets
        for secret in (props, *sorted((d / "security").glob("broker-*"))):
            assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
        conf = _librdkafka_conf(props)
        assert conf["sasl.password"] == password[1]
        assert conf["bootstrap.servers"] == state["bootstrap_servers"]
        assert set(conf) == {
            "bootstrap.servers",
            "security.protocol",
            "sasl.mechanism",
            "sasl.username",
            "sasl.password",
            "ssl.ca.location",
        }
        # the password is printed by up only, and stored nowhere readable by others
        status = _odradek("cluster", "status", "-d", str(d))
        assert status.returncode == 0, status.stderr
        assert password[1] not in status.stdout
        assert f"client properties: {props}" in status.stdout
        for b in state["brokers"]:
            assert f"\t{b['id']}\t127.0.0.1:{b['port']}" in status.stdout

        # confluent-kafka with the file as is: admin, producer, consumer
        admin = AdminClient(conf)
        topic = NewTopic("secured", 3, 3)
        for f in admin.create_topics([topic], request_timeout=30).values():
            f.result(30)
        producer = Producer({**conf, "acks": "all", "linger.ms": 5})
        for i in range(30):
            producer.produce("secured", f"v{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        consumer = Consumer({**conf, "group.id": "g", "enable.auto.commit": False})
        values: list[bytes] = []
        try:
            consumer.assign([TopicPartition("secured", p, 0) for p in range(3)])
            deadline = time.monotonic() + 30
            while len(values) < 30 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
        finally:
            consumer.close()
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(30))

        # odradek's own tools with the same file
        listed = _odradek(
            "users",
            "scram",
            "list",
            "--command-config",
            str(props),
            "-b",
            state["bootstrap_servers"].split(",")[0],
        )
        assert listed.returncode == 0, listed.stderr
        assert "admin\tSCRAM-SHA-512\titerations=8192" in listed.stdout
        assert "broker\tSCRAM-SHA-512" in listed.stdout

        # a new user authenticates but may do nothing: only the super users may
        upsert = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-pw"
        )
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(30)
        carol = {**conf, "sasl.username": "carol", "sasl.password": "carol-pw"}
        deadline = time.monotonic() + 20
        while True:  # her credential reaches every broker through ZooKeeper
            try:
                md = AdminClient(carol).list_topics(timeout=5)
                break
            except KafkaException:
                assert time.monotonic() < deadline, "carol was not accepted"
                time.sleep(0.2)
        assert "secured" not in md.topics  # no DESCRIBE on it

        from kazoo.client import KazooClient

        zk = KazooClient(hosts=state["zookeeper"] + "/odradek")
        zk.start(timeout=10)
        try:
            stored = json.loads(zk.get("/config/users/admin")[0])
        finally:
            zk.stop()
            zk.close()
        assert stored["version"] == 1
        credential = stored["config"]["SCRAM-SHA-512"]
        assert credential.startswith("salt=") and credential.endswith(",iterations=8192")
        assert password[1] not in credential
    finally:
        down = _odradek("cluster", "down", "-d", str(d), timeout=100)
    assert down.returncode == 0, down.stdout + down.stderr
