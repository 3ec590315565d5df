"""ZkMetadataStore against a real ZooKeeper: the image fed by UpdateMetadata (Kafka's
MetadataCache), its refusals, and the writes it makes in Kafka's layout."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from odradek.broker.metadata_store import (
    BrokerInfo,
    BrokersChanged,
    MetadataChange,
    PartitionsChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    UnknownTopicError,
)
from odradek.broker.zk_metadata_store import ZkMetadataStore, topic_id_to_zk
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import (
    TYPE_FULL,
    TYPE_UNKNOWN,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def store(zk_connect: str) -> AsyncIterator[ZkMetadataStore]:
    s = ZkMetadataStore(1, f"{zk_connect}/md-{uuid.uuid4().hex[:8]}", admin_timeout_ms=300)
    await s.start()
    try:
        yield s
    finally:
        await asyncio.get_running_loop().run_in_executor(None, s.close)


def _broker(i: int) -> UpdateMetadataBroker:
    return UpdateMetadataBroker(i, (UpdateMetadataEndpoint(9000 + i, "127.0.0.1"),))


def _um(
    controller_epoch: int,
    states: tuple[UpdateMetadataPartitionState, ...] = (),
    brokers: tuple[int, ...] = (1, 2, 3),
    broker_epoch: int = -1,
    topic_ids: dict[str, uuid.UUID] | None = None,
    type_: int = TYPE_UNKNOWN,
) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        2,
        controller_epoch,
        broker_epoch,
        states,
        tuple(_broker(i) for i in brokers),
        topic_ids or {},
        type_,
    )


def _state(
    topic: str, p: int, leader: int, isr: tuple[int, ...], version: int = 0
) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(topic, p, 1, leader, 3, isr, version, (1, 2, 3), ())


async def test_update_metadata_builds_the_image_and_announces_changes(
    store: ZkMetadataStore,
) -> None:
    seen: list[MetadataChange] = []
    store.add_listener(seen.append)
    tid = uuid.uuid4()
    assert (
        store.apply_update_metadata(
            _um(5, (_state("t", 1, 2, (2, 3)), _state("t", 0, 1, (1, 2, 3))), topic_ids={"t": tid})
        )
        == ErrorCode.none
    )
    assert [b.node_id for b in store.live_brokers()] == [1, 2, 3]
    assert store.controller_id() == 2 and store.controller_epoch == 5
    topic = store.topic("t")
    assert topic is not None and topic.topic_id == tid and store.topic_by_id(tid) is topic
    assert [p.partition for p in topic.partitions] == [0, 1]
    p1 = store.partition("t", 1)
    assert p1 is not None and (p1.leader, p1.leader_epoch, p1.isr, p1.replicas) == (
        2,
        3,
        [2, 3],
        [1, 2, 3],
    )
    assert [type(c) for c in seen] == [BrokersChanged, TopicCreated]

    # an ISR change of one partition; a broker leaves
    store.apply_update_metadata(_um(5, (_state("t", 1, 2, (1, 2, 3), 1),), brokers=(1, 2)))
    p1 = store.partition("t", 1)
    assert p1 is not None and p1.isr == [1, 2, 3] and p1.version == 1
    assert [type(c) for c in seen[2:]] == [BrokersChanged, PartitionsChanged]
    assert [b.node_id for b in store.live_brokers()] == [1, 2]

    # deletion: leader -2 (LeaderDuringDelete) for every partition removes the topic
    store.apply_update_metadata(_um(5, (_state("t", 0, -2, (1,)), _state("t", 1, -2, (1,)))))
    assert store.topic("t") is None and store.topic_by_id(tid) is None
    assert isinstance(seen[-1], TopicDeleted)


async def test_a_full_update_metadata_replaces_the_image(store: ZkMetadataStore) -> None:
    """A full UpdateMetadata removes the topics and partitions it does not name (and a topic
    it names with another id: deleted and created again); an incremental one keeps them."""
    seen: list[MetadataChange] = []
    store.add_listener(seen.append)
    ids = {"a": uuid.uuid4(), "b": uuid.uuid4(), "c": uuid.uuid4()}
    everything = tuple(_state(t, p, 1, (1, 2)) for t in ("a", "b", "c") for p in (0, 1))
    store.apply_update_metadata(_um(5, everything, topic_ids=ids))
    assert sorted(t.name for t in store.topics()) == ["a", "b", "c"]

    # incremental: "c" not named, kept
    store.apply_update_metadata(_um(5, (_state("a", 0, 2, (1, 2), 1),)))
    assert store.topic("c") is not None
    seen.clear()

    # full: "a" whole, "b" partition 0 only, "c" under a new id (recreated); a new topic "d"
    new_c, d = uuid.uuid4(), uuid.uuid4()
    full = (
        _state("a", 0, 1, (1, 2), 2),
        _state("a", 1, 1, (1, 2)),
        _state("b", 0, 1, (1, 2)),
        _state("c", 0, 3, (3,)),
        _state("d", 0, 2, (2,)),
    )
    code = store.apply_update_metadata(
        _um(5, full, topic_ids={**ids, "c": new_c, "d": d}, type_=TYPE_FULL)
    )
    assert code == ErrorCode.none
    assert sorted(t.name for t in store.topics()) == ["a", "b", "c", "d"]
    assert store.partition("b", 1) is None and store.partition("b", 0) is not None
    c = store.topic("c")
    assert c is not None and c.topic_id == new_c and [p.leader for p in c.partitions] == [3]
    assert store.topic_by_id(ids["c"]) is None and store.topic_by_id(new_c) is c
    deleted = [e.topic for e in seen if isinstance(e, TopicDeleted)]
    assert [(t.name, t.topic_id) for t in deleted] == [("c", ids["c"])]
    created = [e.topic.name for e in seen if isinstance(e, TopicCreated)]
    assert sorted(created) == ["c", "d"]
    assert seen.index(next(e for e in seen if isinstance(e, TopicDeleted))) < seen.index(
        next(e for e in seen if isinstance(e, TopicCreated) and e.topic.name == "c")
    )
    b_changes = [e for e in seen if isinstance(e, PartitionsChanged) and e.topic.name == "b"]
    assert [e.partitions for e in b_changes] == [(0, 1)]  # 1 left, 0 restated

    # full without "d" and with "a" announced as being deleted (leader -2): both leave
    seen.clear()
    store.apply_update_metadata(
        _um(
            6,
            (_state("a", 0, -2, (1,)), _state("a", 1, -2, (1,)), _state("b", 0, 1, (1, 2))),
            topic_ids=ids,
            type_=TYPE_FULL,
        )
    )
    assert sorted(t.name for t in store.topics()) == ["b"]
    assert sorted(e.topic.name for e in seen if isinstance(e, TopicDeleted)) == ["a", "c", "d"]


async def test_a_topic_named_without_an_id_takes_the_id_it_is_given_later(
    store: ZkMetadataStore,
) -> None:
    seen: list[MetadataChange] = []
    store.add_listener(seen.append)
    store.apply_update_metadata(_um(5, (_state("old", 0, 1, (1,)),)))  # no topic id
    stand_in = store.topic("old")
    assert stand_in is not None
    tid = uuid.uuid4()
    store.apply_update_metadata(
        _um(5, (_state("old", 0, 1, (1,)),), topic_ids={"old": tid}, type_=TYPE_FULL)
    )
    topic = store.topic("old")
    assert topic is stand_in and topic.topic_id == tid and store.topic_by_id(tid) is topic
    assert not [e for e in seen if isinstance(e, TopicDeleted)]


async def test_stale_controller_and_broker_epochs_are_refused(store: ZkMetadataStore) -> None:
    await store.register_broker(BrokerInfo(1, "127.0.0.1", 9001))
    epoch = store.broker_epoch
    assert epoch > 0 and store.broker(1) is not None
    assert store.apply_update_metadata(_um(7, broker_epoch=epoch)) == ErrorCode.none
    assert (
        store.apply_update_metadata(_um(6, (_state("x", 0, 1, (1,)),)))
        == ErrorCode.stale_controller_epoch
    )
    assert (
        store.apply_update_metadata(_um(7, (_state("x", 0, 1, (1,)),), broker_epoch=epoch - 1))
        == ErrorCode.stale_broker_epoch
    )
    assert store.topic("x") is None  # nothing of a refused request is applied


async def test_admin_writes_use_kafkas_znodes(store: ZkMetadataStore) -> None:
    zk = store.zk.zk
    tid = uuid.uuid4()
    # no controller runs here: the image never shows the topic, the store answers after its
    # admin timeout with what ZooKeeper holds
    topic = await store.create_topic(
        "a", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "5"}, topic_id=tid
    )
    assert topic.topic_id == tid and [p.leader for p in topic.partitions] == [-1, -1]
    assignment = json.loads(zk.get("/brokers/topics/a")[0])
    assert assignment["partitions"] == {"0": [1, 2], "1": [2, 1]}
    assert assignment["topic_id"] == topic_id_to_zk(tid)
    assert json.loads(zk.get("/config/topics/a")[0])["config"] == {"retention.ms": "5"}
    with pytest.raises(TopicExistsError):
        await store.create_topic("a", {0: [1]})

    await store.create_partitions("a", {2: [1, 2]})
    assert json.loads(zk.get("/brokers/topics/a")[0])["partitions"]["2"] == [1, 2]
    with pytest.raises(UnknownTopicError):
        await store.create_partitions("nope", {1: [1]})

    await store.delete_topic("a")
    assert zk.exists("/admin/delete_topics/a") is not None
    with pytest.raises(UnknownTopicError):
        await store.delete_topic("nope")


async def test_producer_id_blocks_never_overlap(zk_connect: str, store: ZkMetadataStore) -> None:
    other = ZkMetadataStore(2, f"{zk_connect}{store.zk.chroot or ''}")
    await other.start()
    try:
        starts = [await store.allocate_producer_ids(100), await other.allocate_producer_ids(100)]
        starts.append(await store.allocate_producer_ids(100))
    finally:
        await asyncio.get_running_loop().run_in_executor(None, other.close)
    assert sorted(starts) == [starts[0], starts[0] + 100, starts[0] + 200]


async def test_a_registration_left_by_a_killed_broker_is_waited_out(zk_connect: str) -> None:
    connect = f"{zk_connect}/reg-{uuid.uuid4().hex[:8]}"
    loop = asyncio.get_running_loop()
    old = ZkMetadataStore(1, connect, session_timeout_ms=2000)
    await old.start()
    await old.register_broker(BrokerInfo(1, "127.0.0.1", 9001))
    new = ZkMetadataStore(1, connect, session_timeout_ms=2000)
    await new.start()
    try:
        registering = asyncio.ensure_future(new.register_broker(BrokerInfo(1, "127.0.0.1", 9002)))
        await asyncio.sleep(0)  # it waits: the znode is the old session's
        assert not registering.done()
        await loop.run_in_executor(None, old.close)  # the old life ends
        await asyncio.wait_for(registering, 10)
        assert new.broker_epoch > old.broker_epoch
    finally:
        await loop.run_in_executor(None, new.close)


async def test_writes_wait_for_zookeeper_and_say_when_it_stays_away(zookeeper) -> None:  # type: ignore[no-untyped-def]
    """ZooKeeper away: an admin write waits for it up to admin_timeout_ms, then fails with
    MetadataUnavailableError (REQUEST_TIMED_OUT to clients), not with a kazoo exception; a
    write made while ZooKeeper restarts goes through once it is back."""
    import time

    from odradek.broker.metadata_store import MetadataUnavailableError

    loop = asyncio.get_running_loop()
    s = ZkMetadataStore(
        1, f"{zookeeper.connect_string}/md-{uuid.uuid4().hex[:8]}", admin_timeout_ms=1000
    )
    await s.start()
    try:
        await loop.run_in_executor(None, zookeeper.stop)
        deadline = time.monotonic() + 10
        while s.zk.wait_writable(0):
            assert time.monotonic() < deadline, "the session never noticed ZooKeeper left"
            await asyncio.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(MetadataUnavailableError, match="not reachable"):
            await s.create_topic("away", {0: [1]})
        assert 0.9 < time.monotonic() - started < 10

        s.admin_timeout_ms = 30_000
        allocation = asyncio.ensure_future(s.allocate_producer_ids(1000))
        await asyncio.sleep(0)
        assert not allocation.done()
        await loop.run_in_executor(None, zookeeper.start)
        assert await asyncio.wait_for(allocation, 30) >= 0
        assert not s.zk.exists("/brokers/topics/away")
    finally:
        if not zookeeper.is_running():
            await loop.run_in_executor(None, zookeeper.start)
        await loop.run_in_executor(None, s.close)
