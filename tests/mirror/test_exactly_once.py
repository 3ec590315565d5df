"""Exactly once across a SIGKILL of the mirror: each batch and its source positions are one
transaction on the target, and a restarted mirror resumes from the positions read back there."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from odradek.client import Admin, NewTopic, Producer
from odradek.testing.process import BrokerProcess

from .conftest import MirrorProcess, base_properties, end_offsets, read_topic, wait_until

TOTAL = 50_000
PARTITIONS = 4


def _produce_paced(bootstrap: str, topic: str, total: int, seconds: float, done: threading.Event) -> None:
    """``total`` keyed records with headers in slices spread over about ``seconds``."""
    slices = 50
    per = total // slices
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 65536}) as p:
        start = time.monotonic()
        for s in range(slices):
            rows = range(s * per, (s + 1) * per)
            p.send_batch(topic, [b"value-%d" % i for i in rows], keys=[b"key-%d" % (i % 1013) for i in rows],
                         headers=[[("seq", b"%d" % i)] for i in rows]).result(30)
            pause = start + seconds * (s + 1) / slices - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    done.set()


@pytest.mark.parametrize("source_isolation", ["read_uncommitted"])
def test_sigkill_mid_stream_then_restart_copies_every_record_once(
    clusters: tuple[BrokerProcess, BrokerProcess], mirrors: Callable[..., MirrorProcess], source_isolation: str
) -> None:
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("eos.events", PARTITIONS, 1)])
    m = mirrors(base_properties(a, b, **{
        "A->B.topics": r"eos\..*", "B.exactly.once.source.support": "enabled",
        "A.consumer.isolation.level": source_isolation, "emit.checkpoints.enabled": "false"}))
    m.start()
    done = threading.Event()
    producer = threading.Thread(target=_produce_paced, args=(a.bootstrap_servers, "eos.events", TOTAL, 6.0, done), daemon=True)
    producer.start()
    try:
        # kill once part of the stream is on B (uncommitted records count: a transaction may be open)
        wait_until(lambda: sum(end_offsets(b.bootstrap_servers, "A.eos.events").values()) >= 8000, 60, "8000 records on B", m.log)
        m.kill()
        killed_at = sum(end_offsets(b.bootstrap_servers, "A.eos.events").values())
        assert not done.is_set() or killed_at < TOTAL, "the mirror was killed after the stream had been copied"
        m.start()
    finally:
        producer.join(60)
    assert done.is_set()
    wait_until(lambda: sum(end_offsets(b.bootstrap_servers, "A.eos.events", read_committed=True).values()) >= TOTAL
               and sum(len(v) for v in read_topic(b.bootstrap_servers, "A.eos.events", read_committed=True).values()) >= TOTAL,
               90, f"{TOTAL} committed records on B", m.log)
    src = read_topic(a.bootstrap_servers, "eos.events")
    dst = read_topic(b.bootstrap_servers, "A.eos.events", read_committed=True)
    assert sum(len(v) for v in src.values()) == TOTAL
    for p in range(PARTITIONS):
        assert [(r.key, r.value, r.headers) for r in dst[p]] == [(r.key, r.value, r.headers) for r in src[p]], p
    assert m.terminate() == 0


def test_two_processes_share_a_flow_and_one_is_killed(clusters: tuple[BrokerProcess, BrokerProcess],
                                                      mirrors: Callable[..., MirrorProcess]) -> None:
    """Two mirror processes split the partitions (the positions group on the target); one is
    SIGKILLed mid-stream, the other takes its partitions over: still every record once."""
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("share.events", PARTITIONS, 1)])
    text = base_properties(a, b, **{
        "A->B.topics": r"share\..*", "exactly.once.source.support": "enabled", "emit.checkpoints.enabled": "false"})
    m0, m1 = mirrors(text, "mirror0"), mirrors(text, "mirror1")
    m0.start("--instance", "0")
    m1.start("--instance", "1")
    # both take part before the stream starts: each copies some of the partitions
    for m in (m0, m1):
        wait_until(lambda m=m: re.search(rf"copying [1-{PARTITIONS - 1}] partitions", m.log()), 60, "a share of the partitions", m.log)
    done = threading.Event()
    producer = threading.Thread(target=_produce_paced, args=(a.bootstrap_servers, "share.events", TOTAL, 6.0, done), daemon=True)
    producer.start()
    try:
        wait_until(lambda: sum(end_offsets(b.bootstrap_servers, "A.share.events").values()) >= 8000, 60, "8000 records on B", m1.log)
        m1.kill()
        assert not done.is_set()
    finally:
        producer.join(60)
    assert done.is_set()
    wait_until(lambda: re.search(rf"copying {PARTITIONS} partitions", m0.log()), 60, "m0 takes every partition", m0.log)
    wait_until(lambda: sum(len(v) for v in read_topic(b.bootstrap_servers, "A.share.events", read_committed=True).values()) >= TOTAL,
               90, f"{TOTAL} committed records on B", m0.log)
    src = read_topic(a.bootstrap_servers, "share.events")
    dst = read_topic(b.bootstrap_servers, "A.share.events", read_committed=True)
    for p in range(PARTITIONS):
        assert [(r.key, r.value, r.headers) for r in dst[p]] == [(r.key, r.value, r.headers) for r in src[p]], p
    assert m0.terminate() == 0


def test_a_refused_record_is_logged_retried_and_never_dropped(clusters: tuple[BrokerProcess, BrokerProcess],
                                                               mirrors: Callable[..., MirrorProcess]) -> None:
    """The remote topic refuses a record (max.message.bytes): each attempt is aborted and logged
    with the partition, nothing after it is copied; once the target accepts it, all arrive once."""
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("big.events", 1, 1)])
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("A.big.events", 1, 1, {"max.message.bytes": "2000"})])
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        p.send("big.events", b"small-1").result(10)
        p.send("big.events", b"x" * 5000).result(10)
        p.send("big.events", b"small-2").result(10)
    m = mirrors(base_properties(a, b, **{"A->B.topics": r"big\..*", "exactly.once.source.support": "enabled",
                                         "emit.checkpoints.enabled": "false"}))
    m.start()
    wait_until(lambda: m.log().count("transaction aborted") >= 2, 60, "two refused attempts", m.log)
    line = next(ln for ln in m.log().splitlines() if "transaction aborted" in ln)
    assert "big.events-0" in line
    assert sum(len(v) for v in read_topic(b.bootstrap_servers, "A.big.events", read_committed=True).values()) == 0
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.alter_configs({"A.big.events": {"max.message.bytes": "100000"}})
    wait_until(lambda: len(read_topic(b.bootstrap_servers, "A.big.events", read_committed=True).get(0, [])) >= 3, 60,
               "every record once the target accepts them", m.log)
    assert [r.value for r in read_topic(b.bootstrap_servers, "A.big.events", read_committed=True)[0]] == [
        b"small-1", b"x" * 5000, b"small-2"]
    assert m.terminate() == 0
