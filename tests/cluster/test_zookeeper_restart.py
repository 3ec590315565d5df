"""ZooKeeper restarted while the cluster serves (three real brokers, one real ZooKeeper,
confluent-kafka).

Produce and fetch do not need ZooKeeper: a leader appends, its followers fetch, the high
watermark moves and acks=all is answered while ZooKeeper is down. Only metadata changes (ISR
changes, elections, topic admin) wait for it. After the restart the cluster is still a cluster:
the brokers' sessions and the controller's watches are back, so a SIGKILLed leader is replaced
and a topic created afterwards is seen by every broker. The checker (checker.py) finds every
acknowledged record where it was acknowledged.

ZooKeeper keeps sessions in its log and restarts their timers when it starts again, so a
downtime longer than ``zookeeper.session.timeout.ms`` expires no session either: the brokers
keep their registrations (the same broker epochs) unless a broker's reconnection is slower
than its session timeout after ZooKeeper started (seen on a loaded machine: the broker then
registers again with a new epoch, and the test accepts either). The long variant
(``@pytest.mark.slow``) stops ZooKeeper for twice the session timeout.

ZooKeeper running but unreachable (iptables drops every packet to its port) for longer than
the session timeout does expire every session: every broker registers again with a new broker
epoch, a controller is elected with a new controller epoch, and the same checks hold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.zk import KafkaZkClient

from .checker import Ack, check
from .harness import SLOW, Cluster, acks_all_producer, read_back

pytestmark = pytest.mark.interop

PARTITIONS = 3


class StreamingProducer:
    """An idempotent acks=all confluent-kafka producer in its own thread: one record every
    ``interval`` s, round robin over the partitions; every acknowledgement is kept with the
    time it arrived."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.005) -> None:
        self.producer = acks_all_producer(bootstrap)
        self.topic = topic
        self.interval = interval
        self.acks: list[tuple[float, Ack]] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streaming-producer", daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acks.append(
                (time.monotonic(), Ack(msg.partition(), msg.offset(), msg.value()))
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            self.producer.produce(
                self.topic,
                f"r-{self.sent}".encode(),
                partition=self.sent % PARTITIONS,
                on_delivery=self._on_delivery,
            )
            self.sent += 1
            self.producer.poll(self.interval)

    def start(self) -> StreamingProducer:
        self._thread.start()
        return self

    def acked_between(self, start: float, end: float, partition: int | None = None) -> int:
        return sum(
            1
            for t, a in list(self.acks)
            if start <= t <= end and (partition is None or a.partition == partition)
        )

    def wait_acks(self, n: int, after: float, timeout: float, partition: int | None = None) -> float:
        """Wait (bounded) until ``n`` records were acknowledged after ``after``; the time of the
        first of them."""
        deadline = time.monotonic() + timeout
        while True:
            times = [
                t
                for t, a in list(self.acks)
                if t > after and (partition is None or a.partition == partition)
            ]
            if len(times) >= n:
                return min(times)
            assert time.monotonic() < deadline, (
                f"{len(times)} of {n} records acknowledged in {timeout} s; "
                f"errors {self.errors[:5]}"
            )
            time.sleep(0.05)

    def stop(self, timeout: float) -> list[Ack]:
        self._stop.set()
        self._thread.join(10)
        left = self.producer.flush(timeout)
        assert left == 0, f"{left} records not acknowledged in {timeout} s; {self.errors[:5]}"
        return [a for _, a in self.acks]


def _broker_epochs(c: Cluster) -> dict[int, int]:
    """Each registered broker's epoch: the czxid of ``/brokers/ids/<id>``."""
    zk = KafkaZkClient(c.zookeeper.connect_string + c.chroot, session_timeout_ms=6000)
    zk.start()
    try:
        return {b.id: b.epoch for b in zk.get_all_brokers_in_cluster()}
    finally:
        zk.close()


def _controller_epoch(c: Cluster) -> int:
    zk = KafkaZkClient(c.zookeeper.connect_string + c.chroot, session_timeout_ms=6000)
    zk.start()
    try:
        got = zk.get_controller_epoch()
        return -1 if got is None else got[0]
    finally:
        zk.close()


def _create(c: Cluster, topic: NewTopic) -> None:
    """CreateTopics, as a client would do it while brokers re-register: after sessions
    expired, the controller still processes the old registrations' deletions for a moment,
    during which a broker's view has two live brokers and RF 3 is refused with
    INVALID_REPLICATION_FACTOR (as Kafka refuses it); that answer is asked again, bounded
    (20 s), once every broker's metadata shows three brokers again."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    deadline = time.monotonic() + 20
    while True:
        f = admin.create_topics([topic], request_timeout=30)[topic.topic]
        try:
            f.result(timeout=40)
            return
        except Exception as e:
            transient = "INVALID_REPLICATION_FACTOR" in repr(e) and time.monotonic() < deadline
            if not transient:
                raise AssertionError(f"creating {topic.topic} failed: {e!r}\n{c.logs(6000)}") from e
        c.wait_every_broker(lambda md: len(md.brokers) == 3)


def _all_in_sync(c: Cluster, topic: str) -> Any:
    return lambda md: (
        len(c.partitions(md, topic)) == PARTITIONS
        and all(len(p.isr_nodes) == 3 for p in c.partitions(md, topic).values())
    )


def _zookeeper_restart(c: Cluster, producer: StreamingProducer, downtime: float) -> None:
    """Stop ZooKeeper, keep it down for ``downtime`` s (the deliberate sleep), start it again."""
    down = time.monotonic()
    c.zookeeper.stop()
    producer.wait_acks(100, down, max(downtime, 30))
    time.sleep(max(0.0, downtime - (time.monotonic() - down)))
    c.zookeeper.start()


def iptables_missing() -> str | None:
    if os.geteuid() != 0:
        return "making ZooKeeper unreachable needs root (iptables)"
    if shutil.which("iptables") is None:
        return "making ZooKeeper unreachable needs iptables (Debian package iptables)"
    return None


def _zookeeper_unreachable(c: Cluster, producer: StreamingProducer, downtime: float) -> None:
    """ZooKeeper runs on, but for ``downtime`` s every packet to its port is dropped: nobody
    pings, so it expires every session (the rule names ZooKeeper's port only)."""
    rule = ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(c.zookeeper.port), "-j", "DROP"]
    down = time.monotonic()
    subprocess.run(["iptables", "-I", *rule], check=True, timeout=30)
    try:
        producer.wait_acks(100, down, max(downtime, 30))
        time.sleep(max(0.0, downtime - (time.monotonic() - down)))
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True, timeout=30)


def _outage_while_producing(
    c: Cluster,
    topic: str,
    outage: Callable[[Cluster, StreamingProducer, float], None],
    downtime: float,
    *,
    sessions_expire: bool,
) -> None:
    _create(c, NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"}))
    md = c.wait_metadata(_all_in_sync(c, topic))
    controller = md.controller_id
    epochs = _broker_epochs(c)
    controller_epoch = _controller_epoch(c)
    assert sorted(epochs) == [1, 2, 3]

    producer = StreamingProducer(c.bootstrap_servers, topic).start()
    victim = -1
    try:
        producer.wait_acks(100, 0.0, 30)

        # -- ZooKeeper away: acks=all goes on ---------------------------------------------------
        down = time.monotonic()
        outage(c, producer, downtime)
        up = time.monotonic()
        during = producer.acked_between(down, up)
        print(f"ZooKeeper away {up - down:.1f} s: {during} records acknowledged meanwhile")
        assert during >= 100

        # -- ZooKeeper back -------------------------------------------------------------------
        # every broker is registered, in its old session (the same broker epoch) or a new one
        # (a higher epoch), and every broker's metadata shows all three and a controller
        deadline = time.monotonic() + 30
        while True:
            now = _broker_epochs(c)
            renewed = sorted(b for b in now if now[b] > epochs[b])
            registered = sorted(now) == [1, 2, 3] and all(now[b] >= epochs[b] for b in now)
            if registered and (not sessions_expire or renewed == [1, 2, 3]):
                break
            assert time.monotonic() < deadline, f"broker epochs {now}, before {epochs}"
            time.sleep(0.2)
        c.wait_every_broker(lambda md: len(md.brokers) == 3 and md.controller_id > 0)
        print(f"broker epochs {epochs} -> {now}: sessions renewed for brokers {renewed}")
        if sessions_expire:
            assert _controller_epoch(c) > controller_epoch, "a controller is elected again"
        elif not renewed:
            # the sessions outlived the restart (ZooKeeper restarts their timers when it
            # starts): the same controller serves on
            assert _controller_epoch(c) == controller_epoch
            assert c.metadata().controller_id == controller

        # a topic created now is seen, with leaders, by every broker: the controller watches
        _create(c, NewTopic(f"{topic}-after", 2, 3))
        c.wait_every_broker(
            lambda md: len(c.partitions(md, f"{topic}-after")) == 2
            and all(p.leader_id > 0 for p in c.partitions(md, f"{topic}-after").values())
        )

        # a leader SIGKILLed: a new one is elected and the producer goes on. First every
        # partition's ISR must be full again: while the brokers registered one by one, the
        # controller found the others absent and shrank ISRs to the live replicas (as Kafka's
        # does); a leader killed while it is its partition's only in-sync replica leaves the
        # partition without a leader (unclean.leader.election.enable=false), rightly
        isr_then = {p: list(s.isr_nodes) for p, s in c.partitions(c.metadata(), topic).items()}
        waited = time.monotonic()
        md = c.wait_metadata(_all_in_sync(c, topic), timeout=60)
        print(f"ISRs {isr_then}: full again after {time.monotonic() - waited:.1f} s")
        victim = c.partitions(md, topic)[0].leader_id
        killed = time.monotonic()
        c.brokers[victim].kill()
        md = c.wait_metadata(
            lambda md: c.partitions(md, topic)[0].leader_id not in (-1, victim), timeout=30
        )
        elected = time.monotonic()
        first = producer.wait_acks(1, elected, 30, partition=0)
        print(
            f"leader {victim} of {topic}-0 SIGKILLed: leader "
            f"{c.partitions(md, topic)[0].leader_id} elected in {elected - killed:.1f} s, "
            f"first acknowledgement on partition 0 after it {first - killed:.1f} s after the kill"
        )
        producer.wait_acks(100, elected, 30)
    finally:
        acks = producer.stop(60)
    _check_and_restart(c, topic, producer, acks, victim)
    assert len(acks) == producer.sent


def _check_and_restart(
    c: Cluster, topic: str, producer: StreamingProducer, acks: list[Ack], victim: int
) -> None:
    """Every acknowledged record is where it was acknowledged; the killed broker comes back and
    rejoins the ISR."""
    assert not producer.errors, producer.errors[:5]
    result = check(acks, read_back(c.bootstrap_servers, topic, PARTITIONS))
    print(result.summary())
    assert result.ok, result.summary()
    c.brokers[victim].start()
    c.wait_metadata(_all_in_sync(c, topic), timeout=60)


@pytest.mark.timeout(240)
def test_zookeeper_restart_shorter_than_the_session_timeout(cluster3: Cluster) -> None:
    _outage_while_producing(
        cluster3, "zk-restart", _zookeeper_restart, 1.5, sessions_expire=False
    )


@pytest.mark.slow
@SLOW
@pytest.mark.timeout(300)
def test_zookeeper_down_longer_than_the_session_timeout(cluster3: Cluster) -> None:
    # sessions: 3 s; ZooKeeper restarts their timers when it starts, so none expires
    _outage_while_producing(
        cluster3, "zk-restart-long", _zookeeper_restart, 6.0, sessions_expire=False
    )


@pytest.mark.timeout(240)
def test_zookeeper_unreachable_longer_than_the_session_timeout(cluster3: Cluster) -> None:
    if (why := iptables_missing()) is not None:
        pytest.skip(why)
    # sessions: 3 s, ZooKeeper's tick 200 ms: all expired after 5 s
    _outage_while_producing(
        cluster3, "zk-expired", _zookeeper_unreachable, 5.0, sessions_expire=True
    )


@pytest.mark.slow
@SLOW
@pytest.mark.timeout(300)
def test_a_broker_lost_while_zookeeper_is_down_waits_for_zookeeper(cluster3: Cluster) -> None:
    """A broker SIGKILLed while ZooKeeper is down: no leader can be elected and no ISR can
    shrink meanwhile, so acks=all waits on the partitions it was in (all of them, RF 3 on three
    brokers). The leaders' ISR shrinks reach the controller, whose ZooKeeper write fails: it
    resigns. When ZooKeeper is back (after far longer than twice the session timeout) it takes
    the controllership up again, the ISR shrinks and elections go through, and the producer
    goes on: 0 acknowledged records lost."""
    c, topic = cluster3, "zk-down-broker-lost"
    _create(c, NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"}))
    md = c.wait_metadata(_all_in_sync(c, topic))
    victim = next(b for b in (1, 2, 3) if b != md.controller_id)
    producer = StreamingProducer(c.bootstrap_servers, topic).start()
    try:
        producer.wait_acks(100, 0.0, 30)
        down = time.monotonic()
        c.zookeeper.stop()
        producer.wait_acks(100, down, 30)
        killed = time.monotonic()
        c.brokers[victim].kill()
        time.sleep(max(0.0, 12.0 - (time.monotonic() - down)))  # the deliberate downtime
        c.zookeeper.start()
        up = time.monotonic()
        md = c.wait_metadata(
            lambda md: all(
                p.leader_id not in (-1, victim) and victim not in p.isr_nodes
                for p in c.partitions(md, topic).values()
            ),
            timeout=60,
        )
        settled = time.monotonic()
        first = producer.wait_acks(1, settled, 30)
        print(
            f"ZooKeeper away {up - down:.1f} s, broker {victim} killed after "
            f"{killed - down:.1f} s; acknowledged while it was down and ZooKeeper away: "
            f"{producer.acked_between(killed + 1, up)}; leaders without it "
            f"{settled - up:.1f} s after ZooKeeper was back, then acknowledged again after "
            f"{first - settled:.1f} s"
        )
        producer.wait_acks(100, settled, 30)
    finally:
        acks = producer.stop(60)
    _check_and_restart(c, topic, producer, acks, victim)
