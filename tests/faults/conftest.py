"""``faults_cluster``: three real broker processes on a real ZooKeeper (tests/cluster's
``Cluster``), shared by the fault tests of a session, with a ZooKeeper session of 3 s (so a
SIGSTOPped leader's session expires quickly) and a replica lag limit of 3 s.

When cluster mode does not work (the brokers do not start with ``zookeeper.connect``, or never
agree on a controller), the fault tests are skipped with what failed: they test faults of a
working cluster. A test that stops, kills or freezes brokers leaves them so; the fixture gets
every broker running (and thawed) and registered again for the next test. Where network
partitions can be made (root, iptables, cgroup v2), each broker runs in a cgroup of its own
(harness.run_in_cgroup), which test_f6_partition's iptables rule matches.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.harness import Cluster
from odradek.cluster.zookeeper import ZooKeeperServer, zookeeper_available
from odradek.testing.process import BrokerStartError

from .harness import network_faults_missing, remove_cgroup, run_in_cgroup

_broken: list[str] = []


@pytest.fixture(scope="session")
def _faults_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    zk = ZooKeeperServer(Path(tmp_path_factory.mktemp("faults-zookeeper")))
    zk.start()
    c = Cluster(zk, tmp_path_factory.mktemp("faults"), 3)
    cgroups: list[str] = []
    if network_faults_missing() is None:
        scripts = tmp_path_factory.mktemp("cgroups")
        for i, b in c.brokers.items():
            cgroups.append(f"odradek-faults-{os.getpid()}-broker-{i}")
            run_in_cgroup(b, cgroups[-1], scripts)
    try:
        try:
            c.start()
        except (BrokerStartError, AssertionError) as exc:
            text = " ".join(str(exc).split())
            shown = text if len(text) < 1500 else f"{text[:200]} ... {text[-1200:]}"
            _broken.append(f"cluster mode is not functional: {shown}")
        yield c
    finally:
        c.close()
        zk.stop()
        for name in cgroups:
            remove_cgroup(name)


@pytest.fixture
def faults_cluster(_faults_cluster: Cluster) -> Cluster:
    if _broken:
        pytest.skip(_broken[0])
    c = _faults_cluster
    for b in c.brokers.values():
        if b.running and b.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(b.pid, signal.SIGCONT)
        else:
            b.start()
    c.wait_metadata(lambda md: len(md.brokers) == len(c.brokers) and md.controller_id > 0)
    return c
