"""ACL stores: two brokers' ZooKeeper stores (their own sessions, one chroot) see each other's
changes through Kafka's notification znodes, whose bytes are read back with kazoo; the file
store survives a reopen."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from tests.cluster.conftest import running_zookeeper

from odradek.cluster.zk import KafkaZkClient
from odradek.cluster.zookeeper import ZooKeeperServer
from odradek.security.acl_store import FileAclStore, ZkAclStore
from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from odradek.security.authorizer import AclAuthorizer
from odradek.security.principal import KafkaPrincipal

TIMEOUT = 10.0
T = TypeVar("T")
ALICE = KafkaPrincipal("User", "alice")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


async def _run(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


async def _until(what: str, check: Callable[[], bool]) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() > started + TIMEOUT:
            raise AssertionError(f"not so after {TIMEOUT} s: {what}")
        await asyncio.sleep(0.01)
    return time.monotonic() - started


class _Broker:
    def __init__(self, connect: str) -> None:
        self.zk = KafkaZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=4000)
        self.authorizer = AclAuthorizer()
        self.store = ZkAclStore(self.authorizer, self.zk)

    async def start(self) -> _Broker:
        await _run(self.zk.start)
        await self.store.start()
        return self

    async def close(self) -> None:
        self.store.close()
        await _run(self.zk.close)


@pytest.fixture
async def pair(zookeeper: ZooKeeperServer) -> AsyncIterator[tuple[_Broker, _Broker]]:
    chroot = f"{zookeeper.connect_string}/acl-{uuid.uuid4().hex[:8]}"
    a, b = _Broker(chroot), _Broker(chroot)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def binding(
    name: str,
    op: AclOperation,
    pattern_type: PatternType = PatternType.LITERAL,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    rtype: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern_type),
        AccessControlEntry("User:alice", "*", op, perm),
    )


async def test_zookeeper_layout_and_notifications(pair: tuple[_Broker, _Broker]) -> None:
    a, b = pair
    errors = await a.store.create(
        [
            binding("orders", AclOperation.READ),
            binding("pay", AclOperation.WRITE, PatternType.PREFIXED),
            binding("tx-1", AclOperation.WRITE, rtype=ResourceType.TRANSACTIONAL_ID),
        ]
    )
    assert errors == [None, None, None]
    kz = a.zk.zk
    data, _ = await _run(lambda: kz.get("/kafka-acl/Topic/orders"))
    assert data == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"Read","host":"*"}]}'
    )
    data, _ = await _run(lambda: kz.get("/kafka-acl-extended/prefixed/Topic/pay"))
    assert json.loads(data)["acls"][0]["operation"] == "Write"
    assert await _run(lambda: kz.exists("/kafka-acl/TransactionalId/tx-1")) is not None
    literal = sorted(await _run(lambda: kz.get_children("/kafka-acl-changes")))
    notes = [(await _run(lambda c=c: kz.get(f"/kafka-acl-changes/{c}")))[0] for c in literal]
    assert set(notes) == {b"TOPIC:orders", b"TRANSACTIONAL_ID:tx-1"}
    assert all(c.startswith("acl_changes_") and len(c) == 22 for c in literal)
    (ext,) = await _run(lambda: kz.get_children("/kafka-acl-extended-changes"))
    data, _ = await _run(lambda: kz.get(f"/kafka-acl-extended-changes/{ext}"))
    assert data == b'{"version":1,"resourceType":"TOPIC","name":"pay","patternType":"PREFIXED"}'

    took = await _until(
        "b sees a's ACLs",
        lambda: (
            b.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "orders")
            and b.authorizer.authorize(
                ALICE, "h", AclOperation.WRITE, ResourceType.TOPIC, "payments"
            )
        ),
    )
    assert took < 1.0
    removed = await b.store.delete(
        [AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))]
    )
    assert removed == [[binding("orders", AclOperation.READ)]]
    assert await _run(lambda: kz.exists("/kafka-acl/Topic/orders")) is None
    await _until(
        "a sees the deletion",
        lambda: (
            not a.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "orders")
        ),
    )


async def test_a_broker_started_later_loads_every_acl(
    pair: tuple[_Broker, _Broker], zookeeper: ZooKeeperServer
) -> None:
    a, _ = pair
    await a.store.create(
        [binding("g", AclOperation.READ, PatternType.PREFIXED, rtype=ResourceType.GROUP)]
    )
    chroot = a.zk.chroot
    late = _Broker(f"{zookeeper.connect_string}{chroot}")
    await late.start()
    try:
        assert late.authorizer.authorize(ALICE, "h", AclOperation.READ, ResourceType.GROUP, "g1")
    finally:
        await late.close()


async def test_file_store_survives_reopen(tmp_path: Path) -> None:
    store = FileAclStore(AclAuthorizer(), tmp_path)
    ok, bad = await store.create([binding("t", AclOperation.ALL), binding("", AclOperation.READ)])
    assert ok is None and isinstance(bad, ValueError)
    again = FileAclStore(AclAuthorizer(), tmp_path)
    assert again.authorizer.bindings() == [binding("t", AclOperation.ALL)]
    assert await again.delete([AclBindingFilter()]) == [[binding("t", AclOperation.ALL)]]
    assert FileAclStore(AclAuthorizer(), tmp_path).authorizer.bindings() == []
