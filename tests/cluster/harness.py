"""What the cluster and fault tests share (a module, not a test module, so that any test folder
may import it): ``running_zookeeper`` (a ZooKeeper fixture's body), ``Cluster`` (N real broker
processes on one ZooKeeper), ``SLOW`` (the long-run marker), ``expire_session`` (a ZooKeeper
session expired on purpose), ``acks_all_producer`` and ``read_back`` (every partition of a topic
read from its beginning with confluent-kafka, for the checker, checker.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kazoo.client import KazooClient

from odradek.cluster.zk import KafkaZkClient
from odradek.cluster.znodes import EndPoint, parse_connect
from odradek.cluster.zookeeper import ZooKeeperServer, zookeeper_available

TOPIC = "replicated"
"""The failover tests' topic (test_failover.py), ``read_back``'s default."""
PARTITIONS = 3


def running_zookeeper(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper fixture's body (``yield from``): one server in a fresh directory ``name``,
    stopped at teardown; the test is skipped when the ``zookeeper`` package or java is missing."""
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    with ZooKeeperServer(Path(tmp_path_factory.mktemp(name))) as server:
        yield server


def listener_ports(registration: dict[str, Any]) -> dict[str, int]:
    """listener name -> port, from a ``/brokers/ids/<id>`` registration's endpoints."""
    endpoints = (EndPoint.parse(e, {}) for e in registration["endpoints"])
    return {e.listener: e.port for e in endpoints}


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
        """Start every broker and wait until each one, asked itself, names them all and the
        controller (a broker just registered knows only itself until the controller's
        UpdateMetadata reaches it; a client bootstrapping from it then would see one broker)."""
        for b in self.brokers.values():
            b.start()
        self.wait_every_broker(
            lambda md: len(md.brokers) == len(self.brokers) and md.controller_id > 0
        )
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

    def registrations(self) -> dict[int, dict[str, Any]]:
        """Each registered broker's ``/brokers/ids/<id>`` znode (its JSON), read from ZooKeeper."""
        zk = KazooClient(hosts=self.zookeeper.connect_string + self.chroot)
        zk.start(timeout=10)
        try:
            return {
                int(i): json.loads(zk.get(f"/brokers/ids/{i}")[0])
                for i in zk.get_children("/brokers/ids")
            }
        finally:
            zk.stop()
            zk.close()

    def listener_ports(self) -> dict[int, dict[str, int]]:
        """broker id -> {listener name: port}, from the registrations' endpoints."""
        return {i: listener_ports(r) for i, r in self.registrations().items()}

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


SLOW = pytest.mark.skipif(
    not os.environ.get("ODRADEK_SLOW"),
    reason="a long cluster run: set ODRADEK_SLOW=1 (make test-cluster-slow)",
)
"""With ``@pytest.mark.slow``: run only when ODRADEK_SLOW is set."""


_LEADERSHIP_MOVING = frozenset(
    {
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)


def latest_offset(consumer: Consumer, tp: TopicPartition, timeout: float = 30.0) -> int:
    """The partition's latest offset (read_committed: the last stable offset), asked again
    (bounded) while leadership moves: librdkafka's get_watermark_offsets hands these retriable
    errors to the caller (after refreshing its metadata), among them OFFSET_NOT_AVAILABLE from
    a leader just elected whose high watermark is still below the start of its epoch."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=timeout)[1])
        except KafkaException as exc:
            if exc.args[0].code() not in _LEADERSHIP_MOVING or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def read_back(
    bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS, timeout: float = 60.0
) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition from its beginning to its high watermark, with confluent-kafka."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"checker-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        ends = {p: latest_offset(consumer, TopicPartition(topic, p)) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        done: set[int] = {p for p, end in ends.items() if end == 0}
        while len(done) < partitions:
            assert time.monotonic() < deadline, (
                f"read back stuck: {[len(v) for v in out.values()]} of {ends}"
            )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                eof = msg.error().code() == -191  # _PARTITION_EOF
                if eof and msg.offset() >= ends[msg.partition()]:
                    done.add(msg.partition())
                continue
            out[msg.partition()].append((msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return out
    finally:
        consumer.close()


def expire_session(client: KafkaZkClient, connect: str) -> None:
    """Expire ``client``'s session the classic way: a second connection with the same id closes it."""
    hosts, _ = parse_connect(connect)
    sid, password = client.zk.client_id
    other = KazooClient(hosts=hosts, client_id=(sid, password))
    other.start(timeout=5)
    other.stop()
    other.close()


def acks_all_producer(bootstrap: str) -> Producer:
    """An idempotent acks=all confluent-kafka producer that retries for a minute and refreshes
    its metadata every second (it finds a new leader soon after a failover)."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
