"""Tansu (a Rust Kafka-compatible broker) as the source, odradek as the target.

Tansu 0.6 has no idempotent producer (InitProducerId), so the offset-sync producer on the
source is configured as MM2 users would: ``A.producer.enable.idempotence = false``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from odradek.client import Admin, NewTopic, Producer
from odradek.testing.process import BrokerProcess

from .conftest import SETTINGS, MirrorProcess, end_offsets, read_topic, wait_until


@pytest.fixture(scope="module")
def tansu() -> Iterator[object]:
    from odradek.testing.tansu import TansuProcess, find_tansu_binary

    try:
        find_tansu_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with TansuProcess() as t:
        yield t


@pytest.fixture(scope="module")
def target() -> Iterator[BrokerProcess]:
    with BrokerProcess(SETTINGS) as b:
        yield b


def test_tansu_source_to_odradek(tansu: object, target: BrokerProcess, mirrors: Callable[..., MirrorProcess]) -> None:
    source = tansu.bootstrap_servers  # type: ignore[attr-defined]
    with Admin({"bootstrap.servers": source}) as admin:
        admin.create_topics([NewTopic("tansu.events", 2, 1)])
    n = 2000
    with Producer({"bootstrap.servers": source, "enable.idempotence": False, "acks": "all"}) as p:
        for i in range(n):
            p.send("tansu.events", b"value-%d" % i, key=b"k%d" % i, partition=i % 2, headers=[("seq", b"%d" % i)],
                   timestamp=1_700_000_000_000 + i)
        p.flush()
    m = mirrors("\n".join([
        "clusters = A, B", f"A.bootstrap.servers = {source}", f"B.bootstrap.servers = {target.bootstrap_servers}",
        "A->B.enabled = true", r"A->B.topics = tansu\..*", "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1", "heartbeats.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1", "A.producer.enable.idempotence = false",
        "B.exactly.once.source.support = enabled",
    ]) + "\n")
    m.start()
    wait_until(lambda: sum(end_offsets(target.bootstrap_servers, "A.tansu.events", read_committed=True).values()) >= n,
               60, f"{n} records on odradek", m.log)
    dst = read_topic(target.bootstrap_servers, "A.tansu.events", read_committed=True)
    for p in (0, 1):
        assert [(r.key, r.value, r.headers, r.timestamp) for r in dst[p]] == [
            (b"k%d" % i, b"value-%d" % i, [("seq", b"%d" % i)], 1_700_000_000_000 + i) for i in range(p, n, 2)]
    assert m.terminate() == 0
