"""The ``_schemas`` topic as the registry's storage: one writer, a reader that replays it.

``SchemaStore(bootstrap)`` talks to the cluster through odradek.client only (an ``AsyncAdmin``,
an ``AsyncProducer`` and an ``AsyncConsumer`` on the running event loop), so it behaves the same
inside a broker (pointed at the broker's own listener), in a cluster, and against any
Kafka-compatible cluster.

* ``start()`` creates ``_schemas`` if missing (one partition, ``cleanup.policy=compact``,
  ``replication_factor`` replicas, by default min(3, brokers), waiting for that many brokers),
  replays it from the start into ``state`` up to its end
  offset, then keeps reading in the background.
* ``write(record)`` produces one record (acks=all, idempotent) and returns once the reader has
  applied it: a read on this node after a write sees the write (read-your-writes). Writes are
  serialized by ``lock``, which callers hold across "read the state, decide, write" so that two
  registrations never take the same id or version.
* Records that are not registry records are logged and skipped (as Confluent does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from odradek.client import KafkaError, NewTopic, TopicPartition
from odradek.client.aio import AsyncAdmin, AsyncConsumer, AsyncProducer

from . import records
from .records import Record
from .state import RegistryState

__all__ = ["DEFAULT_TOPIC", "SchemaStore"]

log = logging.getLogger("odradek.registry")

DEFAULT_TOPIC = "_schemas"
"""Confluent's ``kafkastore.topic`` default."""
WRITE_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 5.0
"""How long ``close()`` lets the producer deliver what it still holds."""


class SchemaStore:
    def __init__(
        self,
        bootstrap: str,
        *,
        topic: str = DEFAULT_TOPIC,
        client_config: dict[str, Any] | None = None,
        timeout_s: float = WRITE_TIMEOUT_S,
        replication_factor: int | None = None,
    ) -> None:
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self.state = RegistryState()
        self.lock = asyncio.Lock()
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": "odradek-schema-registry",
        }
        self._config.update(client_config or {})
        self._tp = TopicPartition(topic, 0)
        self._producer: AsyncProducer | None = None
        self._consumer: AsyncConsumer | None = None
        self._admin: AsyncAdmin | None = None
        self._reader: asyncio.Task[None] | None = None
        self._applied = asyncio.Condition()
        self.cluster_id: str | None = None

    async def start(self) -> None:
        admin = AsyncAdmin(dict(self._config))
        await admin.start()
        self._admin = admin
        await self._create_topic(admin)
        producer = AsyncProducer({**self._config, "acks": "all", "linger.ms": 0})
        await producer.start()
        self._producer = producer
        consumer = AsyncConsumer(
            {
                **self._config,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.max.wait.ms": 100,
            }
        )
        await consumer.start()
        consumer.assign([self._tp])
        consumer.seek_to_beginning(self._tp)
        self._consumer = consumer
        end = (await consumer.end_offsets([self._tp]))[self._tp]
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        while self.state.applied < end:
            await self._read_once(0.5)
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{self.topic}: replay did not reach offset {end}")
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    async def _create_topic(self, admin: AsyncAdmin) -> None:
        """Create ``_schemas`` unless it exists, with ``replication_factor`` replicas once that
        many brokers are up (waiting up to ``timeout_s``; then with the brokers there are, as
        Confluent does, logged as a warning)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            cluster = await admin.describe_cluster()
            self.cluster_id = cluster.get("cluster_id")
            if self.topic in await admin.list_topics(include_internal=True):
                return
            live = len(cluster["brokers"])
            wanted = self.replication_factor or min(3, live)
            if live >= wanted or loop.time() > deadline:
                break
            await asyncio.sleep(0.2)
        rf = max(1, min(wanted, live))
        if rf < wanted:
            log.warning(
                "creating %s with %d replicas, fewer than %d: brokers missing",
                self.topic,
                rf,
                wanted,
            )
        await admin.create_topics(
            [NewTopic(self.topic, 1, rf, {"cleanup.policy": "compact"})], raise_on_exists=False
        )

    async def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        if self._producer is not None:  # a write that never landed fails rather than holds
            with contextlib.suppress(Exception):  # the close for delivery.timeout.ms
                await self._producer.close(timeout=CLOSE_TIMEOUT_S)
        for client in (self._consumer, self._admin):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
        self._producer = self._consumer = self._admin = None

    async def _read_loop(self) -> None:
        while True:
            try:
                await self._read_once(1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the client reconnects; log and keep reading
                log.warning("schema registry: reading %s failed: %s", self.topic, exc)
                await asyncio.sleep(0.5)

    async def _read_once(self, timeout: float) -> None:
        assert self._consumer is not None
        batch = await self._consumer.poll(timeout)
        for r in batch:
            try:
                record = records.decode(r.key, r.value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("schema registry: skipping %s@%s: %s", self.topic, r.offset, exc)
            else:
                self.state.apply(record)
            self.state.applied = r.offset + 1
        # past offsets without a record (control batches, compacted away) count as applied
        position = await self._consumer.position(self._tp)
        if batch or position > self.state.applied:
            self.state.applied = max(self.state.applied, position)
            async with self._applied:
                self._applied.notify_all()

    async def write(self, record: Record) -> int:
        """Produce ``record`` and wait until this node's state has applied it; returns its offset."""
        if self._producer is None:
            raise RuntimeError("schema store is not started")
        md = await asyncio.wait_for(
            self._producer.send_and_wait(self.topic, record.value(), key=record.key(), partition=0),
            self.timeout_s,
        )
        await self.wait_applied(md.offset + 1)
        return int(md.offset)

    async def end_offset(self) -> int:
        """The log end offset of ``_schemas``, asked on the admin's own connection (the
        reader's may be waiting in a long-polling Fetch). While the partition changes leader
        (a broker died) the answer is an error: asked again, 0.1 s apart, for up to
        ``timeout_s``."""
        assert self._admin is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            try:
                ends = await asyncio.wait_for(
                    self._admin.list_offsets({self._tp: "latest"}), self.timeout_s
                )
                return int(ends[self._tp][0])
            except KafkaError as exc:
                if loop.time() > deadline:
                    raise
                log.debug("schema registry: end offset of %s: %s", self.topic, exc)
                await asyncio.sleep(0.1)
                with contextlib.suppress(KafkaError):  # learn the partition's new leader
                    await self._admin.describe_topics([self.topic])

    async def catch_up(self) -> None:
        """Wait until every record written to ``_schemas`` so far (by any node) is applied: a
        writer decides on the latest state, and a node that forwarded a write sees it."""
        end = await self.end_offset()
        if self.state.applied < end:
            await self.wait_applied(end)

    async def wait_applied(self, offset: int) -> None:
        """Return once every record before ``offset`` has been applied (TimeoutError after
        ``timeout_s``)."""
        async with self._applied:
            await asyncio.wait_for(
                self._applied.wait_for(lambda: self.state.applied >= offset), self.timeout_s
            )
