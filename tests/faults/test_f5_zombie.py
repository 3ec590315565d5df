"""F5: the leader of a partition is frozen (SIGSTOP) past its ZooKeeper session (3 s), a new
leader is elected, and the old one is thawed (SIGCONT): a zombie that still believes it leads.

Produce requests (acks=all) sent on connections to the zombie while it is frozen are read from
its sockets once it is thawed: the zombie's followers now fetch from the new leader, so its high
watermark cannot move: it acknowledges none of them (raw wire requests, so the answer is
certainly the zombie's). A second confluent-kafka producer knows only the zombie (bootstrap = the
zombie alone, no retries) and sends meanwhile too: whatever it is acknowledged (librdkafka may
have learned the new leader by then) must be in the log where it was acknowledged. Then it learns it was
replaced (its session expired; the controller's LeaderAndIsr), truncates what it appended as a
zombie and follows: it is back in the ISR and its log is the same as the other replicas'.
Meanwhile the idempotent workload producer goes on through the new leader; the checker finds all
its acknowledged records (0 lost, moved, duplicated, reordered).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from broker.wire import Wire, produce_request
from cluster.checker import Ack, check
from cluster.harness import SLOW, Cluster, read_back
from odradek.protocol.records import build_batch
from odradek.testing.helpers import create_topic, wait_until

from .harness import (
    Workload,
    fault_seconds,
    leader,
    sigcont,
    sigstop,
    wait_every_broker_sees,
    wait_full_isr,
    wait_replicas_agree,
)

pytestmark = pytest.mark.interop


def run_f5(c: Cluster, topic: str, rounds: int) -> None:
    create_topic(c, topic, 1, {"min.insync.replicas": "2"}, replication_factor=3, timeout=30)
    wait_full_isr(c, topic, 3)
    work = Workload(c.bootstrap_servers, topic, 1).start()
    pinned_acks: list[Ack] = []
    zombie_answers: list[tuple[int, int]] = []
    try:
        for round_ in range(rounds):
            zombie = leader(c, topic, 0)
            survivor = next(b for b in c.brokers if b != zombie)
            pinned = Producer(
                {
                    "bootstrap.servers": c.brokers[zombie].bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": False,
                    "retries": 0,
                    "linger.ms": 0,
                    "request.timeout.ms": 5000,
                    "message.timeout.ms": 10000,
                }
            )
            warm: list[object] = []
            pinned.produce(
                topic,
                b"warm-%d" % round_,
                partition=0,
                on_delivery=lambda e, m, w=warm: w.append(e),
            )
            assert pinned.flush(30) == 0 and warm == [None], f"warm-up: {warm}"

            def on_delivery(err: object, msg: object) -> None:
                if err is None:
                    m: Any = msg
                    pinned_acks.append(Ack(m.partition(), m.offset(), m.value()))

            wires = [Wire(c.brokers[zombie].bootstrap_servers, timeout=60) for _ in range(3)]
            sigstop(c, zombie)
            try:
                elected = c.wait_metadata(
                    lambda md, z=zombie: c.partitions(md, topic)[0].leader_id not in (-1, z),
                    timeout=60,
                    broker_id=survivor,
                )
                new_epoch = c.partitions(elected, topic)[0].leader_epoch
                for i in range(20):
                    pinned.produce(
                        topic, b"zombie-%d-%d" % (round_, i), partition=0, on_delivery=on_delivery
                    )
                sent = [
                    w.send(
                        produce_request(
                            topic,
                            0,
                            build_batch([(None, b"raw-%d-%d" % (round_, i), (), None)]),
                            acks=-1,
                            timeout_ms=5000,
                        )
                    )
                    for i, w in enumerate(wires)
                ]
                pinned.poll(0.2)  # hands them to the socket of the frozen zombie
            finally:
                sigcont(c, zombie)
            for w, correlation_id in zip(wires, sent, strict=True):
                r = w.receive(produce_request(topic, 0, None, acks=-1), correlation_id)
                part = r.responses[0].partition_responses[0]
                zombie_answers.append((int(part.error_code), int(part.base_offset)))
                w.close()
            assert pinned.flush(60) == 0
            thawed = time.monotonic()
            # the zombie truncates and follows the new leader
            # asked of the survivor: the thawed zombie may still answer with its frozen view
            # (itself the leader, the ISR full)
            back = wait_full_isr(c, topic, 3, timeout=60, ask=survivor)
            # the zombie did not resume as leader: if it leads now, a later election made it so
            # (auto.leader.rebalance moves leadership back to it, the preferred replica, once
            # it is in the ISR again), with a newer leader epoch
            now = c.partitions(back, topic)[0]
            assert now.leader_id != zombie or now.leader_epoch > new_epoch, (now, new_epoch)
            # and the zombie itself knows it: a client bootstrapping from it is sent on to the
            # leader (the checker's read-back too)
            wait_every_broker_sees(c, topic, 3, {0: new_epoch}, timeout=60)
            wait_until(
                lambda t=thawed: work.acks_since(t, 0) > 0,
                timeout=30,
                what="the workload acknowledged after the thaw",
            )
    finally:
        work.stop()
    assert len(zombie_answers) == 3 * rounds
    assert all(code != 0 for code, _ in zombie_answers), (
        f"the zombie acknowledged acks=all records: (error code, base offset) {zombie_answers}"
    )
    assert not work.errors, work.errors[:5]
    log = read_back(c.bootstrap_servers, topic, 1)
    result = check(work.acks + pinned_acks, log)
    print(
        f"F5 {topic}: {rounds} zombies, their answers (error code, base offset) {zombie_answers}; checker: {result.summary()}"
    )  # shown with pytest -s (docs/benchmarks/faults.md)
    assert result.ok, result.summary()
    assert result.acked == work.sent + len(pinned_acks)
    wait_replicas_agree(c, topic, 1, [1, 2, 3])


@pytest.mark.timeout(240)
def test_f5_frozen_leader_comes_back_as_a_follower(faults_cluster: Cluster) -> None:
    run_f5(faults_cluster, "f5-short", rounds=1)


@pytest.mark.slow
@SLOW
@pytest.mark.timeout(3600)
def test_f5_frozen_leader_repeatedly(faults_cluster: Cluster) -> None:
    run_f5(faults_cluster, "f5-long", rounds=max(2, int(fault_seconds(120) // 20)))
