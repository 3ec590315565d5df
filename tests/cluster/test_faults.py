"""Long fault runs on the shared three-broker cluster (``@pytest.mark.slow``, ODRADEK_SLOW=1):

* **F3**: an idempotent acks=all producer while the leader of partition 0 is SIGKILLed and
  restarted several times: 0 lost, 0 duplicated, 0 reordered;
* **F7**: with ``unclean.leader.election.enable=true`` a replica outside the ISR becomes leader
  and the records only the old leader had are gone: the checker reports them (a control run
  on real data: the checker can fail);
* **controlled shutdown** of each broker in turn under load: the producer sees no
  non-retriable error and loses nothing.
"""

from __future__ import annotations

import time

import pytest

from faults.harness import Workload, check_workload, wait_full_isr
from odradek.testing.helpers import create_topic

from .checker import check
from .harness import SLOW, Cluster, read_back

pytestmark = [pytest.mark.interop, pytest.mark.slow, SLOW]


def test_f3_repeated_leader_sigkill(cluster3: Cluster) -> None:
    topic = "f3"
    create_topic(cluster3, topic, 3, {"min.insync.replicas": "2"}, replication_factor=3, timeout=30)
    cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, topic)) == 3)
    rec = Workload(cluster3.bootstrap_servers, topic, 3)
    for round_ in range(4):
        rec.produce(200, f"r{round_}")
        md = cluster3.metadata()
        victim = cluster3.partitions(md, topic)[0].leader_id
        cluster3.brokers[victim].kill()
        cluster3.wait_metadata(
            lambda md, v=victim: cluster3.partitions(md, topic)[0].leader_id not in (-1, v)
        )
        rec.produce(200, f"r{round_}-after")
        rec.flush(120)
        cluster3.brokers[victim].start()
        wait_full_isr(cluster3, topic, 3, timeout=60)
    result = check_workload(cluster3, rec, topic, 3, f"F3 {topic}: 4 leader kills")
    assert result.acked == 1600


def test_f7_unclean_election_loses_records_and_the_checker_says_so(cluster3: Cluster) -> None:
    topic = "f7"
    create_topic(
        cluster3,
        topic,
        configs={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
        assignments=[[1, 2]],
        timeout=30,
    )
    cluster3.wait_metadata(lambda md: sorted(cluster3.partitions(md, topic)[0].isr_nodes) == [1, 2])
    rec = Workload(cluster3.bootstrap_servers, topic, 1, **{"enable.idempotence": False})
    rec.produce(50, "both")
    rec.flush(30)
    cluster3.brokers[2].kill()  # the follower goes away; broker 1 leads alone
    cluster3.wait_metadata(lambda md: cluster3.partitions(md, topic)[0].isr_nodes == (1,))
    rec.produce(50, "only-on-1")
    rec.flush(30)
    cluster3.brokers[1].kill()
    cluster3.brokers[2].start()  # the only live replica, outside the ISR: unclean election
    cluster3.wait_metadata(lambda md: cluster3.partitions(md, topic)[0].leader_id == 2, timeout=30)
    cluster3.brokers[1].start()
    cluster3.wait_metadata(
        lambda md: sorted(cluster3.partitions(md, topic)[0].isr_nodes) == [1, 2], timeout=60
    )
    log = read_back(cluster3.bootstrap_servers, topic, 1)
    result = check(rec.acks, log)
    assert not result.ok
    assert {a.value.split(b"-")[0] for a in result.lost} == {b"only"}
    assert len(result.lost) == 50, result.summary()


def test_controlled_shutdown_of_each_broker_under_load(cluster3: Cluster) -> None:
    topic = "rolling"
    create_topic(cluster3, topic, 3, {"min.insync.replicas": "2"}, replication_factor=3, timeout=30)
    cluster3.wait_metadata(lambda md: len(cluster3.partitions(md, topic)) == 3)
    rec = Workload(cluster3.bootstrap_servers, topic, 3)
    for broker_id in sorted(cluster3.brokers):
        rec.produce(300, f"before-{broker_id}")
        started = time.monotonic()
        cluster3.brokers[broker_id].stop()
        took = time.monotonic() - started
        assert took < 10, f"stopping broker {broker_id} took {took:.1f} s"
        rec.produce(300, f"without-{broker_id}")
        rec.flush(60)
        cluster3.brokers[broker_id].start()
        wait_full_isr(cluster3, topic, 3, timeout=60)
    check_workload(cluster3, rec, topic, 3, f"{topic}: a controlled shutdown of each broker")
