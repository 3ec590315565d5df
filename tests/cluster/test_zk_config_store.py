"""ZkConfigEntityStore against a real ZooKeeper: two brokers' stores (each with its own session)
under one chroot, and DynamicBrokerConfig over them: a level written through one is read and
applied (reconfiguration callbacks included) by the other through ``/config/changes``."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.config_store import BROKERS, DEFAULT_ENTITY, GROUPS
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.zk_config_store import (
    CHANGE_EXPIRATION_MS,
    ZkConfigEntityStore,
    config_change_sequence,
)
from odradek.clock import ManualClock
from odradek.cluster.zk import KafkaZkClient

TIMEOUT = 10.0

T = TypeVar("T")


async def _run(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


class _Broker:
    """A KafkaZkClient session and the store over it."""

    def __init__(self, connect: str, clock: ManualClock | None = None) -> None:
        self.zk = KafkaZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=4000)
        self.store = ZkConfigEntityStore(self.zk, admin_timeout_ms=2000, clock=clock)

    async def start(self) -> _Broker:
        await _run(self.zk.start)
        await self.store.start()
        return self

    async def close(self) -> None:
        self.store.close()
        await _run(self.zk.close)


@pytest.fixture
async def chroot(zk_connect: str) -> str:
    return f"{zk_connect}/cfg-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def pair(chroot: str) -> AsyncIterator[tuple[_Broker, _Broker]]:
    a, b = _Broker(chroot), _Broker(chroot)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not so after {TIMEOUT} s: {what}")
        await asyncio.sleep(0.02)


def test_config_change_sequence() -> None:
    assert config_change_sequence("config_change_0000000042") == 42
    assert config_change_sequence("isr_change_0000000042") is None
    assert config_change_sequence("config_change_x") is None


async def test_a_write_reaches_the_other_store_in_kafka_layout(
    pair: tuple[_Broker, _Broker],
) -> None:
    a, b = pair
    seen: list[tuple[str, str]] = []

    async def listener(entity_type: str, name: str) -> None:
        seen.append((entity_type, name))

    b.store.add_change_listener(listener)
    await a.store.change_entity_config(BROKERS, DEFAULT_ENTITY, {"log.retention.ms": "5000"})
    assert a.store.entity_config(BROKERS, DEFAULT_ENTITY) == {"log.retention.ms": "5000"}
    await _until("b sees the default", lambda: (BROKERS, DEFAULT_ENTITY) in seen)
    assert b.store.entities(BROKERS) == {DEFAULT_ENTITY: {"log.retention.ms": "5000"}}

    raw = await _run(lambda: a.zk.zk.get("/config/brokers/<default>")[0])
    assert json.loads(raw) == {"version": 1, "config": {"log.retention.ms": "5000"}}
    names = sorted(await _run(a.zk.get_config_change_names))
    last = await _run(lambda: a.zk.zk.get(f"/config/changes/{names[-1]}")[0])
    assert json.loads(last) == {"version": 2, "entity_path": "brokers/<default>"}

    # a topic's notification is not this store's business; a group's is
    await _run(lambda: a.zk.set_or_create_topic_config("t", {"retention.ms": "1"}))
    await a.store.change_entity_config(GROUPS, "g", {"consumer.session.timeout.ms": "50000"})
    await _until("b sees the group", lambda: (GROUPS, "g") in seen)
    assert (BROKERS, "t") not in seen and ("topics", "t") not in seen

    # a znode that is not Kafka's JSON is skipped (with a warning), later changes still arrive
    await _run(lambda: a.zk.zk.create("/config/brokers/9", b"not json"))
    await _run(
        lambda: a.zk.zk.create(
            "/config/changes/config_change_",
            b'{"version":2,"entity_path":"brokers/9"}',
            sequence=True,
        )
    )
    await a.store.change_entity_config(GROUPS, "g2", {"consumer.session.timeout.ms": "50000"})
    await _until("b sees the second group", lambda: (GROUPS, "g2") in seen)
    assert "9" not in b.store.entities(BROKERS)

    # an empty config: Kafka keeps the znode, the entity is gone from both copies
    seen.clear()
    await a.store.change_entity_config(BROKERS, DEFAULT_ENTITY, {})
    await _until("b sees the removal", lambda: (BROKERS, DEFAULT_ENTITY) in seen)
    assert b.store.entities(BROKERS) == {} and a.store.entities(BROKERS) == {}
    raw = await _run(lambda: a.zk.zk.get("/config/brokers/<default>")[0])
    assert json.loads(raw) == {"version": 1, "config": {}}


async def test_dynamic_broker_config_is_applied_on_the_other_broker(
    chroot: str, pair: tuple[_Broker, _Broker]
) -> None:
    a, b = pair
    config1 = BrokerConfig.from_properties({"broker.id": "1"})
    config2 = BrokerConfig.from_properties({"broker.id": "2"})
    d1, d2 = DynamicBrokerConfig(config1, a.store), DynamicBrokerConfig(config2, b.store)
    d1.initialize()
    d2.initialize()
    reconfigured: list[int] = []

    async def on_log_keys(_old: BrokerConfig, new: BrokerConfig) -> None:
        reconfigured.append(int(new.get("log.retention.ms")))

    d2.add_reconfigurable({"log.retention.ms"}, on_log_keys)

    await d1.alter({"log.retention.ms": "7000"}, per_broker=False)
    await _until("broker 2 applies the default", lambda: reconfigured == [7000])
    assert d2.dynamic_default_configs() == {"log.retention.ms": "7000"}

    # broker 1's own level is not broker 2's
    await d1.alter({"log.retention.ms": "8000"}, per_broker=True)
    await _until("b has broker 1's entity", lambda: "1" in b.store.entities(BROKERS))
    assert d2.dynamic_broker_configs() == {} and reconfigured == [7000]
    assert int(config1.get("log.retention.ms")) == 8000

    # a new session (a restart) reads both levels at start
    c = await _Broker(chroot).start()
    try:
        d3 = DynamicBrokerConfig(BrokerConfig.from_properties({"broker.id": "1"}), c.store)
        d3.initialize()
        assert d3.dynamic_default_configs() == {"log.retention.ms": "7000"}
        assert d3.dynamic_broker_configs() == {"log.retention.ms": "8000"}
        assert int(d3.config.get("log.retention.ms")) == 8000
    finally:
        await c.close()


async def test_notifications_older_than_the_expiration_are_purged(chroot: str) -> None:
    clock = ManualClock(int(time.time() * 1000))
    a, b = await _Broker(chroot, clock).start(), await _Broker(chroot).start()
    try:
        await b.store.change_entity_config(BROKERS, "1", {"log.retention.ms": "1"})
        await _until("a reads it", lambda: a.store.entity_config(BROKERS, "1") != {})
        assert len(await _run(a.zk.get_config_change_names)) == 1  # not expired

        clock.advance(CHANGE_EXPIRATION_MS + 60_000)
        await b.store.change_entity_config(BROKERS, "1", {"log.retention.ms": "2"})
        await _until(
            "a reads it again",
            lambda: a.store.entity_config(BROKERS, "1").get("log.retention.ms") == "2",
        )
        # purged right after a read them (both were created before a's now - 15 minutes)
        assert await _run(a.zk.get_config_change_names) == []
    finally:
        await a.close()
        await b.close()
