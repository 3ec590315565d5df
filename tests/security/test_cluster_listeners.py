"""Brokers with several listeners, as Kafka: each registers every endpoint in
``/brokers/ids/<id>`` (``endpoints`` and ``listener_security_protocol_map``), the controller
sends them all in UpdateMetadata, and a client is told every broker's address on the listener
it came in on (a SASL_PLAINTEXT client must not be sent to the other brokers' PLAINTEXT ports,
where its SASL handshake fails: librdkafka's 0142_reauthentication on three brokers did)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from cluster.conftest import Cluster, running_zookeeper
from odradek.cluster.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.interop

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zk-listeners")


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, dict[int, dict[str, int]]]]:
    settings: dict[str, object] = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("listeners")), 2, settings)
    ports: dict[int, dict[str, int]] = {}
    for i, b in c.brokers.items():
        ports[i] = {"PLAINTEXT": _free_port(), "SASL_PLAINTEXT": _free_port()}
        b.settings["listeners"] = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports[i].items())
    try:
        c.start()
        yield c, ports
    finally:
        c.close()


def _brokers(conf: dict[str, Any], want: int) -> dict[int, int]:
    """Node id -> port of the brokers a client with ``conf`` is told (waits until it is told
    of ``want`` brokers)."""
    admin = AdminClient(conf)
    deadline = time.monotonic() + 30
    while True:
        brokers = {b.id: b.port for b in admin.list_topics(timeout=10).brokers.values()}
        if len(brokers) >= want or time.monotonic() > deadline:
            return brokers
        time.sleep(0.2)


def test_clients_are_told_each_brokers_address_on_their_listener(
    cluster: tuple[Cluster, dict[int, dict[str, int]]],
) -> None:
    _, ports = cluster
    sasl = {
        "bootstrap.servers": f"127.0.0.1:{ports[1]['SASL_PLAINTEXT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-pw",
    }
    assert _brokers(sasl, 2) == {i: p["SASL_PLAINTEXT"] for i, p in ports.items()}
    plain = {"bootstrap.servers": f"127.0.0.1:{ports[2]['PLAINTEXT']}"}
    assert _brokers(plain, 2) == {i: p["PLAINTEXT"] for i, p in ports.items()}


def test_every_endpoint_is_registered_as_kafka_registers_it(
    cluster: tuple[Cluster, dict[int, dict[str, int]]], zookeeper: ZooKeeperServer
) -> None:
    c, ports = cluster
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper.connect_string + c.chroot)
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/brokers/ids/1")
    finally:
        zk.stop()
        zk.close()
    registered = json.loads(data)
    assert registered["endpoints"] == [
        f"PLAINTEXT://127.0.0.1:{ports[1]['PLAINTEXT']}",
        f"SASL_PLAINTEXT://127.0.0.1:{ports[1]['SASL_PLAINTEXT']}",
    ]
    assert registered["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "SASL_PLAINTEXT": "SASL_PLAINTEXT",
    }
    assert (registered["host"], registered["port"]) == ("127.0.0.1", ports[1]["PLAINTEXT"])
