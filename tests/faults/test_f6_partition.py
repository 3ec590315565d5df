"""F6: the leader of a partition is cut off from the network, then the partition heals.

The cut: every broker runs in a cgroup of its own (tests/faults/conftest.py), and one iptables
rule drops every packet the leader's sockets send (``OUTPUT -m cgroup --path ... -j DROP``): it reaches neither
ZooKeeper nor its followers nor its clients, not even to acknowledge their TCP segments, while
what they send still arrives. So it goes on running as the leader it was: its ZooKeeper session
expires, the controller elects another leader from the ISR, and the idempotent acks=all workload
producer goes on through it. A Produce request (acks=all) sent to the cut-off leader on a
connection it had reaches it, but is never acknowledged: its answer, once the cut heals, is an
error. Then it learns it was replaced, truncates and follows: back in the ISR, the same log as
the other replicas. Until the controller's requests reach it, it still leads as it did (as a
Kafka broker does): the checker reads once every broker, itself too, knows the new leader. The
checker: 0 acknowledged records lost, moved, duplicated or reordered.

Only the broker's own packets are dropped (a rule left behind by a killed run matches a cgroup
without processes). Needs root, iptables with the cgroup match and cgroup v2
(/sys/fs/cgroup/unified or /sys/fs/cgroup); skipped otherwise, saying which is missing.

Default run: one cut of the leader. ``@pytest.mark.slow`` with ODRADEK_SLOW=1 and
ODRADEK_FAULT_SECONDS: cuts one after another for that long.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator

import pytest

from broker.wire import Wire, produce_request
from cluster.harness import SLOW, Cluster
from odradek.protocol.records import build_batch
from odradek.testing.helpers import create_topic, wait_until
from odradek.testing.process import BrokerProcess

from .harness import (
    Workload,
    broker_cgroup,
    check_workload,
    fault_seconds,
    leader,
    network_faults_missing,
    wait_every_broker_sees,
    wait_full_isr,
)

pytestmark = pytest.mark.interop


@contextlib.contextmanager
def cut_off(broker: BrokerProcess) -> Iterator[None]:
    """Drop every packet the broker's process sends, until the block ends."""
    group = broker_cgroup(broker)
    assert group is not None, "the broker was not started in a cgroup of its own"
    rule = ["OUTPUT", "-m", "cgroup", "--path", group, "-j", "DROP"]
    subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True, timeout=30)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True, capture_output=True, timeout=30)


def run_f6(c: Cluster, topic: str, seconds: float, max_rounds: int) -> int:
    create_topic(c, topic, 1, {"min.insync.replicas": "2"}, replication_factor=3, timeout=30)
    wait_full_isr(c, topic, 3)
    work = Workload(c.bootstrap_servers, topic, 1).start()
    answers: list[tuple[int, int]] = []
    started = time.monotonic()
    rounds = 0
    try:
        while rounds < max_rounds and (rounds == 0 or time.monotonic() - started < seconds):
            rounds += 1
            victim = leader(c, topic, 0)
            survivor = next(b for b in c.brokers if b != victim)
            wire = Wire(c.brokers[victim].bootstrap_servers, timeout=90)
            with cut_off(c.brokers[victim]):
                correlation_id = wire.send(
                    produce_request(
                        topic,
                        0,
                        build_batch([(None, b"cut-off-%d" % rounds, (), None)]),
                        acks=-1,
                        timeout_ms=5000,
                    )
                )
                md = c.wait_metadata(
                    lambda md, v=victim: (
                        c.partitions(md, topic)[0].leader_id not in (-1, v)
                        and v not in c.partitions(md, topic)[0].isr_nodes
                    ),
                    timeout=60,
                    broker_id=survivor,
                )
                new_epoch = c.partitions(md, topic)[0].leader_epoch
                elected = time.monotonic()
                wait_until(
                    lambda t=elected: work.acks_since(t, 0) > 0,
                    timeout=60,
                    what="the workload acknowledged through the new leader",
                )
            r = wire.receive(produce_request(topic, 0, None, acks=-1), correlation_id)
            wire.close()
            part = r.responses[0].partition_responses[0]
            answers.append((int(part.error_code), int(part.base_offset)))
            # every broker, the healed one too: until the controller's requests reach it, it
            # still leads with its view from before the cut (a full ISR, its old high watermark)
            wait_every_broker_sees(c, topic, 3, {0: new_epoch}, timeout=60)
    finally:
        work.stop()
    assert all(code != 0 for code, _ in answers), (
        f"the cut-off leader acknowledged acks=all records: (error code, base offset) {answers}"
    )
    check_workload(
        c, work, topic, 1, f"F6 {topic}: {rounds} cuts, the cut-off leader's answers {answers}"
    )
    return rounds


@pytest.fixture
def network_faults() -> None:
    missing = network_faults_missing()
    if missing:
        pytest.skip(missing)


@pytest.mark.timeout(240)
def test_f6_leader_cut_off_by_a_network_partition(
    network_faults: None, faults_cluster: Cluster
) -> None:
    assert run_f6(faults_cluster, "f6-short", seconds=0, max_rounds=1) == 1


@pytest.mark.slow
@SLOW
@pytest.mark.timeout(3600)
def test_f6_repeated_network_partitions(network_faults: None, faults_cluster: Cluster) -> None:
    assert run_f6(faults_cluster, "f6-long", seconds=fault_seconds(120), max_rounds=30) >= 2
