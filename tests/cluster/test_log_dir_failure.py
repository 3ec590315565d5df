"""A failed log dir in a cluster (Kafka's ZooKeeper mode): broker 2 has two log dirs, one a small
tmpfs the test mounts (skipped where mounting is not allowed). A topic with replication factor 3
and ``min.insync.replicas`` 2 has both partitions led by broker 2, one on each dir. An acks=all
confluent-kafka producer fills the tmpfs: the leader's append fails with ENOSPC, broker 2 takes
the dir offline and announces it in ``/log_dir_event_notification``, the controller asks broker 2
with a LeaderAndIsr, gets KAFKA_STORAGE_ERROR, and moves leadership to another ISR member. The
producer goes on, every acknowledged record is read back once where it was acknowledged,
Metadata lists broker 2 among the partition's offline replicas, and broker 2 still leads and
serves the partition on its other dir."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from odradek.cluster.zookeeper import ZooKeeperServer

from .checker import Ack, check
from .harness import Cluster, acks_all_producer, read_back

pytestmark = [pytest.mark.interop, pytest.mark.timeout(115)]

TOPIC = "jbod"
VALUE_BYTES = 1000


class _Acks:
    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acks: list[Ack] = []
        self.errors: list[str] = []
        self.sent = 0

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acks.append(Ack(msg.partition(), msg.offset(), msg.value()))

    def send(self, partition: int, n: int) -> None:
        for _ in range(n):
            value = b"%d-" % self.sent + b"x" * VALUE_BYTES
            while True:
                try:
                    self.producer.produce(TOPIC, value, partition=partition, on_delivery=self._done)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.sent += 1
            self.producer.poll(0)


def _log_dir_of(dirs: list[Path], partition: int) -> Path | None:
    found = [d for d in dirs if (d / f"{TOPIC}-{partition}").is_dir()]
    return found[0] if len(found) == 1 else None


def test_a_failed_log_dir_moves_leadership_and_keeps_every_acknowledged_record(
    zookeeper: ZooKeeperServer, tmp_path: Path, tmpfs: Any
) -> None:
    with tmpfs(tmp_path / "small", "256k") as small:
        cluster = Cluster(zookeeper, tmp_path, 3)
        b2 = cluster.brokers[2]
        big = Path(b2.data_dir).resolve()
        b2.settings["log.dirs"] = f"{big},{small}"
        try:
            cluster.start()
            _run(cluster, [big, small], small)
        finally:
            cluster.close()


def _run(cluster: Cluster, dirs: list[Path], small: Path) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        TOPIC, 2, replica_assignment=[[2, 1, 3], [2, 3, 1]], config={"min.insync.replicas": "2"}
    )
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    cluster.wait_metadata(
        lambda md: (
            all(
                p.leader_id == 2 and len(p.isr_nodes) == 3
                for p in cluster.partitions(md, TOPIC).values()
            )
            and len(cluster.partitions(md, TOPIC)) == 2
        )
    )
    # a new log goes to the dir with the fewest logs: one partition on each of broker 2's dirs
    deadline = time.monotonic() + 10
    while not all(_log_dir_of(dirs, p) for p in (0, 1)) and time.monotonic() < deadline:
        time.sleep(0.05)
    where = {p: _log_dir_of(dirs, p) for p in (0, 1)}
    assert set(where.values()) == set(dirs), where
    doomed = next(p for p, d in where.items() if d == small)
    healthy = 1 - doomed

    producer = _Acks(acks_all_producer(bootstrap))
    # 256 KiB of tmpfs hold fewer than 256 of these; 400 fill it, then the producer goes on
    producer.send(doomed, 400)
    md = cluster.wait_metadata(
        lambda md: cluster.partitions(md, TOPIC)[doomed].leader_id not in (-1, 2), timeout=30
    )
    moved = cluster.partitions(md, TOPIC)[doomed]
    assert 2 not in moved.isr_nodes and set(moved.isr_nodes) == {1, 3}
    assert list(moved.offline_replicas) == [2]
    producer.send(doomed, 200)
    producer.send(healthy, 100)  # broker 2 still leads the partition on its other dir
    assert producer.producer.flush(60) == 0, producer.errors[:5]
    assert not producer.errors, producer.errors[:5]
    assert len(producer.acks) == 700

    # every broker's metadata says so (UpdateMetadata), broker 2's included
    for i in (1, 2, 3):
        md = cluster.wait_metadata(
            lambda md: (
                list(cluster.partitions(md, TOPIC)[doomed].offline_replicas) == [2]
                and cluster.partitions(md, TOPIC)[doomed].leader_id in (1, 3)
            ),
            broker_id=i,
            timeout=10,
        )
        kept = cluster.partitions(md, TOPIC)[healthy]
        assert kept.leader_id == 2 and len(kept.isr_nodes) == 3 and not list(kept.offline_replicas)
    # a topic created while the dir is offline gets its replica on broker 2's live dir
    new = NewTopic("after", 1, replica_assignment=[[2, 1, 3]])
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    deadline = time.monotonic() + 10
    while not (dirs[0] / "after-0").is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (dirs[0] / "after-0").is_dir()
    # every broker knows the topic first: a Produce for a topic a broker has not been told of
    # yet auto-creates it there, which fails with UNKNOWN_SERVER_ERROR when it exists already
    cluster.wait_every_broker(lambda md: len(cluster.partitions(md, "after")) == 1, timeout=10)
    producer.producer.produce("after", b"new", partition=0, on_delivery=producer._done)
    assert producer.producer.flush(30) == 0 and not producer.errors, (
        f"{producer.errors[:5]}\n{cluster.logs(6000)}"
    )
    md = cluster.wait_metadata(lambda md: len(cluster.partitions(md, "after")) == 1)
    after = cluster.partitions(md, "after")[0]
    assert after.leader_id == 2 and len(after.isr_nodes) == 3, after
    assert not list(after.offline_replicas), after
    producer.acks = [a for a in producer.acks if a.value != b"new"]
    log = read_back(bootstrap, TOPIC, 2)
    result = check(producer.acks, log)
    assert result.ok, result.summary()
    assert len(log[healthy]) == 100

    # the controller deleted the notification it handled
    zk = KazooClient(hosts=cluster.zookeeper.connect_string + cluster.chroot)
    zk.start(timeout=10)
    try:
        deadline = time.monotonic() + 10
        while zk.get_children("/log_dir_event_notification") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert zk.get_children("/log_dir_event_notification") == []
    finally:
        zk.stop()
        zk.close()
