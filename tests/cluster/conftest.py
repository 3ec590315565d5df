"""Fixtures: ``zookeeper`` (module scope), one real Apache ZooKeeper from Debian's package.

It listens on 127.0.0.1 on a free port with a tick of 200 ms, so sessions may be as short as
400 ms. ``zk_connect`` is its connect string. ``cluster3``: three real broker processes on it
(``Cluster``, under its own chroot), shared by the session's tests. A test that stops the server restarts it before
it returns. Tests are skipped when the ``zookeeper`` package or java is missing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.cluster.zookeeper import ZooKeeperServer, zookeeper_available


def running_zookeeper(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper fixture's body (``yield from``): one server in a fresh directory ``name``,
    stopped at teardown; the test is skipped when the ``zookeeper`` package or java is missing."""
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    with ZooKeeperServer(Path(tmp_path_factory.mktemp(name))) as server:
        yield server


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect_string


# -- a cluster of real broker processes on the module's ZooKeeper ---------------------------------


class Cluster:
    """N ``odradek broker`` processes (broker.id 1..N) on ``zookeeper`` under their own chroot.

    ``metadata()`` is a Metadata v12 answer from any live broker; ``wait_metadata(pred)`` asks
    again (bounded) until ``pred(metadata)`` holds: the cluster announces nothing to its clients,
    so asking is the event."""

    def __init__(
        self,
        zookeeper: ZooKeeperServer,
        tmp: Path,
        n: int = 3,
        settings: dict[str, object] | None = None,
    ) -> None:
        import uuid

        from odradek.testing.process import BrokerProcess

        self.zookeeper = zookeeper
        self.chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, n + 1):
            self.brokers[i] = BrokerProcess(
                {
                    "broker.id": i,
                    "zookeeper.connect": zookeeper.connect_string + self.chroot,
                    "zookeeper.session.timeout.ms": 3000,
                    "replica.lag.time.max.ms": 3000,
                    "controlled.shutdown.retry.backoff.ms": 500,
                    "default.replication.factor": min(3, n),
                    "offsets.topic.replication.factor": min(3, n),
                    "group.initial.rebalance.delay.ms": 0,
                    "offsets.topic.num.partitions": 3,
                    "transaction.state.log.replication.factor": min(3, n),
                    "transaction.state.log.min.isr": min(2, n),
                    "transaction.state.log.num.partitions": 3,
                    "leader.imbalance.check.interval.seconds": 2,
                    **(settings or {}),
                },
                data_dir=tmp / f"broker-{i}",
                start_timeout=60,
                log_level="info",
            )

    def start(self) -> Cluster:
        for b in self.brokers.values():
            b.start()
        self.wait_metadata(lambda md: len(md.brokers) == len(self.brokers) and md.controller_id > 0)
        return self

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    def metadata(self, broker_id: int | None = None) -> Any:
        from odradek.cli.cluster import metadata

        if broker_id is not None:
            return metadata(self.brokers[broker_id].bootstrap_servers)
        return metadata(self.bootstrap_servers)

    def wait_metadata(
        self, pred: Callable[[Any], bool], timeout: float = 30.0, broker_id: int | None = None
    ) -> Any:
        deadline = time.monotonic() + timeout
        md = None
        while True:
            try:
                md = self.metadata(broker_id)
                if pred(md):
                    return md
            except (ConnectionError, KeyError):
                pass  # no broker answered, or one that has not had UpdateMetadata yet
            if time.monotonic() > deadline:
                # the brokers' logs first, then (last, where a truncated CI log still shows it)
                # what every running broker answers, in one line each
                raise AssertionError(
                    f"metadata did not get there in {timeout} s: {md}\n{self.logs()}\n"
                    f"{self.views()}"
                )
            time.sleep(0.1)

    def wait_every_broker(
        self,
        pred: Callable[[Any], bool],
        timeout: float = 30.0,
        brokers: Iterable[int] | None = None,
    ) -> dict[int, Any]:
        """``wait_metadata`` asking each broker itself (every broker, or those of ``brokers``):
        the metadata each one answered."""
        ids = list(self.brokers) if brokers is None else list(brokers)
        return {i: self.wait_metadata(pred, timeout=timeout, broker_id=i) for i in ids}

    def views(self) -> str:
        """Each running broker's metadata in one line: the controller, the live brokers and
        every topic's partitions as ``p:leader/isr`` (``[...]`` when it does not answer)."""
        lines = []
        for i, b in self.brokers.items():
            if not b.running:
                lines.append(f"broker {i}: not running")
                continue
            try:
                md = self.metadata(i)
            except (ConnectionError, OSError) as e:
                lines.append(f"broker {i}: [{e}]")
                continue
            topics = " ".join(
                f"{t.name}:"
                + ",".join(
                    f"{p.partition_index}:{p.leader_id}/{list(p.isr_nodes)}"
                    for p in sorted(t.partitions, key=lambda p: p.partition_index)
                )
                for t in sorted(md.topics, key=lambda t: t.name)
                if not t.name.startswith("__")
            )
            brokers = sorted(b.node_id for b in md.brokers)
            lines.append(f"broker {i}: controller {md.controller_id} brokers {brokers} {topics}")
        return "\n".join(lines)

    def partitions(self, md: Any, topic: str) -> dict[int, Any]:
        for t in md.topics:
            if t.name == topic:
                return {p.partition_index: p for p in t.partitions}
        return {}

    def logs(self, limit: int = 3000) -> str:
        return "\n".join(
            f"--- broker {i}:\n{b.stderr_tail(limit)}" for i, b in self.brokers.items()
        )

    def close(self) -> None:
        for b in self.brokers.values():
            with contextlib.suppress(Exception):
                b.kill()
            with contextlib.suppress(Exception):
                b.close()


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


SLOW = pytest.mark.skipif(
    not os.environ.get("ODRADEK_SLOW"),
    reason="a long cluster run: set ODRADEK_SLOW=1 (make test-cluster-slow)",
)
"""With ``@pytest.mark.slow``: run only when ODRADEK_SLOW is set."""
