"""SCRAM credentials and client quotas share ``/config/users/<user>`` (Kafka's layout): two
brokers' stores over one real ZooKeeper, the SCRAM path (``ScramCredentials`` over
``ZkConfigEntityStore``) on one, the quota path (``ZkQuotaStore``) on the other. A quota
written by the other broker is never written back over by a SCRAM change, whichever comes first,
and the znode's keys stay in Kafka's order.

The interleavings are made deterministic, not timed: the quota write is done on the event
loop's thread right before the SCRAM change (so this broker's copy cannot have seen it), or
between the SCRAM path's read and its conditional write."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import pytest

from odradek.broker.zk_config_store import ZkConfigEntityStore
from odradek.broker.zk_quota_store import ZkQuotaStore
from odradek.cluster.zk import KafkaZkClient
from odradek.security.credentials import USERS, ScramCredentials
from odradek.security.quota_store import QuotaOp, encode_entity_config
from odradek.security.scram import scram_credential

T = TypeVar("T")


async def _run(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


class _Broker:
    """One broker's ZooKeeper session with its config-entity store and its quota store."""

    def __init__(self, connect: str) -> None:
        self.zk = KafkaZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=4000)
        self.configs = ZkConfigEntityStore(self.zk, admin_timeout_ms=2000)
        self.quotas = ZkQuotaStore(self.zk, admin_timeout_ms=2000)
        self.credentials = ScramCredentials(lambda: self.configs)

    async def start(self) -> _Broker:
        await _run(self.zk.start)
        await self.configs.start()
        await self.quotas.start()
        return self

    async def close(self) -> None:
        self.quotas.close()
        self.configs.close()
        await _run(self.zk.close)


@pytest.fixture
async def pair(zk_connect: str) -> AsyncIterator[tuple[_Broker, _Broker]]:
    chroot = f"{zk_connect}/users-{uuid.uuid4().hex[:8]}"
    a, b = _Broker(chroot), _Broker(chroot)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def _znode(broker: _Broker, user: str) -> bytes:
    data, _ = broker.zk.zk.get(f"/config/users/{user}")
    return bytes(data)


async def test_scram_change_keeps_a_quota_its_copy_has_not_seen(
    pair: tuple[_Broker, _Broker],
) -> None:
    a, b = pair
    sha256 = scram_credential("SCRAM-SHA-256", "secret")
    sha512 = scram_credential("SCRAM-SHA-512", "secret")
    await a.credentials.alter("alice", {"SCRAM-SHA-256": sha256}, set())
    # broker b sets a quota; the loop does not run between this and the SCRAM change, so a's
    # copy of /config/users/alice cannot have taken b's notification yet
    b.quotas._write(("alice", None), [QuotaOp("producer_byte_rate", 1024.0, False)])
    await a.credentials.alter("alice", {"SCRAM-SHA-512": sha512}, set())

    expected = {
        "SCRAM-SHA-256": sha256.to_config(),
        "producer_byte_rate": "1024",
        "SCRAM-SHA-512": sha512.to_config(),
    }
    data = await _run(lambda: _znode(a, "alice"))
    assert json.loads(data)["config"] == expected
    assert data == encode_entity_config(expected)  # Kafka's key order
    assert a.configs.entity_config(USERS, "alice") == expected


async def test_quota_written_between_read_and_write_makes_the_scram_write_retry(
    pair: tuple[_Broker, _Broker],
) -> None:
    a, b = pair
    b.quotas._write(("bob", None), [QuotaOp("consumer_byte_rate", 2048.0, False)])
    configs, version = await _run(lambda: a.configs.read_entity_znode(USERS, "bob"))
    assert configs == {"consumer_byte_rate": "2048"}
    # another broker's quota write lands between the SCRAM path's read and its write
    b.quotas._write(("bob", None), [QuotaOp("request_percentage", 50.0, False)])
    configs["SCRAM-SHA-256"] = "stale"
    written = await _run(lambda: a.configs.write_entity_znode(USERS, "bob", configs, version))
    assert written is False
    data = await _run(lambda: _znode(a, "bob"))
    assert json.loads(data)["config"] == {
        "consumer_byte_rate": "2048",
        "request_percentage": "50.0",
    }

    sha256 = scram_credential("SCRAM-SHA-256", "secret")
    await a.credentials.alter("bob", {"SCRAM-SHA-256": sha256}, set())
    expected = {
        "consumer_byte_rate": "2048",
        "request_percentage": "50.0",
        "SCRAM-SHA-256": sha256.to_config(),
    }
    data = await _run(lambda: _znode(a, "bob"))
    assert data == encode_entity_config(expected)

    # a deletion removes only its mechanism; the quotas stay
    await a.credentials.alter("bob", {}, {"SCRAM-SHA-256"})
    data = await _run(lambda: _znode(a, "bob"))
    assert json.loads(data)["config"] == {
        "consumer_byte_rate": "2048",
        "request_percentage": "50.0",
    }


async def test_scram_change_on_a_new_user_loses_no_concurrent_create(
    pair: tuple[_Broker, _Broker],
) -> None:
    a, b = pair
    configs, version = await _run(lambda: a.configs.read_entity_znode(USERS, "carol"))
    assert (configs, version) == ({}, None)
    b.quotas._write(("carol", None), [QuotaOp("producer_byte_rate", 100.0, False)])
    written = await _run(
        lambda: a.configs.write_entity_znode(USERS, "carol", {"SCRAM-SHA-256": "x"}, None)
    )
    assert written is False
    data = await _run(lambda: _znode(a, "carol"))
    assert json.loads(data)["config"] == {"producer_byte_rate": "100"}
