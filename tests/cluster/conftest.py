"""Fixtures: ``zookeeper`` (module scope), one real Apache ZooKeeper from Debian's package.

It listens on 127.0.0.1 on a free port with a tick of 200 ms, so sessions may be as short as
400 ms. ``zk_connect`` is its connect string. A test that stops the server restarts it before
it returns. Tests are skipped when the ``zookeeper`` package or java is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.cluster.zookeeper import ZooKeeperServer, zookeeper_available


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    server = ZooKeeperServer(Path(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect_string
