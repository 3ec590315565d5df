"""SchemaStore against a real broker (no registry HTTP): a write returns only once this node's
state has applied it; a second store replays the same state; records of other kinds in the
topic are skipped."""

from __future__ import annotations

import asyncio
import uuid

from odradek.client import Producer
from odradek.registry.records import ConfigRecord, SchemaRecord
from odradek.registry.store import SchemaStore
from odradek.testing.process import BrokerProcess


def test_read_your_writes_and_replay(broker: BrokerProcess) -> None:
    topic = f"_schemas-{uuid.uuid4().hex[:6]}"

    async def run() -> None:
        store = SchemaStore(broker.bootstrap_servers, topic=topic)
        await store.start()
        try:
            for i in range(1, 21):
                await store.write(SchemaRecord("s", i, i, f'"x{i}"'))
                # no await in between: the state holds the write when write() returns
                assert store.state.subjects["s"][i].id == i
                assert store.state.max_id == i
            await store.write(ConfigRecord(None, "FULL"))
            assert store.state.configs == {None: "FULL"}
        finally:
            await store.close()
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as p:
            p.send(topic, b"garbage", key=b"not a registry key", partition=0).result(10)
        again = SchemaStore(broker.bootstrap_servers, topic=topic)
        await again.start()  # replays to the end before returning
        try:
            assert sorted(again.state.subjects["s"]) == list(range(1, 21))
            assert again.state.configs == {None: "FULL"}
            assert again.state.max_id == 20
        finally:
            await again.close()

    asyncio.run(run())
