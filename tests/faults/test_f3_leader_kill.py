"""F3: an idempotent acks=all confluent-kafka producer sends without pause while the leader of
a partition is SIGKILLed and restarted, round after round. The checker reads every partition
back: 0 lost, 0 moved, 0 duplicated, 0 reordered; and the three replicas of every partition end
with the same records at the same offsets.

Default run: one kill. ``@pytest.mark.slow`` with ODRADEK_FAULT_SECONDS=N (and ODRADEK_SLOW=1):
a kill every few seconds for N seconds (120 by default, at most 60 rounds).
"""

from __future__ import annotations

import time

import pytest

from cluster.harness import SLOW, Cluster
from odradek.testing.helpers import create_topic, wait_until

from .harness import (
    Workload,
    check_workload,
    fault_seconds,
    leader,
    wait_full_isr,
)

pytestmark = pytest.mark.interop


def run_f3(c: Cluster, topic: str, seconds: float, max_rounds: int) -> tuple[int, int]:
    """-> (rounds, acknowledged records)."""
    create_topic(c, topic, 3, {"min.insync.replicas": "2"}, replication_factor=3, timeout=30)
    wait_full_isr(c, topic, 3)
    work = Workload(c.bootstrap_servers, topic, 3).start()
    started = time.monotonic()
    rounds = 0
    try:
        while rounds < max_rounds and (rounds == 0 or time.monotonic() - started < seconds):
            partition = rounds % 3
            victim = leader(c, topic, partition)
            wait_until(
                lambda p=partition: work.acks_since(time.monotonic() - 1.0, p) > 0,
                timeout=30,
                what="acknowledgements before the kill",
            )
            c.brokers[victim].kill()
            rounds += 1
            c.wait_metadata(
                lambda md, v=victim, p=partition: (
                    c.partitions(md, topic)[p].leader_id not in (-1, v)
                ),
                timeout=60,
            )
            elected = time.monotonic()
            # an acknowledgement is handed to the producer's callback some time after it came,
            # so only one after the election is surely the new leader's
            wait_until(
                lambda t=elected, p=partition: work.acks_since(t, p) > 0,
                timeout=60,
                what=f"round {rounds}: an acknowledgement on partition {partition} from the leader "
                f"after broker {victim}",
            )
            c.brokers[victim].start()
            wait_full_isr(c, topic, 3, timeout=60)
    finally:
        work.stop()
    assert work.acks_since(started, 0) > 0
    result = check_workload(c, work, topic, 3, f"F3 {topic}: {rounds} leader kills")
    return rounds, result.acked


@pytest.mark.timeout(240)
def test_f3_leader_sigkill_once(faults_cluster: Cluster) -> None:
    rounds, acked = run_f3(faults_cluster, "f3-short", seconds=0, max_rounds=1)
    assert rounds == 1 and acked > 0


@pytest.mark.slow
@SLOW
@pytest.mark.timeout(3600)
def test_f3_leader_sigkill_every_few_seconds(faults_cluster: Cluster) -> None:
    seconds = fault_seconds(120)
    rounds, _ = run_f3(faults_cluster, "f3-long", seconds=seconds, max_rounds=60)
    assert rounds >= 2, f"only {rounds} rounds in {seconds} s"
