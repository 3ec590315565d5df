"""Cluster view shared by producer, consumer and admin: connections, metadata, coordinators.

* One ``BrokerConnection`` per broker node id (bootstrap connections use negative ids until the
  first Metadata answer names the brokers).
* Metadata cache: topic -> partitions (leader, replicas, isr, leader epoch); refreshed on demand
  (``refresh``), when older than ``metadata.max.age.ms``, and after retriable errors that mean
  the cache is stale (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE).
* Reconnect with exponential backoff per node (``reconnect.backoff.ms`` .. ``.max.ms``).
* A node id the metadata no longer lists (a leader or coordinator cached before its broker left)
  raises ``BrokerNotAvailableError``, a ``KafkaConnectionError``: callers treat it like a closed
  connection (refresh metadata or find the coordinator again, retry within their timeout).
* Connect tasks: at most one per node (``_connecting``), shared by every caller; a done callback
  removes it and retrieves its outcome, so that a task whose callers were all cancelled never
  leaves an exception unretrieved; ``close`` cancels and awaits those still running.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections.abc import Iterable
from typing import Any

from . import _protocol as proto
from ._config import parse_bootstrap
from ._conn import BrokerConnection
from ._security import ClientSecurity
from .errors import BrokerNotAvailableError, KafkaConnectionError, KafkaError, KafkaTimeoutError
from .types import PartitionInfo, TopicPartition

__all__ = ["Cluster"]

RETRIABLE_METADATA_ERRORS = {3, 5, 6, 13, 74, 75}  # unknown tp, leader n/a, not leader, ...


class Cluster:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.client_id: str = config["client.id"]
        self.bootstrap = parse_bootstrap(config["bootstrap.servers"])
        # TLS context and SASL credentials, built once (None: PLAINTEXT); raises ConfigError
        self.security = ClientSecurity.from_config(config)
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, list[PartitionInfo]] = {}
        self.topic_errors: dict[str, int] = {}
        self.topic_ids: dict[str, Any] = {}
        self.internal_topics: set[str] = set()
        self.controller_id = -1
        self.cluster_id: str | None = None
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._backoff: dict[int, tuple[float, float]] = {}  # node -> (next allowed time, delay)
        self._metadata_time = 0.0
        self._metadata_lock: asyncio.Lock | None = None
        self._wanted_topics: set[str] = set()
        self.coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node
        self.closed = False

    # -- connections ------------------------------------------------------------------------
    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id in self.brokers:
            return self.brokers[node_id]
        if node_id < 0 and -node_id - 1 < len(self.bootstrap):
            return self.bootstrap[-node_id - 1]
        raise BrokerNotAvailableError(f"unknown broker id {node_id}")

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The open connection to ``node_id``, or None (then ``connection`` opens one).

        For callers that must write frames in a fixed order: a frame written right after this
        returns goes out before any written later (``await connection()`` may resume late)."""
        conn = self._conns.get(node_id)
        return conn if conn is not None and conn.connected else None

    async def connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        if self.closed:
            raise KafkaConnectionError("client closed")
        task = self._connecting.get(node_id)
        if task is None:
            task = asyncio.ensure_future(self._connect(node_id))
            self._connecting[node_id] = task
            task.add_done_callback(functools.partial(self._connect_done, node_id))
        # shielded: one caller cancelled does not cancel the connect the others wait for
        return await asyncio.shield(task)

    def _connect_done(self, node_id: int, task: asyncio.Task[BrokerConnection]) -> None:
        if self._connecting.get(node_id) is task:
            del self._connecting[node_id]
        if not task.cancelled():
            task.exception()  # retrieved: the callers (if any are left) get it from the shield

    async def _connect(self, node_id: int) -> BrokerConnection:
        next_time, delay = self._backoff.get(node_id, (0.0, 0.0))
        wait = next_time - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        host, port = self._address(node_id)
        try:
            conn = await BrokerConnection.open(
                node_id,
                host,
                port,
                client_id=self.client_id,
                request_timeout_ms=self.config["request.timeout.ms"],
                connect_timeout_ms=self.config["socket.connection.setup.timeout.ms"],
                security=self.security,
            )
        except KafkaError:
            base = self.config["reconnect.backoff.ms"] / 1000
            cap = self.config["reconnect.backoff.max.ms"] / 1000
            delay = min(cap, max(base, delay * 2))
            self._backoff[node_id] = (time.monotonic() + delay * random.uniform(0.8, 1.2), delay)
            raise
        self._backoff.pop(node_id, None)
        if self.closed:  # closed while the connection opened: nobody would close it
            conn.close()
            raise KafkaConnectionError("client closed")
        old = self._conns.get(node_id)
        if old is not None:
            old.close()
        self._conns[node_id] = conn
        return conn

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one if any, else the known brokers in turn."""
        for conn in self._conns.values():
            if conn.connected:
                return conn
        nodes = list(self.brokers) or [-(i + 1) for i in range(len(self.bootstrap))]
        random.shuffle(nodes)
        if self.brokers:
            nodes += [-(i + 1) for i in range(len(self.bootstrap))]
        last: Exception | None = None
        for node in nodes:
            try:
                return await self.connection(node)
            except KafkaError as exc:
                last = exc
        raise last or KafkaConnectionError("no broker reachable")

    async def close(self) -> None:
        self.closed = True
        tasks = list(self._connecting.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # -- metadata ---------------------------------------------------------------------------
    def want_topics(self, topics: Iterable[str]) -> None:
        self._wanted_topics.update(topics)

    def metadata_stale(self) -> bool:
        max_age_s = float(self.config["metadata.max.age.ms"]) / 1000
        return time.monotonic() - self._metadata_time > max_age_s

    async def refresh(self, topics: Iterable[str] | None = None, *, all_topics: bool = False, auto_create: bool = False) -> None:
        """Fetch metadata for ``topics`` (plus those wanted before), or every topic."""
        if self._metadata_lock is None:
            self._metadata_lock = asyncio.Lock()
        if topics is not None:
            self._wanted_topics.update(topics)
        async with self._metadata_lock:
            conn = await self.any_connection()
            version = conn.version(3)
            mod = proto.request_module(3, version)
            if all_topics:
                req_topics = None
            else:
                req_topics = [proto.nested(mod, "MetadataRequestTopic", name=t, topic_id=None) for t in sorted(self._wanted_topics)]
            req = proto.build(
                mod.MetadataRequest,
                topics=req_topics,
                allow_auto_topic_creation=auto_create,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
            try:
                resp = await conn.request(req)
            except KafkaConnectionError:
                conn.close()
                raise
            self._apply_metadata(resp, all_topics)

    def _apply_metadata(self, resp: Any, all_topics: bool) -> None:
        self.brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers}
        self.controller_id = int(getattr(resp, "controller_id", -1))
        self.cluster_id = getattr(resp, "cluster_id", None)
        if all_topics:
            self.topics.clear()
        for t in resp.topics:
            name = str(t.name)
            err = int(t.error_code)
            if getattr(t, "is_internal", False):
                self.internal_topics.add(name)
            if err and not t.partitions:
                self.topic_errors[name] = err
                if err == 3:
                    self.topics.pop(name, None)
                continue
            self.topic_errors.pop(name, None)
            tid = getattr(t, "topic_id", None)
            if tid is not None:
                self.topic_ids[name] = tid
            parts = sorted(
                (
                    PartitionInfo(
                        name,
                        int(p.partition_index),
                        int(p.leader_id),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                        int(getattr(p, "leader_epoch", -1)),
                        int(p.error_code),
                        tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
            self.topics[name] = parts
        self._metadata_time = time.monotonic()

    def partitions_for(self, topic: str) -> list[PartitionInfo] | None:
        return self.topics.get(topic)

    def leader_for(self, tp: TopicPartition) -> int:
        parts = self.topics.get(tp.topic)
        if parts is None or tp.partition >= len(parts):
            return -1
        return parts[tp.partition].leader

    async def wait_for_topics(self, topics: Iterable[str], timeout: float, *, auto_create: bool = False) -> None:
        """Refresh until every topic has metadata with leaders (or raise after ``timeout``)."""
        topics = list(topics)
        deadline = time.monotonic() + timeout
        delay = self.config["retry.backoff.ms"] / 1000
        while True:
            missing = [t for t in topics if t not in self.topics or any(p.leader < 0 for p in self.topics[t])]
            if not missing:
                return
            try:
                await self.refresh(missing, auto_create=auto_create)
            except KafkaConnectionError:
                pass
            missing = [t for t in topics if t not in self.topics or any(p.leader < 0 for p in self.topics[t])]
            if not missing:
                return
            if time.monotonic() >= deadline:
                err = self.topic_errors.get(missing[0], 3)
                raise KafkaTimeoutError(f"no metadata for topic(s) {missing} (last error {err})")
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)

    # -- coordinators -----------------------------------------------------------------------
    async def coordinator(self, group_id: str, *, key_type: int = 0, refresh: bool = False, timeout: float = 30.0) -> int:
        """The coordinator of a group (``key_type`` 0) or of a transactional id (1)."""
        if not refresh and (key_type, group_id) in self.coordinators:
            return self.coordinators[(key_type, group_id)]
        deadline = time.monotonic() + timeout
        while True:
            conn = await self.any_connection()
            version = conn.version(10)
            mod = proto.request_module(10, version)
            resp = await conn.request(proto.build(mod.FindCoordinatorRequest, key=group_id, key_type=key_type))
            err = int(resp.error_code)
            if not err:
                node = int(resp.node_id)
                self.brokers[node] = (str(resp.host), int(resp.port))
                self.coordinators[(key_type, group_id)] = node
                return node
            if err not in (14, 15, 16) or time.monotonic() > deadline:  # COORDINATOR_* retriable
                raise KafkaError(f"FindCoordinator for {'group' if key_type == 0 else 'transactional id'} {group_id!r} failed", err)
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
