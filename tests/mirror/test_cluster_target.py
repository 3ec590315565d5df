"""A three-broker odradek cluster (on ZooKeeper) as the target, with MM2's default replication
factors (2 for remote topics, 3 for the internal ones): exactly once across a SIGKILL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cluster.conftest import Cluster, running_zookeeper
from odradek.client import Admin, NewTopic
from odradek.testing.process import BrokerProcess

from .conftest import SETTINGS, MirrorProcess, end_offsets, read_topic, wait_until
from .test_exactly_once import _produce_paced

TOTAL = 20_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    for zk in running_zookeeper(tmp_path_factory, "mirror-zookeeper"):
        c = Cluster(zk, Path(tmp_path_factory.mktemp("mirror-cluster")), 3)
        try:
            c.start()
            c.wait_metadata(lambda md: len(md.brokers) == 3 and md.controller_id > 0)
            yield c
        finally:
            c.close()


@pytest.fixture(scope="module")
def source() -> Iterator[BrokerProcess]:
    with BrokerProcess(SETTINGS) as a:
        yield a


def test_exactly_once_into_a_three_broker_cluster(source: BrokerProcess, cluster: Cluster,
                                                  mirrors: Callable[..., MirrorProcess]) -> None:
    with Admin({"bootstrap.servers": source.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("c3.events", 3, 1)])
    target = cluster.bootstrap_servers
    m = mirrors("\n".join([
        "clusters = A, B", f"A.bootstrap.servers = {source.bootstrap_servers}", f"B.bootstrap.servers = {target}",
        "A->B.enabled = true", r"A->B.topics = c3\..*", "B.exactly.once.source.support = enabled",
        "offset-syncs.topic.replication.factor = 1",  # the source has one broker
    ]) + "\n")
    m.start()
    done = threading.Event()
    producer = threading.Thread(target=_produce_paced, args=(source.bootstrap_servers, "c3.events", TOTAL, 4.0, done), daemon=True)
    producer.start()
    try:
        wait_until(lambda: sum(end_offsets(target, "A.c3.events").values()) >= 3000, 60, "3000 records on B", m.log)
        m.kill()
        m.start()
    finally:
        producer.join(60)
    assert done.is_set()
    wait_until(lambda: sum(len(v) for v in read_topic(target, "A.c3.events", read_committed=True).values()) >= TOTAL,
               60, f"{TOTAL} committed records on B", m.log)
    with Admin({"bootstrap.servers": target}) as admin:
        topics = admin.list_topics()
    assert {len(p.replicas) for p in topics["A.c3.events"].partitions} == {2}  # replication.factor
    assert {len(p.replicas) for p in topics["heartbeats"].partitions} == {3}
    src = read_topic(source.bootstrap_servers, "c3.events")
    dst = read_topic(target, "A.c3.events", read_committed=True)
    for p in range(3):
        assert [(r.key, r.value, r.headers) for r in dst[p]] == [(r.key, r.value, r.headers) for r in src[p]], p
    assert m.terminate() == 0
