"""odradek.client against the odradek broker (the ``broker`` fixture of tests/conftest.py)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from odradek.client import (
    Admin,
    Consumer,
    ConsumerRebalanceListener,
    KafkaError,
    KafkaTimeoutError,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
    read_range_arrow,
)
from odradek.client.aio import AsyncAdmin, AsyncConsumer, AsyncProducer
from odradek.testing.helpers import wait_until

pytestmark = pytest.mark.timeout(90)

BROKER_SETTINGS = {"num.partitions": 1, "group.initial.rebalance.delay.ms": 0}


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _cfg(broker: Any, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, **extra}


def _create(broker: Any, partitions: int = 1, **config: str) -> str:
    name = _topic()
    with Admin(_cfg(broker)) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config or None)])
    return name


def _consume_all(c: Consumer, n: int, timeout: float = 20) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += c.poll(0.5)
    return got


# -- producer ---------------------------------------------------------------------------------
def test_idempotent_keyed_produce_matches_kafka_python_placement(broker: Any) -> None:
    from kafka.partitioner.default import murmur2

    name = _create(broker, 5)
    keys = [b"key-%d" % i for i in range(200)]
    with Producer(_cfg(broker)) as p:  # enable.idempotence and acks=all are the defaults
        assert p._aio.producer_id_and_epoch()[0] >= 0
        futs = [p.send(name, b"v", key=k) for k in keys]
        p.flush()
        mds = [f.result(10) for f in futs]
    for k, md in zip(keys, mds, strict=True):
        assert md.partition == (murmur2(k) & 0x7FFFFFFF) % 5
    per_part: dict[int, list[int]] = {}
    for md in mds:
        per_part.setdefault(md.partition, []).append(md.offset)
    assert all(offs == list(range(len(offs))) for offs in per_part.values())


def test_keyed_placement_same_as_kafka_python_producer(broker: Any) -> None:
    from kafka import KafkaProducer

    name = _create(broker, 4)
    keys = [b"k%d" % i for i in range(40)]
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        theirs = [kp.send(name, b"v", key=k).get(10).partition for k in keys]
    finally:
        kp.close(5)
    with Producer(_cfg(broker)) as p:
        ours = [p.send(name, b"v", key=k).result(10).partition for k in keys]
    assert ours == theirs


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: Any, acks: str) -> None:
    name = _create(broker)
    with Producer(_cfg(broker, acks=acks, **({"enable.idempotence": "false"} if acks != "all" else {}))) as p:
        futs = [p.send(name, b"%d" % i) for i in range(100)]
        p.flush()
        mds = [f.result(5) for f in futs]
    if acks == "0":
        assert all(md.offset == -1 for md in mds)
    else:
        assert [md.offset for md in mds] == list(range(100))
    with Consumer(_cfg(broker, **{"auto.offset.reset": "earliest"})) as c:
        c.assign([TopicPartition(name, 0)])
        assert [r.value for r in _consume_all(c, 100)] == [b"%d" % i for i in range(100)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: Any, codec: str) -> None:
    name = _create(broker)
    with Producer(_cfg(broker, **{"compression.type": codec, "linger.ms": 20})) as p:
        for i in range(500):
            p.send(name, b"value-%d" % i * 5, key=b"k")
        p.flush()
    with Consumer(_cfg(broker, **{"auto.offset.reset": "earliest"})) as c:
        c.assign([TopicPartition(name, 0)])
        got = _consume_all(c, 500)
    assert [r.value for r in got] == [b"value-%d" % i * 5 for i in range(500)]


def test_callbacks_and_sticky_partitioner(broker: Any) -> None:
    name = _create(broker, 3)
    results: list[Any] = []
    done = threading.Event()

    def cb(md: Any, exc: BaseException | None) -> None:
        results.append((md, exc))
        if len(results) == 300:
            done.set()

    with Producer(_cfg(broker, **{"batch.size": 2000})) as p:
        for _ in range(300):
            p.send(name, b"x" * 50, on_delivery=cb)
        p.flush()
        assert done.wait(10)
    assert all(exc is None for _md, exc in results)
    used = {md.partition for md, _e in results}
    assert len(used) > 1  # null keys stick to one partition per batch, then move on


def test_broker_restart_no_loss_no_duplicates(broker: Any) -> None:
    name = _create(broker, 2)
    with Producer(_cfg(broker, **{"retry.backoff.ms": 50, "reconnect.backoff.ms": 20})) as p:
        futs = [p.send(name, b"%d" % i, key=b"%d" % (i % 7)) for i in range(300)]
        p.flush()
        broker.restart()
        futs += [p.send(name, b"%d" % i, key=b"%d" % (i % 7)) for i in range(300, 600)]
        p.flush(30)
        for f in futs:
            f.result(30)
    with Consumer(_cfg(broker, **{"auto.offset.reset": "earliest"})) as c:
        c.assign([TopicPartition(name, 0), TopicPartition(name, 1)])
        got = _consume_all(c, 600, 30)
        assert not c.poll(0.5)
    assert sorted(int(r.value) for r in got) == list(range(600))
    by_key: dict[bytes, list[int]] = {}
    for r in got:
        by_key.setdefault(r.key, []).append(int(r.value))
    assert all(v == sorted(v) for v in by_key.values())  # order per key kept


def test_buffer_full_blocks_then_times_out(fresh_broker: Any) -> None:
    name = _create(fresh_broker)
    p = Producer(_cfg(fresh_broker, **{"buffer.memory": 5000, "max.block.ms": 300, "delivery.timeout.ms": 60000}))
    try:
        p.send(name, b"x").result(10)  # topic metadata known from here on
        fresh_broker.kill()  # nothing is acknowledged any more: the buffer cannot drain
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            for _ in range(1000):
                p.send(name, b"x" * 100)
        assert 0.2 < time.monotonic() - t0 < 5
    finally:
        p.close(1)


def test_unknown_partition_is_an_error(broker: Any) -> None:
    name = _create(broker, 2)
    with Producer(_cfg(broker)) as p, pytest.raises(KafkaError):
        p.send(name, b"x", partition=5)


# -- consumer ---------------------------------------------------------------------------------
def test_assign_seek_position_pause(broker: Any) -> None:
    name = _create(broker, 2)
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    with Producer(_cfg(broker)) as p:
        for i in range(100):
            p.send(name, b"%d" % i, partition=i % 2, timestamp=1_700_000_000_000 + i * 10)
        p.flush()
    with Consumer(_cfg(broker, **{"auto.offset.reset": "latest", "max.poll.records": 7})) as c:
        c.assign([tp0, tp1])
        assert c.assignment() == {tp0, tp1}
        assert c.position(tp0) == 50  # latest
        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0
        batch = _consume_all(c, 1)
        assert len(batch) <= 7 and batch[0].partition == 0
        c.seek(tp0, 40)
        got = _consume_all(c, 10)
        assert [r.offset for r in got] == list(range(40, 50))
        assert c.position(tp0) == 50
        c.seek_to_beginning(tp1)
        c.pause(tp1)
        assert c.paused() == {tp1}
        assert c.poll(0.5) == []
        c.resume(tp1)
        got = _consume_all(c, 50)
        assert [r.offset for r in got] == list(range(50)) and {r.partition for r in got} == {1}
        c.seek_to_end(tp0)
        assert c.position(tp0) == 50
        oft = c.offsets_for_times({tp0: 1_700_000_000_000 + 205, tp1: 1_800_000_000_000})
        assert oft[tp0] is not None and oft[tp0].offset == 11
        assert oft[tp1] is None
        assert c.beginning_offsets([tp0]) == {tp0: 0} and c.end_offsets([tp1]) == {tp1: 50}


def test_iteration_blocks_for_more(broker: Any) -> None:
    name = _create(broker)
    c = Consumer(_cfg(broker, **{"auto.offset.reset": "earliest"}))
    try:
        c.assign([TopicPartition(name, 0)])

        def later() -> None:
            time.sleep(0.5)
            with Producer(_cfg(broker)) as p:
                for i in range(3):
                    p.send(name, b"%d" % i)

        threading.Thread(target=later, daemon=True).start()
        got = []
        for r in c:
            got.append(r.value)
            if len(got) == 3:
                break
        assert got == [b"0", b"1", b"2"]
    finally:
        c.close()


class _Listener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list[set[TopicPartition]] = []
        self.revoked: list[set[TopicPartition]] = []

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assigned.append(assigned)

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.revoked.append(revoked)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_group_rebalance_and_commits(broker: Any, strategy: str) -> None:
    name = _create(broker, 4)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Producer(_cfg(broker)) as p:
        for i in range(40):
            p.send(name, b"%d" % i, partition=i % 4)
        p.flush()
    cfg = _cfg(broker, **{"group.id": group, "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
                          "enable.auto.commit": "false", "heartbeat.interval.ms": 200, "session.timeout.ms": 6000})
    l1, l2 = _Listener(), _Listener()
    c1 = Consumer(cfg)
    c2: Consumer | None = None
    try:
        c1.subscribe([name], listener=l1)
        got = _consume_all(c1, 40)
        assert len(got) == 40 and c1.assignment() == {TopicPartition(name, p) for p in range(4)}
        c1.commit()
        assert c1.committed([TopicPartition(name, 0)])[TopicPartition(name, 0)].offset == 10
        c2 = Consumer(cfg)
        c2.subscribe([name], listener=l2)
        wait_until(lambda: len(c1.assignment()) == 2 and len(c2.assignment()) == 2, 30)  # type: ignore[union-attr]
        c1.poll(0.1)
        assert c1.assignment().isdisjoint(c2.assignment())
        assert l1.revoked and l2.assigned
        if strategy == "cooperative-sticky":
            assert all(len(r) < 4 for r in l1.revoked)  # only moved partitions were revoked
        # c2 starts from the committed offsets: nothing left to read
        assert c2.poll(1.0) == []
        done = threading.Event()
        c2.commit_async({TopicPartition(name, p): OffsetAndMetadata(5) for p in range(4)}, callback=lambda o, e: done.set())
        assert done.wait(10)
        with Admin(_cfg(broker)) as admin:
            offs = admin.list_group_offsets(group, [TopicPartition(name, p) for p in range(4)])
            assert {tp: om.offset for tp, om in offs.items() if om} == {TopicPartition(name, p): 5 for p in range(4)}
            desc = admin.describe_groups([group])[group]
            assert desc.state == "Stable" and len(desc.members) == 2
            assert sorted(tp for m in desc.members for tp in m.assignment) == [TopicPartition(name, p) for p in range(4)]
        c2.close()
        c2 = None
        wait_until(lambda: len(c1.assignment()) == 4 or (bool(c1.poll(0.05)) and len(c1.assignment()) == 4), 30)
    finally:
        c1.close()
        if c2 is not None:
            c2.close()


def test_auto_commit(broker: Any) -> None:
    name = _create(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Producer(_cfg(broker)) as p:
        for i in range(10):
            p.send(name, b"%d" % i)
    cfg = _cfg(broker, **{"group.id": group, "auto.offset.reset": "earliest", "auto.commit.interval.ms": 100})
    with Consumer(cfg, name) as c:
        assert len(_consume_all(c, 10)) == 10
        wait_until(lambda: (c.committed([TopicPartition(name, 0)])[TopicPartition(name, 0)] or OffsetAndMetadata(-1)).offset == 10, 10)
    with Consumer(cfg, name) as c:
        with Producer(_cfg(broker)) as p:
            p.send(name, b"after")
        got = _consume_all(c, 1)
        assert [r.value for r in got] == [b"after"]


def test_assign_with_group_commits_without_membership(broker: Any) -> None:
    name = _create(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    with Consumer(_cfg(broker, **{"group.id": group, "enable.auto.commit": "false"})) as c:
        c.assign([TopicPartition(name, 0)])
        c.commit({TopicPartition(name, 0): 0})
        assert c.committed([TopicPartition(name, 0)])[TopicPartition(name, 0)].offset == 0


# -- admin ------------------------------------------------------------------------------------
def test_admin_removes_a_group_member_by_id(broker: Any) -> None:
    name = _create(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    cfg = _cfg(broker, **{"group.id": group, "enable.auto.commit": "false", "heartbeat.interval.ms": 100})
    with Consumer(cfg, name) as c, Admin(_cfg(broker)) as admin:
        wait_until(lambda: c.assignment() == {TopicPartition(name, 0)}, 20)
        (member,) = [m.member_id for m in admin.describe_groups([group])[group].members]
        assert admin.remove_group_members(group, [member]) == {member: 0}
        # the consumer learns it was removed (UNKNOWN_MEMBER_ID) and joins again as a new member
        wait_until(lambda: [m.member_id for m in admin.describe_groups([group])[group].members] not in ([], [member]), 20)
        assert admin.remove_group_members(group, [member]) == {member: 25}  # UNKNOWN_MEMBER_ID
        assert admin.remove_group_members(group, []) == {}


def test_admin_surface(broker: Any) -> None:
    name = _topic()
    with Admin(_cfg(broker)) as admin:
        admin.create_topics([NewTopic(name, 2, 1, {"retention.ms": "3600000"})])
        with pytest.raises(KafkaError) as exc:
            admin.create_topics([NewTopic(name, 2)])
        assert exc.value.code == 36  # TOPIC_ALREADY_EXISTS
        assert admin.describe_topics([name])[name].partition_count == 2
        admin.create_partitions({name: 4})
        assert admin.describe_topics([name])[name].partition_count == 4
        assert admin.describe_configs([name])[name]["retention.ms"].value == "3600000"
        admin.alter_configs({name: {"retention.ms": "7200000", "cleanup.policy": "delete"}})
        assert admin.describe_configs([name])[name]["retention.ms"].value == "7200000"
        admin.alter_configs({name: {"retention.ms": None}})
        assert admin.describe_configs([name])[name]["retention.ms"].value != "7200000"
        with Producer(_cfg(broker)) as p:
            for i in range(5):
                p.send(name, b"x", partition=0, timestamp=1_700_000_000_000 + i)
        offs = admin.list_offsets({(name, 0): "earliest", (name, 1): "latest"})
        assert offs[TopicPartition(name, 0)][0] == 0 and offs[TopicPartition(name, 1)][0] == 0
        assert admin.list_offsets({(name, 0): "latest"})[TopicPartition(name, 0)][0] == 5
        assert admin.list_offsets({(name, 0): 1_700_000_000_003})[TopicPartition(name, 0)] == (3, 1_700_000_000_003)
        group = f"g-{uuid.uuid4().hex[:6]}"
        admin.alter_group_offsets(group, {TopicPartition(name, 0): 2})
        assert admin.list_group_offsets(group)[TopicPartition(name, 0)].offset == 2
        assert any(g[0] == group for g in admin.list_groups())
        admin.delete_groups([group])
        assert all(g[0] != group for g in admin.list_groups())
        admin.delete_topics([name])
        assert name not in admin.list_topics()
        with pytest.raises(KafkaError):
            admin.describe_topics([name])


def test_read_range_arrow(broker: Any) -> None:
    name = _create(broker)
    with Producer(_cfg(broker, **{"batch.size": 5000})) as p:
        for i in range(3000):
            p.send(name, b"%d" % i, key=b"k", headers=[("h", b"%d" % i)], timestamp=1_700_000_000_000 + i)
        p.flush()
    batches = list(read_range_arrow(_cfg(broker), name, 0, 10, 2990, include_headers=True, max_rows_per_batch=1000))
    assert all(b.num_rows <= 1000 for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(10, 2990))
    assert rows[0]["headers"] == [{"key": "h", "value": b"10"}] and rows[0]["key"] == b"k"
    assert rows[0]["timestamp"].timestamp() == 1_700_000_000.010
    assert list(read_range_arrow(_cfg(broker), name, 0, 5, 5)) == []


async def test_async_twins(broker: Any) -> None:
    name = _topic()
    async with AsyncAdmin(_cfg(broker)) as admin:
        await admin.create_topics([NewTopic(name, 2)])
        assert (await admin.describe_topics([name]))[name].partition_count == 2
    async with AsyncProducer(_cfg(broker)) as p:
        mds = [await (await p.send(name, b"%d" % i, key=b"a")) for i in range(5)]
        assert [md.offset for md in mds] == list(range(5))
    group = f"g-{uuid.uuid4().hex[:6]}"
    async with AsyncConsumer(_cfg(broker, **{"group.id": group, "auto.offset.reset": "earliest"})) as c:
        c.subscribe([name])
        got = []
        async def run() -> None:
            async for r in c:
                got.append(r.value)
                if len(got) == 5:
                    return
        await asyncio.wait_for(run(), 30)
        await c.commit()
        tp = TopicPartition(name, mds[0].partition)
        assert (await c.committed([tp]))[tp].offset == 5
    assert got == [b"%d" % i for i in range(5)]


def test_metadata_max_age_refresh_sees_new_partitions(broker: Any) -> None:
    name = _create(broker, 1)
    with Producer(_cfg(broker, **{"metadata.max.age.ms": 200})) as p:
        assert p.send(name, b"a").result(10).partition == 0
        with Admin(_cfg(broker)) as admin:
            admin.create_partitions({name: 3})
        deadline = time.monotonic() + 10
        while len(p.partitions_for(name)) < 3:
            p.send(name, b"tick").result(10)  # the sender refreshes stale metadata on its own
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert p.send(name, b"c", partition=2).result(10).partition == 2
