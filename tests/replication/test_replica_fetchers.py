"""``num.replica.fetchers`` between real broker processes (broker.id 1..3, no ZooKeeper,
driven by LeaderAndIsr frames): a follower copies a leader's partitions with that many
fetchers, each its own connection, and every partition is replicated."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psutil
import pytest

from odradek.broker.replica_fetcher import fetcher_id
from odradek.testing.process import BrokerProcess

from .controller import NONE, Controller, address, batch, brokers, produce

pytestmark = pytest.mark.timeout(120)

FETCHERS = 2
PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[int, BrokerProcess]]:
    settings = {
        "min.insync.replicas": 3,
        "replica.fetch.backoff.ms": 100,
        "num.replica.fetchers": FETCHERS,
    }
    with brokers(3, settings) as procs:
        yield procs


def connections_to(follower: BrokerProcess, leader: BrokerProcess) -> list[int]:
    """The local ports of the follower process's established TCP connections to the leader."""
    assert follower.pid is not None
    host, port = address(leader)
    return [
        c.laddr.port
        for c in psutil.Process(follower.pid).net_connections(kind="tcp")
        if c.status == psutil.CONN_ESTABLISHED and c.raddr and tuple(c.raddr) == (host, port)
    ]


def accepted_from(leader: BrokerProcess, ports: list[int]) -> int:
    """How many of the leader process's established connections come from ``ports``."""
    assert leader.pid is not None
    _host, port = address(leader)
    return sum(
        1
        for c in psutil.Process(leader.pid).net_connections(kind="tcp")
        if c.status == psutil.CONN_ESTABLISHED
        and c.laddr.port == port
        and c.raddr
        and c.raddr.port in ports
    )


def test_followers_fetch_every_partition_with_two_connections_to_the_leader(
    cluster: dict[int, BrokerProcess],
) -> None:
    topic = f"f-{uuid.uuid4().hex[:8]}"
    # consecutive partitions alternate between the two fetchers
    assert {fetcher_id(topic, p, FETCHERS) for p in range(PARTITIONS)} == {0, 1}
    controller = Controller(cluster)
    for p in range(PARTITIONS):
        controller.elect(topic, p, leader=1, leader_epoch=0, isr=[1, 2, 3], replicas=[1, 2, 3])
    # acks=all with min.insync.replicas=3: each answer says both followers fetched the batch
    for p in range(PARTITIONS):
        assert produce(cluster[1], topic, batch(b"v%d" % p), partition=p) == (NONE, 0)
        assert produce(cluster[1], topic, batch(b"w%d" % p), partition=p) == (NONE, 1)
    for follower in (2, 3):
        ports = connections_to(cluster[follower], cluster[1])
        assert len(ports) == FETCHERS, (follower, ports)
        assert accepted_from(cluster[1], ports) == FETCHERS
    # followers fetch from the leader only
    assert connections_to(cluster[2], cluster[3]) == []
    assert connections_to(cluster[3], cluster[2]) == []
