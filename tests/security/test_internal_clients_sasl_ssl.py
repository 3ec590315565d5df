"""A broker whose only Kafka listener is SASL_SSL (SCRAM-SHA-512, an authorizer, the broker's
principal a super user) with its console and schema registry on HTTPS: their own Kafka clients
connect through that listener with the broker's credentials, so no PLAINTEXT listener is
needed. The console lists topics for a logged-in user, the registry registers and serves a
schema for confluent-kafka's SchemaRegistryClient with basic auth."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from tests.certs import Certs, make_certs, server_tls

from odradek.broker.config_store import FILE_NAME
from odradek.security.scram import scram_credential
from odradek.testing import wait_until
from odradek.testing.process import BrokerProcess

TIMEOUT = 15.0
MECHANISM = "SCRAM-SHA-512"
PASSWORDS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}
REGISTRY_RE = re.compile(r"schema registry listening on (https?://\S+)")
SCHEMA = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}


@dataclass
class Broker:
    process: BrokerProcess
    console: str
    registry: str
    certs: Certs

    def conf(self, user: str) -> dict[str, str]:
        """librdkafka's settings for ``user`` over SASL_SSL."""
        return {
            "bootstrap.servers": self.process.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            "ssl.ca.location": str(self.certs.ca_pem),
        }


def _seed_users(data_dir: Path) -> None:
    """The SCRAM credentials in the broker's local config store before it starts (nobody could
    authenticate to create the first user on a broker with only a SASL_SSL listener)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    users = {
        user: {MECHANISM: scram_credential(MECHANISM, pw, 4096).to_config()}
        for user, pw in PASSWORDS.items()
    }
    entities = {"version": 1, "entities": {"users": users}}
    (data_dir / FILE_NAME).write_text(json.dumps(entities))


def _registry_url(process: BrokerProcess) -> str:
    found: list[str] = []

    def logged() -> bool:
        m = REGISTRY_RE.search(process.stderr_tail(1 << 20))
        if m:
            found.append(m.group(1))
        return bool(found)

    wait_until(logged, 30, "the schema registry is listening")
    return found[0]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    _seed_users(data_dir)
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{PASSWORDS["broker"]}";'
    )
    process = BrokerProcess(
        {
            "listeners": "SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
            **server_tls(certs),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
            "http.listeners": "https://127.0.0.1:0",
            "schema.registry.listeners": "https://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 1,
        },
        data_dir=data_dir,
        log_level="info",
    )
    process.start()
    try:
        yield Broker(process, process.console_url(), _registry_url(process), certs)
    finally:
        process.close()


def test_no_plaintext_listener(broker: Broker) -> None:
    """The one Kafka port speaks TLS: a plaintext ApiVersions gets no Kafka answer."""
    host, _, port = broker.process.bootstrap_servers.rpartition(":")
    frame = b"\x00\x00\x00\x12\x00\x12\x00\x00\x00\x00\x00\x01\x00\x08odradek!"
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as s:
        s.sendall(frame)
        try:
            answer = s.recv(4)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    assert answer == b""
    assert list(broker.process.settings["listeners"].split(",")) == ["SASL_SSL://127.0.0.1:0"]


def test_console_lists_topics_for_a_logged_in_user(broker: Broker) -> None:
    admin = AdminClient(broker.conf("admin"))
    for f in admin.create_topics([NewTopic("alice-orders", 1, 1), NewTopic("hidden", 1, 1)]).values():
        f.result(TIMEOUT)
    binding = AclBinding(
        ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
        AclOperation.DESCRIBE, AclPermissionType.ALLOW,
    )
    for f in admin.create_acls([binding], request_timeout=TIMEOUT).values():
        f.result(TIMEOUT)
    sess = requests.Session()
    sess.trust_env = False
    sess.verify = str(broker.certs.ca_pem)
    r = sess.post(
        broker.console + "/login",
        data={"username": "alice", "password": PASSWORDS["alice"], "next": "/topics"},
        allow_redirects=False,
        timeout=TIMEOUT,
    )
    assert r.status_code == 303, r.text

    def listed() -> bool:
        r = sess.get(broker.console + "/api/topics", timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        return {t["name"] for t in r.json()} == {"alice-orders"}

    wait_until(listed, 20, "the console lists alice's topic (and only hers)")
    r = requests.get(
        broker.console + "/api/topics",
        auth=("admin", PASSWORDS["admin"]),
        verify=str(broker.certs.ca_pem),
        timeout=TIMEOUT,
    )
    assert {"alice-orders", "hidden"} <= {t["name"] for t in r.json()}


def test_registry_registers_and_serves_a_schema(broker: Broker) -> None:
    client = SchemaRegistryClient(
        {
            "url": broker.registry,
            "basic.auth.user.info": f"admin:{PASSWORDS['admin']}",
            "ssl.ca.location": str(broker.certs.ca_pem),
        }
    )
    schema_id = client.register_schema("users-value", Schema(json.dumps(SCHEMA), "AVRO"))
    assert json.loads(client.get_schema(schema_id).schema_str) == SCHEMA
    latest = client.get_latest_version("users-value")
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    # stored in _schemas through the registry's own SASL_SSL clients
    admin = AdminClient(broker.conf("admin"))
    assert "_schemas" in admin.list_topics(timeout=TIMEOUT).topics


def _acls(broker: Broker, props: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "acls", *args, "-b", broker.process.bootstrap_servers,
         "--command-config", str(props)],
        capture_output=True, text=True, timeout=60,
    )


@pytest.mark.parametrize("keys", ["librdkafka", "java"])
def test_acls_cli_over_sasl_ssl(broker: Broker, tmp_path: Path, keys: str) -> None:
    """``odradek acls --command-config`` with the file ``cluster up --security`` writes
    (librdkafka's keys, as kcat reads them) and with the Java client's keys."""
    ca = broker.certs.ca_pem
    props = tmp_path / "client.properties"
    if keys == "librdkafka":
        props.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
            f"sasl.password={PASSWORDS['admin']}\nssl.ca.location={ca}\n"
        )
    else:
        props.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{PASSWORDS["admin"]}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n"
        )
    topic = f"acl-{keys}"
    added = _acls(
        broker, props, "add", "--allow-principal", "User:carol", "--operation", "Read",
        "--topic", topic,
    )
    assert added.returncode == 0, added.stderr
    listed = _acls(broker, props, "list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    assert f"name={topic}, patternType=LITERAL) principal=User:carol" in listed.stdout
    removed = _acls(
        broker, props, "remove", "--allow-principal", "User:carol", "--operation", "Read",
        "--topic", topic,
    )
    assert removed.returncode == 0 and "Removed " in removed.stdout, removed.stderr


def test_elect_leaders_with_command_config(broker: Broker, tmp_path: Path) -> None:
    """``odradek topics elect-leaders --command-config`` is answered over SASL_SSL."""
    admin = AdminClient(broker.conf("admin"))
    for f in admin.create_topics([NewTopic("elected", 1, 1)]).values():
        f.result(TIMEOUT)
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
        f"sasl.password={PASSWORDS['admin']}\nssl.ca.location={broker.certs.ca_pem}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "elect-leaders", "elected",
         "-b", broker.process.bootstrap_servers, "--command-config", str(props)],
        capture_output=True, text=True, timeout=60,
    )
    # a single broker has no controller to elect with: its answer came back over SASL_SSL
    assert (run.returncode, run.stderr.strip()) == (1, "error: not_controller"), run.stderr
