"""Which registry of a cluster writes: a consumer group on ``_schemas``, as Confluent and
Karapace elect their leader.

Every registry joins the group ``schema-registry`` subscribed to ``_schemas``, its client id
``odradek-schema-registry@<its URL>``. ``_schemas`` has one partition, so the group's assignor
hands it to exactly one member: that member is the writer (``is_writer``); when it leaves or
its session expires, the group rebalances and another member gets the partition. The election
consumer never reads (its partition stays paused): the store's own reader does.

``writer_url()`` asks the group coordinator (DescribeGroups) which member holds the partition and
returns the URL in its client id, or None while the group rebalances. Between a writer's loss
of the partition and the next assignment there is no writer; a write then waits
(``wait_writer``) and fails with 50004 when none appears in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from odradek.client import KafkaError, TopicPartition
from odradek.client.aio import AsyncAdmin, AsyncConsumer

__all__ = ["CLIENT_ID_PREFIX", "GROUP_ID", "WriterElection"]

log = logging.getLogger("odradek.registry")

GROUP_ID = "schema-registry"
"""Confluent's ``schema.registry.group.id`` default."""
CLIENT_ID_PREFIX = "odradek-schema-registry@"


class WriterElection:
    def __init__(
        self,
        bootstrap: str,
        url: str,
        *,
        topic: str = "_schemas",
        group_id: str = GROUP_ID,
        session_timeout_ms: int = 6000,
        client_config: dict[str, Any] | None = None,
    ) -> None:
        """``client_config``: Java-client security settings (``security.protocol``,
        ``sasl.*``, ``ssl.*``) for the consumer and the admin client."""
        self.url = url
        self._security: dict[str, Any] = dict(client_config or {})
        self.topic = topic
        self.group_id = group_id
        self.is_writer = False
        self._tp = TopicPartition(topic, 0)
        self._changed = asyncio.Event()
        self._config: dict[str, Any] = {
            **self._security,
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID_PREFIX + url,
            "group.id": group_id,
            "enable.auto.commit": False,
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": max(100, session_timeout_ms // 10),
            "auto.offset.reset": "latest",
        }
        self._consumer: AsyncConsumer | None = None
        self._admin: AsyncAdmin | None = None

    # the rebalance listener (odradek.client calls these from the membership task)
    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self._tp in assigned and self._consumer is not None:
            self._consumer.pause(self._tp)
            self.is_writer = True
            log.info("schema registry %s is the writer", self.url)
        self._changed.set()

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if self._tp in revoked:
            self.is_writer = False
        self._changed.set()

    on_partitions_lost = on_partitions_revoked

    async def start(self) -> None:
        consumer = AsyncConsumer(dict(self._config))
        self._consumer = consumer
        consumer.subscribe([self.topic], self)  # type: ignore[arg-type]
        await consumer.start()
        admin = self._new_admin()
        await admin.start()
        self._admin = admin

    def _new_admin(self) -> AsyncAdmin:
        return AsyncAdmin({**self._security, "bootstrap.servers": self._config["bootstrap.servers"]})

    async def close(self) -> None:
        self.is_writer = False
        consumer, self._consumer = self._consumer, None
        admin, self._admin = self._admin, None
        for client in (consumer, admin):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()

    async def writer_url(self) -> str | None:
        if self.is_writer:
            return self.url
        if self._admin is None:
            return None
        try:
            described = await self._admin.describe_groups([self.group_id])
        except KafkaError as exc:  # the coordinator moves (a broker died): ask again later
            log.debug("schema registry: describing group %s: %s", self.group_id, exc)
            # a new admin: the old one may keep asking the dead coordinator it cached
            old, self._admin = (
                self._admin,
                self._new_admin(),
            )
            with contextlib.suppress(Exception):
                await old.close()
            await self._admin.start()
            return None
        group = described.get(self.group_id)
        if group is None:
            return None
        for member in group.members:
            if self._tp in member.assignment and member.client_id.startswith(CLIENT_ID_PREFIX):
                return member.client_id[len(CLIENT_ID_PREFIX) :]
        return None

    async def wait_writer(self, timeout_s: float) -> str | None:
        """The writer's URL, waiting up to ``timeout_s`` while there is none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            url = await self.writer_url()
            if url is not None:
                return url
            left = deadline - loop.time()
            if left <= 0:
                return None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
