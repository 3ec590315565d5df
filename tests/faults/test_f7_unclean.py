"""F7, the control run: a checker that never fails proves nothing.

A partition with replicas [1, 2] and ``unclean.leader.election.enable=true``: records both
replicas have; then broker 2 is SIGKILLed, broker 1 leads alone (ISR [1], min.insync.replicas
1) and acknowledges more records (acks=1); then broker 1 is SIGKILLed and the stale broker 2
comes back: the only live replica, outside the ISR, it is elected uncleanly. The records only
broker 1 had are gone: the checker must report exactly them as lost, and after broker 1 comes
back it truncates them too (the replicas agree again, on the smaller log).

Default run: one round of 20 + 20 records. ``@pytest.mark.slow`` with ODRADEK_SLOW=1: 500 + 500.
"""

from __future__ import annotations

import pytest

from cluster.checker import Ack, check
from cluster.harness import SLOW, Cluster, read_back
from odradek.testing.helpers import create_topic

from .harness import Workload, wait_replicas_agree

pytestmark = pytest.mark.interop


def run_f7(c: Cluster, topic: str, n: int) -> None:
    create_topic(
        c,
        topic,
        configs={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
        assignments=[[1, 2]],
        timeout=30,
    )
    c.wait_metadata(lambda md: sorted(c.partitions(md, topic)[0].isr_nodes) == [1, 2])
    work = Workload(c.bootstrap_servers, topic, 1, **{"enable.idempotence": False, "acks": "1"})
    work.produce(n, "both")
    work.stop(30)
    wait_replicas_agree(c, topic, 1, [1, 2])  # broker 2 has all of them
    c.brokers[2].kill()
    c.wait_metadata(lambda md: c.partitions(md, topic)[0].isr_nodes == (1,), broker_id=1)
    work = Workload(c.bootstrap_servers, topic, 1, **{"enable.idempotence": False, "acks": "1"})
    work.produce(n, "only-on-1")
    work.stop(30)
    assert not work.errors, work.errors[:5]
    only_on_1 = list(work.acks)
    c.brokers[1].kill()
    c.brokers[2].start()  # the only live replica, not in the ISR: an unclean election
    c.wait_metadata(lambda md: c.partitions(md, topic)[0].leader_id == 2, timeout=60, broker_id=2)
    c.brokers[1].start()
    c.wait_metadata(lambda md: sorted(c.partitions(md, topic)[0].isr_nodes) == [1, 2], timeout=60)
    log = read_back(c.bootstrap_servers, topic, 1)
    both = [(0, offset, value) for offset, value in log[0]]
    assert [v for _, _, v in both] == [b"both-%d" % i for i in range(n)]
    acks = [Ack(p, o, v) for p, o, v in both] + only_on_1
    result = check(acks, log)
    print(
        f"F7 {topic}: checker: {result.summary()}"
    )  # shown with pytest -s (docs/benchmarks/faults.md)
    assert not result.ok
    assert sorted(result.lost) == sorted(only_on_1), result.summary()
    assert not (result.moved or result.duplicated or result.reordered), result.summary()
    wait_replicas_agree(c, topic, 1, [1, 2])  # broker 1 truncated what only it had


@pytest.mark.timeout(240)
def test_f7_unclean_election_loses_records_and_the_checker_says_so(
    faults_cluster: Cluster,
) -> None:
    run_f7(faults_cluster, "f7-short", 20)


@pytest.mark.slow
@SLOW
@pytest.mark.timeout(600)
def test_f7_unclean_election_many_records(faults_cluster: Cluster) -> None:
    run_f7(faults_cluster, "f7-long", 500)
