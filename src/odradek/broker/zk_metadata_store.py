"""``ZkMetadataStore``: the ``MetadataStore`` of a broker in a cluster on ZooKeeper.

Reads answer from an in-memory image, Kafka's ``MetadataCache``: the live brokers, the
controller id and every partition's leader, leader epoch, replicas, ISR and znode version, as
the active controller last told this broker with UpdateMetadata (API 6,
:meth:`apply_update_metadata`). Topic configs come from ``/config/topics/<t>``, read when a
topic first appears and again on every ``/config/changes`` notification.

Writes go to ZooKeeper through ``odradek.cluster.zk.KafkaZkClient`` (blocking kazoo calls, run
in a worker thread) and the controller does the rest; a write returns once the image shows its
result, or after ``admin_timeout_ms`` (then with what ZooKeeper holds, leaders unknown):

* ``create_topic``: ``/config/topics/<t>`` then ``/brokers/topics/<t>`` (with the topic id);
* ``delete_topic``: ``/admin/delete_topics/<t>``;
* ``create_partitions``: ``/brokers/topics/<t>``, conditional on the version read;
* ``alter_topic_configs``: ``/config/topics/<t>`` plus a ``/config/changes`` notification;
* ``allocate_producer_ids``: a block from ``/latest_producer_id_block``;
* ``register_broker``: the ephemeral ``/brokers/ids/<id>``; its czxid is the broker epoch.

An admin write waits (up to ``admin_timeout_ms``) for a session that is not connected (ZooKeeper
restarting, a session being replaced); ZooKeeper still away, or the connection lost during the
write, raises ``MetadataUnavailableError`` (answered as REQUEST_TIMED_OUT), never a kazoo error.

UpdateMetadata is refused with STALE_CONTROLLER_EPOCH when its controller epoch is older than
the newest seen, and with STALE_BROKER_EPOCH when it was meant for an older registration of
this broker. A partition whose leader is -2 (LeaderDuringDelete) leaves the image. A full
UpdateMetadata (``type`` FULL, v8) replaces the partitions of the image: a topic or partition it
does not name leaves the image first (as Kafka's ZkMetadataCache does for a full update; Kafka
honours FULL only from a KRaft controller in migration, odradek's controller marks its full sends
to a (re)started broker and on failover FULL). A partition that leaves is announced as
``PartitionsChanged`` (``partition()`` then answers None), a topic that leaves as ``TopicDeleted``.

This module imports kazoo (through ``odradek.cluster.zk``): only a broker with
``zookeeper.connect`` imports it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from odradek.broker.metadata_store import (
    BrokerInfo,
    BrokersChanged,
    InvalidPartitionsError,
    ListenerAddress,
    MetadataChange,
    MetadataError,
    MetadataImage,
    MetadataStore,
    MetadataUnavailableError,
    PartitionsChanged,
    PartitionState,
    TopicConfigsChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    TopicMetadata,
    UnknownTopicError,
)
from odradek.cluster import zk as zkc
from odradek.cluster import znodes
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import TYPE_FULL, ZERO_UUID, UpdateMetadataRequest

__all__ = ["INTERNAL_TOPICS", "LEADER_DURING_DELETE", "ZkMetadataStore", "topic_id_to_zk"]

log = logging.getLogger("odradek.broker")

T = TypeVar("T")

LEADER_DURING_DELETE = -2
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _protocol_name(code: int) -> str:
    """A security protocol's name from its id on the wire (UpdateMetadata's endpoints)."""
    if 0 <= code < len(znodes.SECURITY_PROTOCOLS):
        return znodes.SECURITY_PROTOCOLS[code]
    return "PLAINTEXT"


def _stand_in_id(name: str) -> uuid.UUID:
    """The id the image gives a topic UpdateMetadata names without one (the zero UUID)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"odradek-topic:{name}")


def topic_id_to_zk(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka writes it in ``/brokers/topics/<t>``: URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


class ZkMetadataStore(MetadataImage):
    """Cluster metadata from UpdateMetadata, admin writes to ZooKeeper. See the module docstring."""

    def __init__(
        self,
        node_id: int,
        zookeeper_connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int = 18_000,
        admin_timeout_ms: int = 30_000,
        inter_broker_listener: str | None = None,
    ) -> None:
        super().__init__(node_id, "")
        self.inter_broker_listener = inter_broker_listener
        """The listener whose endpoint is a broker's ``host``/``port`` in the image (None:
        each broker's first endpoint)."""
        self.zk = zkc.KafkaZkClient(
            zookeeper_connect,
            session_timeout_ms=session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms,
            inter_broker_listener=inter_broker_listener,
        )
        self.admin_timeout_ms = admin_timeout_ms
        self._controller_id = -1
        self._controller_epoch = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._closed = False
        self.updates_applied = 0
        """UpdateMetadata requests applied (tests wait on it)."""

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to ZooKeeper (Kafka's paths created), read or create ``/cluster/id``, and
        watch ``/config/changes``."""
        self._loop = asyncio.get_running_loop()
        await self._run(self.zk.start)
        self._cluster_id = await self._run(self.zk.get_or_create_cluster_id)
        await self._run(lambda: self.zk.watch_children(znodes.CONFIG_CHANGES, self._on_config_changes))

    async def _run(self, fn: Callable[[], T]) -> T:
        """A blocking ZooKeeper call in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def _write(self, fn: Callable[[], T]) -> T:
        """An admin write (blocking ZooKeeper calls, in a worker thread) once the session is
        connected: a ZooKeeper restart or a session being replaced is waited for, up to
        ``admin_timeout_ms``. ZooKeeper still away, or the connection lost during the write,
        raises ``MetadataUnavailableError`` (the write may or may not have happened)."""
        timeout_s = self.admin_timeout_ms / 1000

        def call() -> T:
            if not self.zk.wait_writable(timeout_s):
                raise MetadataUnavailableError(
                    f"ZooKeeper is not reachable (waited {self.admin_timeout_ms} ms)"
                )
            try:
                return fn()
            except (ConnectionLoss, SessionExpiredError, znodes.NotConnectedError) as exc:
                raise MetadataUnavailableError(
                    f"the ZooKeeper session was interrupted: {type(exc).__name__}"
                ) from exc

        return await self._run(call)

    @property
    def broker_epoch(self) -> int:
        """The czxid of this broker's registration (-1 before ``register_broker``)."""
        return self.zk.broker_epoch

    # -- reads -------------------------------------------------------------------------------

    def controller_id(self) -> int:
        return self._controller_id

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    # -- UpdateMetadata ------------------------------------------------------------------------

    def apply_update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode:
        """Apply one UpdateMetadata (on the event loop); NONE or why it was refused."""
        if request.controller_epoch < self._controller_epoch:
            return ErrorCode.stale_controller_epoch
        own_epoch = self.zk.broker_epoch
        if request.broker_epoch != -1 and own_epoch != -1 and request.broker_epoch < own_epoch:
            return ErrorCode.stale_broker_epoch
        changes: list[MetadataChange] = []
        brokers: dict[int, BrokerInfo] = {}
        for b in request.live_brokers:
            if not b.endpoints:
                continue
            endpoints = tuple(
                ListenerAddress(e.listener, _protocol_name(e.security_protocol), e.host, e.port)
                for e in b.endpoints
            )
            ep = next((e for e in endpoints if e.listener == self.inter_broker_listener), None)
            host, port = (ep or endpoints[0]).host, (ep or endpoints[0]).port
            epoch = own_epoch if b.id == self._node_id else 0
            brokers[b.id] = BrokerInfo(b.id, host, port, b.rack, epoch, endpoints)
        controller_moved = request.controller_id != self._controller_id
        self._controller_epoch = request.controller_epoch
        self._controller_id = request.controller_id
        if brokers != self._brokers or controller_moved:
            self._brokers = brokers
            changes.append(BrokersChanged(tuple(self.live_brokers()), self._controller_id))
        created: dict[str, TopicMetadata] = {}
        touched: dict[str, list[int]] = {}
        deleted: dict[str, TopicMetadata] = {}
        if request.type == TYPE_FULL:
            for name, index in self._omitted_by(request):
                self._remove_partition(name, index, deleted, touched)
        for s in request.partition_states:
            name = s.topic_name
            if s.leader == LEADER_DURING_DELETE:
                self._remove_partition(name, s.partition_index, deleted, touched)
                continue
            state = PartitionState(
                s.partition_index,
                s.leader,
                s.leader_epoch,
                list(s.replicas),
                list(s.isr),
                s.controller_epoch,
                s.zk_version,
                list(s.offline_replicas),
            )
            topic = self._topics.get(name)
            tid = request.topic_ids.get(name, ZERO_UUID)
            if topic is None:
                if tid == ZERO_UUID:
                    tid = _stand_in_id(name)
                topic = TopicMetadata(name, tid, [], {}, internal=name in INTERNAL_TOPICS)
                self._topics[name] = topic
                self._by_id[tid] = topic
                created[name] = topic
            elif tid != ZERO_UUID and topic.topic_id == _stand_in_id(name):
                # the controller gave the topic an id (Kafka's controller does so on failover)
                self._by_id.pop(topic.topic_id, None)
                topic.topic_id = tid
                self._by_id[tid] = topic
            self._put_partition(topic, state)
            if name not in created:
                touched.setdefault(name, []).append(s.partition_index)
        for topic in deleted.values():
            changes.append(TopicDeleted(topic))
        for topic in created.values():
            changes.append(TopicCreated(topic))
        for name, parts in touched.items():
            if name in self._topics and name not in created:
                changes.append(PartitionsChanged(self._topics[name], tuple(sorted(set(parts)))))
        self.updates_applied += 1
        for change in changes:
            self._announce(change)
        if created and self._loop is not None:
            names = list(created)
            self._loop.create_task(self._load_configs(names))
        self._signal()
        return ErrorCode.none

    def _omitted_by(self, request: UpdateMetadataRequest) -> list[tuple[str, int]]:
        """The partitions of the image a full UpdateMetadata does not name: those of a topic it
        omits, or names with another topic id (deleted and created again), and those a topic
        it names no longer has (Kafka's ZkMetadataCache, for a full update)."""
        named: dict[str, set[int]] = {}
        for s in request.partition_states:
            named.setdefault(s.topic_name, set()).add(s.partition_index)
        omitted: list[tuple[str, int]] = []
        for name, topic in self._topics.items():
            indexes = named.get(name)
            tid = request.topic_ids.get(name, ZERO_UUID)
            # another id: deleted and created again (a stand-in id only gets the real one)
            replaced = tid != ZERO_UUID and topic.topic_id not in (tid, _stand_in_id(name))
            for p in topic.partitions:
                if indexes is None or replaced or p.partition not in indexes:
                    omitted.append((name, p.partition))
        return omitted

    def _remove_partition(
        self,
        name: str,
        index: int,
        deleted: dict[str, TopicMetadata],
        touched: dict[str, list[int]],
    ) -> None:
        """Drop one partition from the image; a topic left without partitions goes too."""
        topic = self._topics.get(name)
        if topic is None:
            return
        kept = [p for p in topic.partitions if p.partition != index]
        if len(kept) == len(topic.partitions):
            return
        topic.partitions = kept
        if kept:
            touched.setdefault(name, []).append(index)
            return
        deleted[name] = self._topics.pop(name)
        self._by_id.pop(topic.topic_id, None)
        touched.pop(name, None)

    @staticmethod
    def _put_partition(topic: TopicMetadata, state: PartitionState) -> None:
        for i, p in enumerate(topic.partitions):
            if p.partition == state.partition:
                topic.partitions[i] = state
                return
        topic.partitions.append(state)
        topic.partitions.sort(key=lambda p: p.partition)

    # -- topic configs -------------------------------------------------------------------------

    def _on_config_changes(self, _children: list[str]) -> bool | None:
        # a kazoo thread: hand over to the event loop
        if self._closed or self._loop is None:
            return False
        try:
            self._loop.call_soon_threadsafe(
                lambda: self._loop.create_task(self._load_configs(list(self._topics)))  # type: ignore[union-attr]
            )
        except RuntimeError:
            return False
        return None

    async def _load_configs(self, names: list[str]) -> None:
        if self._closed:
            return
        try:
            configs = await self._run(lambda: {n: self.zk.get_topic_config(n) for n in names})
        except Exception:
            log.warning("could not read topic configs from ZooKeeper", exc_info=True)
            return
        for name, config in configs.items():
            topic = self._topics.get(name)
            if topic is not None and topic.configs != config:
                topic.configs = dict(config)
                self._announce(TopicConfigsChanged(topic))

    # -- waiting for the image -------------------------------------------------------------------

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        """Wait (bounded) until ``predicate()`` holds for the image; whether it does."""
        deadline = time.monotonic() + timeout_ms / 1000
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
            except TimeoutError:
                pass
        return True

    def _has_partitions(self, name: str, count: int) -> bool:
        t = self._topics.get(name)
        return (
            t is not None
            and len(t.partitions) >= count
            and all(p.leader >= 0 for p in t.partitions[:count])
        )

    # -- writes --------------------------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo) -> None:
        """Create ``/brokers/ids/<id>``. A registration left by this broker's previous life
        (killed, its session not expired yet) is waited out, up to twice the session
        timeout; a live broker with the same id fails the start."""
        listener = self.inter_broker_listener or "PLAINTEXT"
        zinfo = znodes.BrokerInfo(
            info.node_id,
            info.host,
            info.port,
            info.rack,
            listener=listener,
            endpoints=tuple(
                znodes.EndPoint(e.host, e.port, e.listener, e.security_protocol)
                for e in info.endpoints
            ),
        )
        path = f"{znodes.BROKER_IDS}/{info.node_id}"

        def register() -> int:
            deadline = time.monotonic() + 2 * self.zk.session_timeout_ms / 1000 + 1
            while True:
                try:
                    return self.zk.register_broker(zinfo)
                except NodeExistsError:
                    gone = threading.Event()
                    if self.zk.zk.exists(path, watch=lambda _event, g=gone: g.set()) is None:
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0 or not gone.wait(left):
                        raise MetadataError(
                            f"broker id {info.node_id} is registered by another live broker"
                        ) from None
                    log.info("the previous registration of broker %d expired", info.node_id)

        epoch = await self._run(register)
        if info.node_id not in self._brokers:
            self._brokers[info.node_id] = BrokerInfo(
                info.node_id, info.host, info.port, info.rack, epoch, info.endpoints
            )
            self._announce(BrokersChanged(tuple(self.live_brokers()), self._controller_id))
        log.info("broker %d registered in ZooKeeper, epoch %d", info.node_id, epoch)

    @staticmethod
    def _check_assignment(assignment: Mapping[int, Sequence[int]], start: int) -> None:
        if sorted(assignment) != list(range(start, start + len(assignment))):
            raise InvalidPartitionsError(
                f"the assignment must number partitions {start}..{start + len(assignment) - 1}"
            )
        for p, replicas in assignment.items():
            if not replicas:
                raise InvalidPartitionsError(f"partition {p} has no replicas")
            if len(set(replicas)) != len(replicas):
                raise InvalidPartitionsError(f"partition {p} names a broker twice")

    def _provisional(
        self,
        name: str,
        topic_id: uuid.UUID,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str],
        internal: bool,
    ) -> TopicMetadata:
        """What ZooKeeper holds when the image has not caught up (leaders unknown)."""
        return TopicMetadata(
            name,
            topic_id,
            [PartitionState(p, -1, 0, list(r), list(r)) for p, r in sorted(assignment.items())],
            dict(configs),
            internal,
        )

    async def create_topic(
        self,
        name: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata:
        if len(assignment) < 1:
            raise InvalidPartitionsError("number of partitions must be at least 1")
        self._check_assignment(assignment, 0)
        tid = topic_id or uuid.uuid4()
        za = znodes.TopicAssignment(
            {p: tuple(int(b) for b in r) for p, r in assignment.items()},
            topic_id=topic_id_to_zk(tid),
        )
        cfg = dict(configs or {})

        def write() -> None:
            if self.zk.exists(znodes.topic_path(name)):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            try:
                self.zk.create_topic_assignment(name, za, cfg)
            except NodeExistsError:
                raise TopicExistsError(f"Topic '{name}' already exists.") from None

        await self._write(write)
        if await self.wait_until(
            lambda: self._has_partitions(name, len(assignment)), self.admin_timeout_ms
        ):
            topic = self._topics[name]
            if topic.configs != cfg:
                topic.configs = cfg
            return topic
        return self._provisional(name, tid, assignment, cfg, internal)

    async def delete_topic(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)

        def write() -> None:
            if not self.zk.exists(znodes.topic_path(name)):
                raise UnknownTopicError(f"unknown topic {name!r}")
            self.zk.create_delete_topic_path(name)

        await self._write(write)
        await self.wait_until(lambda: name not in self._topics, self.admin_timeout_ms)
        return topic if topic is not None else TopicMetadata(name, ZERO_UUID, [])

    async def create_partitions(
        self, name: str, assignment: Mapping[int, Sequence[int]]
    ) -> TopicMetadata:
        if not assignment:
            raise InvalidPartitionsError("no partitions to add")

        def write() -> znodes.TopicAssignment:
            for _ in range(5):
                got = self.zk.get_topic_assignment(name)
                if got is None:
                    raise UnknownTopicError(f"unknown topic {name!r}")
                current, version = got
                start = len(current.partitions)
                self._check_assignment(assignment, start)
                merged = dict(current.partitions)
                merged.update({p: tuple(int(b) for b in r) for p, r in assignment.items()})
                new = znodes.TopicAssignment(
                    merged, current.adding_replicas, current.removing_replicas, current.topic_id
                )
                try:
                    self.zk.set_topic_assignment_unfenced(name, new, version)
                except BadVersionError:
                    continue
                except NoNodeError:
                    raise UnknownTopicError(f"unknown topic {name!r}") from None
                return new
            raise MetadataError(f"topic {name!r} changed concurrently; try again")

        written = await self._write(write)
        total = len(written.partitions)
        if await self.wait_until(lambda: self._has_partitions(name, total), self.admin_timeout_ms):
            return self._topics[name]
        known = self._topics.get(name)
        return self._provisional(
            name,
            known.topic_id if known is not None else ZERO_UUID,
            written.partitions,
            known.configs if known is not None else {},
            name in INTERNAL_TOPICS,
        )

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        cfg = dict(configs)
        await self._write(lambda: self.zk.set_or_create_topic_config(name, cfg))
        if topic.configs != cfg:
            topic.configs = cfg
            self._announce(TopicConfigsChanged(topic))
        return topic

    async def allocate_producer_ids(self, block_size: int) -> int:
        block = await self._write(
            lambda: self.zk.allocate_producer_id_block(self._node_id, block_size)
        )
        return block.first_producer_id

    # -- listeners -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the ZooKeeper session (this broker's registration disappears with it)."""
        if self._closed:
            return
        self._closed = True
        self._listeners.clear()
        try:
            self.zk.close()
        except Exception:
            log.warning("closing the ZooKeeper client failed", exc_info=True)


def _check(store: ZkMetadataStore) -> Any:
    checked: MetadataStore = store  # ZkMetadataStore implements the Protocol (checked by mypy)
    return checked
