"""Checkpoints, group offset sync and `odradek mirror translate` between two real brokers.

Checkpoints are decoded with the layout of Kafka's Checkpoint class: key {group STRING, topic
STRING, partition INT32}, value {version INT16 = 0, upstreamOffset INT64, offset INT64,
metadata STRING}."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Callable

from odradek.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from odradek.testing.process import BrokerProcess

from .conftest import MirrorProcess, base_properties, read_topic, wait_until

LAG_MAX = 100


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def _checkpoints(bootstrap: str) -> dict[tuple[str, str, int], tuple[int, int, str]]:
    """The latest checkpoint per (group, topic, partition) in A.checkpoints.internal."""
    out = {}
    for r in read_topic(bootstrap, "A.checkpoints.internal").get(0, []):
        assert r.key is not None and r.value is not None
        group, pos = _string(r.key, 0)
        topic, pos = _string(r.key, pos)
        (partition,) = struct.unpack_from(">i", r.key, pos)
        version, upstream, downstream = struct.unpack_from(">hqq", r.value, 0)
        metadata, end = _string(r.value, 18)
        assert version == 0 and end == len(r.value) and pos + 4 == len(r.key)
        out[(group, topic, partition)] = (upstream, downstream, metadata)
    return out


def test_checkpoints_translate_and_sync_group_offsets(clusters: tuple[BrokerProcess, BrokerProcess],
                                                      mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("grp.orders", 2, 1)])
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        for i in range(2000):
            p.send("grp.orders", b"v%d" % i, partition=i % 2)
        p.flush()
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.alter_group_offsets("app", {TopicPartition("grp.orders", 0): 437, TopicPartition("grp.orders", 1): 1000})
        admin.alter_group_offsets("console-consumer-7", {TopicPartition("grp.orders", 0): 5})
    m = mirrors(base_properties(a, b, **{
        "A->B.topics": r"grp\..*", "emit.checkpoints.interval.seconds": 1, "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": 1, "offset.lag.max": LAG_MAX}))
    m.start()
    want = {("app", "A.grp.orders", 0), ("app", "A.grp.orders", 1)}
    cps = wait_until(lambda: (c := _checkpoints(b.bootstrap_servers)) and want <= set(c) and c[("app", "A.grp.orders", 1)][1] == 1000 and c,
                     30, "checkpoints for group app", m.log)
    assert not any(g == "console-consumer-7" for g, _t, _p in cps)  # groups.exclude
    src = read_topic(a.bootstrap_servers, "grp.orders")
    dst = read_topic(b.bootstrap_servers, "A.grp.orders")
    up, down, _md = cps[("app", "A.grp.orders", 0)]
    assert up == 437
    # never ahead of the group (nothing skipped), at most offset.lag.max re-read
    resumed = src[0].index(next(r for r in src[0] if r.value == dst[0][down].value))
    assert 437 - LAG_MAX <= resumed <= 437
    assert cps[("app", "A.grp.orders", 1)][:2] == (1000, 1000)  # at the end: exact

    # the target's group follows (it has no member there)
    def target_offsets() -> dict[int, int]:
        with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
            got = admin.list_group_offsets("app", [TopicPartition("A.grp.orders", p) for p in (0, 1)])
        return {tp.partition: om.offset for tp, om in got.items() if om is not None and om.offset >= 0}

    wait_until(lambda: target_offsets() == {0: down, 1: 1000}, 20, "group app synced on B", m.log)

    # the group moves back on A: the checkpoint follows, the target group does not move back
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.alter_group_offsets("app", {TopicPartition("grp.orders", 0): 10})
    wait_until(lambda: _checkpoints(b.bootstrap_servers)[("app", "A.grp.orders", 0)][0] == 10, 20, "checkpoint at 10", m.log)
    # a group committed after that checkpoint is synced in a later round: by then the round that
    # emitted the checkpoint at 10 has done its group sync
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.alter_group_offsets("later", {TopicPartition("grp.orders", 0): 500})
    wait_until(lambda: "group later: offsets of 1 partitions synced" in m.log(), 20, "group later synced", m.log)
    assert target_offsets() == {0: down, 1: 1000}

    # a group with an active member on B is left alone: its consumers own their offsets
    with Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "busy", "enable.auto.commit": "false",
                   "auto.offset.reset": "latest"}) as busy:
        busy.subscribe(["A.grp.orders"])
        wait_until(lambda: busy.poll(0.2) is not None and busy.assignment(), 30, "busy has joined on B")
        with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
            admin.alter_group_offsets("busy", {TopicPartition("grp.orders", 0): 300})
        wait_until(lambda: ("busy", "A.grp.orders", 0) in _checkpoints(b.bootstrap_servers), 20, "checkpoint of busy", m.log)
        with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
            admin.alter_group_offsets("later2", {TopicPartition("grp.orders", 0): 500})
        wait_until(lambda: "group later2: offsets of 1 partitions synced" in m.log(), 20, "group later2 synced", m.log)
        assert "group busy:" not in m.log()
        with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
            assert all(om is None for om in admin.list_group_offsets("busy", [TopicPartition("A.grp.orders", 0)]).values())

    out = subprocess.run([sys.executable, "-m", "odradek", "mirror", "translate", str(m.path), "--group", "app",
                          "--source", "A", "--target", "B"], capture_output=True, text=True, timeout=60, check=True).stdout
    latest = _checkpoints(b.bootstrap_servers)
    assert out.splitlines() == [f"A.grp.orders\t{p}\t{latest[('app', 'A.grp.orders', p)][1]}" for p in (0, 1)]
    assert m.terminate() == 0
