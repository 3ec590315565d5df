"""FindCoordinator on a listener the coordinator does not have, as Kafka answers it
(``KafkaApis.getCoordinator``: ``metadataCache.getAliveBrokerNode(id, listenerName)``).

Two broker processes on one ZooKeeper: broker 1 with listeners PLAINTEXT and EXTERNAL (a second
PLAINTEXT-protocol listener), broker 2 with PLAINTEXT only, PLAINTEXT between brokers.
``__consumer_offsets`` and ``__transaction_state`` have two partitions of one replica each, so
each broker coordinates the keys of one partition. Asked on broker 1 (raw requests, v3 single
key and v4 batched, key types group and transaction):

* on EXTERNAL for a key broker 2 coordinates: COORDINATOR_NOT_AVAILABLE, node -1, host "",
  port -1 (broker 2 has no EXTERNAL endpoint; its PLAINTEXT port is not told to a client of
  EXTERNAL);
* on PLAINTEXT for the same key: broker 2's PLAINTEXT address;
* on EXTERNAL for a key broker 1 coordinates: broker 1's EXTERNAL address.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from tests.broker.wire import Wire, req

from odradek.cluster.zookeeper import ZooKeeperServer
from odradek.coordinator.records import partition_for

from .harness import Cluster

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
PARTITIONS = 2
GROUP, TRANSACTION = 0, 1


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    settings: dict[str, object] = {
        "inter.broker.listener.name": "PLAINTEXT",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": PARTITIONS,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": PARTITIONS,
    }
    c = Cluster(zookeeper, Path(tmp_path_factory.mktemp("fc-listeners")), 2, settings)
    c.brokers[1].settings.update(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
        }
    )
    try:
        c.start()
        yield c
    finally:
        c.close()


def _find(port: int, version: int, key: str, key_type: int) -> tuple[int, int, str, int]:
    """(error code, node id, host, port) of one FindCoordinator ``version`` sent to
    127.0.0.1:``port``."""
    with Wire(f"127.0.0.1:{port}") as wire:
        if version >= 4:
            answer: Any = wire.call(req(10, version, key_type=key_type, coordinator_keys=(key,)))
            (c,) = answer.coordinators
            assert c.key == key
        else:
            c = wire.call(req(10, version, key=key, key_type=key_type))
    return int(c.error_code), int(c.node_id), str(c.host), int(c.port)


def _wait_found(port: int, version: int, key: str, key_type: int) -> tuple[int, str, int]:
    """(node id, host, port) of the first answer without an error, asked again (bounded) while
    the internal topic is created and its partitions elect and load."""
    deadline = time.monotonic() + 30
    while True:
        error, node_id, host, found_port = _find(port, version, key, key_type)
        if error == ErrorCode.none:
            return node_id, host, found_port
        assert error in (
            ErrorCode.coordinator_not_available,
            ErrorCode.coordinator_load_in_progress,
        ), error
        assert time.monotonic() < deadline, f"no coordinator for {key!r}: error {error}"
        time.sleep(0.1)


def _leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    """partition -> leader of ``topic``, once both partitions have one (broker 1's view)."""
    md = cluster.wait_metadata(
        lambda md: (
            sorted(p.leader_id for p in cluster.partitions(md, topic).values() if p.leader_id >= 0)
            == [1, 2]
        ),
        broker_id=1,
    )
    return {i: int(p.leader_id) for i, p in cluster.partitions(md, topic).items()}


def _key_led_by(leaders: dict[int, int], broker: int, prefix: str) -> str:
    """A key whose partition (``partition_for``, two partitions) ``broker`` leads."""
    for n in range(1000):
        key = f"{prefix}-{n}"
        if leaders[partition_for(key, PARTITIONS)] == broker:
            return key
    raise AssertionError(f"no key for broker {broker} in {leaders}")


@pytest.mark.parametrize(("key_type", "topic"), [(GROUP, OFFSETS), (TRANSACTION, TXN_STATE)])
def test_coordinator_without_the_request_listener_is_not_available(
    cluster: Cluster, zookeeper: ZooKeeperServer, key_type: int, topic: str
) -> None:
    ports = cluster.listener_ports()
    assert set(ports[1]) == {"PLAINTEXT", "EXTERNAL"} and set(ports[2]) == {"PLAINTEXT"}
    plaintext_1, external_1, plaintext_2 = (
        ports[1]["PLAINTEXT"],
        ports[1]["EXTERNAL"],
        ports[2]["PLAINTEXT"],
    )
    assert cluster.brokers[1].port == plaintext_1 and cluster.brokers[2].port == plaintext_2

    # the first lookup creates the internal topic; each broker leads one of its two partitions
    _wait_found(plaintext_1, 3, "first", key_type)
    leaders = _leaders(cluster, topic)
    on_2 = _key_led_by(leaders, 2, "on-2")
    on_1 = _key_led_by(leaders, 1, "on-1")

    for version in (3, 4):
        # PLAINTEXT: broker 2's PLAINTEXT address (once broker 1 knows it as the leader)
        assert _wait_found(plaintext_1, version, on_2, key_type) == (2, "127.0.0.1", plaintext_2)
        # EXTERNAL: broker 2 has no such endpoint, and its PLAINTEXT port is not told
        assert _find(external_1, version, on_2, key_type) == (
            ErrorCode.coordinator_not_available,
            -1,
            "",
            -1,
        ), version
        # EXTERNAL, coordinated by broker 1 itself: its EXTERNAL address
        assert _wait_found(external_1, version, on_1, key_type) == (1, "127.0.0.1", external_1)
