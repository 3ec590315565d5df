"""Fixtures: ``zookeeper`` (module scope), one real Apache ZooKeeper from Debian's package.

It listens on 127.0.0.1 on a free port with a tick of 200 ms, so sessions may be as short as
400 ms. ``zk_connect`` is its connect string. ``cluster3``: three real broker processes on it
(``Cluster``, under its own chroot), shared by the session's tests. A test that stops the server restarts it before
it returns. Tests are skipped when the ``zookeeper`` package or java is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.cluster.zookeeper import ZooKeeperServer

from .harness import Cluster, running_zookeeper


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect_string


@pytest.fixture(scope="session")
def cluster_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """The shared cluster's ZooKeeper. test_zookeeper_restart.py stops it (or cuts it off) while
    the cluster serves, and has it back, with every broker registered, before it returns."""
    yield from running_zookeeper(tmp_path_factory, "cluster-zookeeper")


@pytest.fixture(scope="session")
def _shared_cluster(
    cluster_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    c = Cluster(cluster_zookeeper, tmp_path_factory.mktemp("cluster"), 3)
    try:
        c.start()
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster3(_shared_cluster: Cluster) -> Cluster:
    """Three brokers shared by the session's tests (starting them costs ~10-30 s here): a test
    may stop or kill brokers; the next one gets them all running and registered again."""
    c = _shared_cluster
    for b in c.brokers.values():
        if not b.running:
            b.start()
    c.wait_metadata(lambda md: len(md.brokers) == len(c.brokers) and md.controller_id > 0)
    return c
