"""Two single-broker clusters (A and B) and `odradek mirror` processes between them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.client import Admin, Consumer, ConsumerRecord, TopicPartition
from odradek.testing.process import BrokerProcess

SETTINGS = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    a, b = BrokerProcess(SETTINGS), BrokerProcess(SETTINGS)
    a.start()
    try:
        b.start()
        try:
            yield a, b
        finally:
            b.close()
    finally:
        a.close()


def base_properties(a: BrokerProcess, b: BrokerProcess, **extra: Any) -> str:
    lines = [
        "clusters = A, B",
        f"A.bootstrap.servers = {a.bootstrap_servers}",
        f"B.bootstrap.servers = {b.bootstrap_servers}",
        "A->B.enabled = true",
        "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


class MirrorProcess:
    """`odradek mirror <file>` as a subprocess; stderr goes to ``log_path``."""

    def __init__(self, tmp: Path, properties: str, name: str = "mirror") -> None:
        self.path = tmp / f"{name}.properties"
        self.path.write_text(properties)
        self.log_path = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, *args: str) -> MirrorProcess:
        self.starts += 1
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "odradek", "mirror", str(self.path), "--progress-interval", "1", *args],
                stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL, env=env,
            )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 20.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def mirrors(tmp_path: Path) -> Iterator[Callable[..., MirrorProcess]]:
    made: list[MirrorProcess] = []

    def make(properties: str, name: str = "mirror") -> MirrorProcess:
        m = MirrorProcess(tmp_path, properties, name)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, log: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (f"\nmirror log:\n{log()[-3000:]}" if log else ""))
        time.sleep(0.1)


def end_offsets(bootstrap: str, topic: str, *, read_committed: bool = False) -> dict[int, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        topics = admin.list_topics()
        if topic not in topics:
            return {}
        n = topics[topic].partition_count
        got = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(n)}, read_committed=read_committed)
        return {tp.partition: off for tp, (off, _ts) in got.items()}


def read_topic(bootstrap: str, topic: str, *, read_committed: bool = False, timeout: float = 30.0) -> dict[int, list[ConsumerRecord]]:
    """Every record of ``topic`` (up to its end offsets now), per partition in offset order."""
    ends = end_offsets(bootstrap, topic, read_committed=read_committed)
    out: dict[int, list[ConsumerRecord]] = {p: [] for p in ends}
    config = {"bootstrap.servers": bootstrap, "enable.auto.commit": "false", "auto.offset.reset": "earliest",
              "isolation.level": "read_committed" if read_committed else "read_uncommitted", "max.poll.records": 10000}
    with Consumer(config) as c:
        c.assign([TopicPartition(topic, p) for p in ends])
        deadline = time.monotonic() + timeout
        pending = {p for p, e in ends.items() if e > 0}
        while pending:
            assert time.monotonic() < deadline, f"{topic} not read to its end in {timeout} s"
            for r in c.poll(0.5):
                if r.offset < ends[r.partition]:
                    out[r.partition].append(r)
            for p in list(pending):
                if c.position(TopicPartition(topic, p)) >= ends[p]:
                    pending.discard(p)
    return out
