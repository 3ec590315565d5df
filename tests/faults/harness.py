"""What the fault tests share: a background producer that records acknowledgements, the
replicas' logs read from their segment files, and waits on the cluster's metadata.

``Workload`` is a confluent-kafka producer (acks=all, idempotent unless told otherwise) in a
thread of its own, sending ``{tag}-{n}`` values round-robin over a topic's partitions until it
is stopped (or has sent ``limit`` records); every acknowledgement becomes an ``Ack`` for the
checker (tests/cluster/checker.py).

``replica_log(data_dir, topic, partition)`` reads one replica's log straight from its segment
files (a torn tail, the batch being written, is left out), and ``diverging(logs)`` gives the
offsets at which the replicas of a partition differ: after a fault, once the followers are back
in the ISR and producing has stopped, every replica must hold the same records at the same
offsets (the zombie and the unclean leader's victims truncated).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from cluster.checker import Ack, CheckResult, check
from cluster.harness import Cluster, read_back
from odradek.protocol.records import RecordBatch

_BATCH_HEADER = 61


def fault_seconds(default: float) -> float:
    """How long a long fault run lasts: ODRADEK_FAULT_SECONDS, else ``default``."""
    return float(os.environ.get("ODRADEK_FAULT_SECONDS", default))


class Workload:
    """A producer thread recording what was acknowledged. ``acks_since(t, partition)`` counts
    the acknowledgements received after ``t`` (time.monotonic()) on a partition."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        interval: float = 0.002,
        limit: int = 200_000,
        **settings: object,
    ) -> None:
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            **settings,
        }
        self.producer = Producer(config)
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.limit = limit
        self.acks: list[Ack] = []
        self.acked_at: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"workload-{topic}", daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acks.append(Ack(msg.partition(), msg.offset(), msg.value()))
            self.acked_at.append((time.monotonic(), msg.partition()))

    def produce(self, n: int, tag: str) -> None:
        for _ in range(n):
            value = f"{tag}-{self.sent}".encode()
            while True:
                try:
                    self.producer.produce(
                        self.topic,
                        value,
                        partition=self.sent % self.partitions,
                        on_delivery=self._on_delivery,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.sent += 1
            self.producer.poll(0)

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < self.limit:
            self.produce(1, "w")
            self._stop.wait(self.interval)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def acks_since(self, t: float, partition: int) -> int:
        return sum(1 for at, p in list(self.acked_at) if at > t and p == partition)

    def stop(self, flush_timeout: float = 120.0) -> None:
        """Stop sending and wait for every sent record to be acknowledged (or to fail)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        self.flush(flush_timeout)

    def flush(self, timeout: float = 120.0) -> None:
        """Wait for every record sent so far to be acknowledged (or to fail)."""
        left = self.producer.flush(timeout)
        assert left == 0, (
            f"{left} records neither acknowledged nor failed in {timeout} s; "
            f"errors {self.errors[:5]}"
        )


def check_workload(
    c: Cluster, work: Workload, topic: str, partitions: int, what: str
) -> CheckResult:
    """After ``work`` has stopped: no producer error, and the checker finds every record sent
    acknowledged, none lost, duplicated or reordered in the topic read back; then the replicas
    agree. Prints ``what`` and the checker's summary (shown with pytest -s,
    docs/benchmarks/faults.md)."""
    assert not work.errors, work.errors[:5]
    result = check(work.acks, read_back(c.bootstrap_servers, topic, partitions))
    print(f"{what}; checker: {result.summary()}")
    assert result.ok, result.summary()
    assert result.acked == work.sent
    wait_replicas_agree(c, topic, partitions, sorted(c.brokers))
    return result


def leader(c: Cluster, topic: str, partition: int, ask: int | None = None) -> int:
    return int(c.partitions(c.metadata(ask), topic)[partition].leader_id)


def wait_full_isr(
    c: Cluster, topic: str, replicas: int, timeout: float = 60.0, ask: int | None = None
) -> Any:
    """Metadata in which every partition of ``topic`` has ``replicas`` in its ISR, as broker
    ``ask`` sees it (any broker when None: a broker just thawed may still answer with its
    view from before it was frozen)."""
    return c.wait_metadata(full_isr(c, topic, replicas), timeout=timeout, broker_id=ask)


def full_isr(
    c: Cluster, topic: str, replicas: int, leader_epochs: Mapping[int, int] | None = None
) -> Callable[[Any], bool]:
    """Whether metadata shows ``replicas`` in the ISR of every partition of ``topic`` (and,
    given ``leader_epochs``, a leader epoch of at least ``leader_epochs[p]`` for partition p)."""
    epochs = leader_epochs or {}

    def ok(md: Any) -> bool:
        parts = c.partitions(md, topic)
        return bool(parts) and all(
            len(s.isr_nodes) == replicas and s.leader_epoch >= epochs.get(p, -1)
            for p, s in parts.items()
        )

    return ok


def wait_every_broker_sees(
    c: Cluster,
    topic: str,
    replicas: int,
    leader_epochs: Mapping[int, int],
    timeout: float = 60.0,
) -> None:
    """Bounded: every running broker, asked itself, sees ``replicas`` in the ISR of every
    partition of ``topic`` and a leader epoch of at least ``leader_epochs[p]`` for partition p.

    A broker cut off (or frozen) while it led goes on leading with its view from before, as a
    Kafka broker does, until the controller's UpdateMetadata and LeaderAndIsr reach it once it
    has registered again: meanwhile it answers Metadata with itself the leader of a full ISR and
    ListOffsets with its own old high watermark. A client that bootstraps from it then reads the
    log as it was (F6 once read 0 of 2,288 acknowledged records so): the checker reads only once
    every broker knows the leader elected during the fault."""

    running = [i for i, b in c.brokers.items() if b.running]
    c.wait_every_broker(full_isr(c, topic, replicas, leader_epochs), timeout, brokers=running)


def sigstop(c: Cluster, broker_id: int) -> None:
    pid = c.brokers[broker_id].pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)


def sigcont(c: Cluster, broker_id: int) -> None:
    pid = c.brokers[broker_id].pid
    assert pid is not None
    os.kill(pid, signal.SIGCONT)


# -- a cgroup per broker, for iptables' cgroup match (F6) ------------------------------------------


def cgroup2_root() -> Path | None:
    for root in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        if (root / "cgroup.procs").exists() and (root / "cgroup.subtree_control").exists():
            return root
    return None


def network_faults_missing() -> str | None:
    """Why network partitions cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network partitions need root (iptables, cgroups)"
    if shutil.which("iptables") is None:
        return "network partitions need iptables (Debian package iptables)"
    if cgroup2_root() is None:
        return "network partitions need cgroup v2 (/sys/fs/cgroup/unified or /sys/fs/cgroup)"
    return None


def run_in_cgroup(broker: Any, name: str, scripts: Path) -> None:
    """Start ``broker`` (a BrokerProcess), now and on every restart, inside cgroup ``name``:
    its ``python`` becomes a script that moves itself there, then execs Python. A socket
    belongs to the cgroup of the process that created it, so every socket of the broker does."""
    root = cgroup2_root()
    assert root is not None
    (root / name).mkdir(exist_ok=True)
    script = scripts / f"{name}.sh"
    script.write_text(
        f'#!/bin/sh\necho $$ > {root / name / "cgroup.procs"}\nexec {broker.python} "$@"\n'
    )
    script.chmod(0o755)
    broker.python = str(script)
    broker.cgroup = name


def broker_cgroup(broker: Any) -> str | None:
    return getattr(broker, "cgroup", None)


def remove_cgroup(name: str) -> None:
    root = cgroup2_root()
    if root is not None:
        with contextlib.suppress(OSError):
            (root / name).rmdir()


# -- the replicas' logs, from their segment files ------------------------------------------------


def replica_log(data_dir: Path, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in one replica's segment files, in offset order."""
    directory = data_dir / f"{topic}-{partition}"
    out: list[tuple[int, bytes]] = []
    if not directory.is_dir():
        return out
    for segment in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        data = segment.read_bytes()
        position = 0
        while len(data) - position >= _BATCH_HEADER:
            size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
            if position + size > len(data):
                break  # the batch being written
            batch = RecordBatch(data, position)
            if not batch.is_control:
                out.extend((r.offset, r.value or b"") for r in batch.records())
            position += size
    return out


def diverging(
    logs: Mapping[int, Sequence[tuple[int, bytes]]],
) -> dict[int, dict[int, bytes | None]]:
    """offset -> {replica: value or None when missing} wherever the replicas differ."""
    by_replica = {r: dict(log) for r, log in logs.items()}
    offsets = set().union(*(set(d) for d in by_replica.values())) if by_replica else set()
    out: dict[int, dict[int, bytes | None]] = {}
    for offset in sorted(offsets):
        values = {r: d.get(offset) for r, d in by_replica.items()}
        if len(set(values.values())) > 1:
            out[offset] = values
    return out


def wait_replicas_agree(
    c: Cluster, topic: str, partitions: int, replicas: Sequence[int], timeout: float = 30.0
) -> None:
    """Bounded: every replica of every partition holds the same records at the same offsets
    (producing has stopped; a follower may still be fetching the tail)."""
    deadline = time.monotonic() + timeout
    while True:
        differ = {}
        for p in range(partitions):
            logs = {r: replica_log(c.brokers[r].data_dir, topic, p) for r in replicas}
            d = diverging(logs)
            if d:
                differ[p] = (
                    len(d),
                    dict(list(d.items())[:3]),
                    {r: len(v) for r, v in logs.items()},
                )
        if not differ:
            return
        assert time.monotonic() < deadline, f"replicas differ (count, first, lengths): {differ}"
        time.sleep(0.2)
