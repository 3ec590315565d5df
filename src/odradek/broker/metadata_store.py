"""The seam between the broker and whoever owns the cluster's metadata: ``MetadataStore``.

A store answers who is in the cluster (``BrokerInfo``), who the controller is, which topics
exist and, per partition, the leader, leader epoch, replicas and ISR (``PartitionState``).
Implemented by ``odradek.broker.local_metadata_store.LocalMetadataStore`` (one broker, a JSON
file) and ``odradek.broker.zk_metadata_store.ZkMetadataStore`` (Kafka's znode layout in
ZooKeeper).

Contract:

* **Reads never block.** They answer from an in-memory image that the store keeps current
  (a ZooKeeper store updates it from watches / UpdateMetadata). Returned objects are the
  image's own: treat them as read-only.
* **Writes are coroutines.** A ZooKeeper store needs network round trips (and conditional
  multi-ops) for each of them; the local store could move its fsync off the event loop
  behind the same signature. ``LocalMetadataStore``'s writes complete without suspending
  (the change is durable and in the image when the coroutine's first ``send`` returns), which
  keeps the single broker's request path unchanged. A write raises ``MetadataError``
  subclasses (``TopicExistsError``, ``UnknownTopicError``, ``InvalidPartitionsError``, and
  ``MetadataUnavailableError`` when the store cannot be reached: ZooKeeper away).
* **Changes are announced** to listeners (``add_listener``) with a typed event, after the
  image has changed, on the event loop.

Ids: ``node_id`` is ``broker.id``; a broker's ``epoch`` is the czxid of its registration
znode in ZooKeeper (0 for the local store). ``PartitionState.controller_epoch`` and
``.version`` (the state znode's version) are -1/0 in the local store.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

__all__ = [
    "BrokerInfo",
    "BrokersChanged",
    "InvalidPartitionsError",
    "ListenerAddress",
    "MetadataChange",
    "MetadataError",
    "MetadataImage",
    "MetadataListener",
    "MetadataStore",
    "MetadataUnavailableError",
    "PartitionState",
    "PartitionsChanged",
    "TopicConfigsChanged",
    "TopicCreated",
    "TopicDeleted",
    "TopicExistsError",
    "TopicMetadata",
    "UnknownTopicError",
]


log = logging.getLogger("odradek.broker")


class MetadataError(Exception):
    pass


class TopicExistsError(MetadataError):
    """TOPIC_ALREADY_EXISTS (36)."""


class UnknownTopicError(MetadataError):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""


class InvalidPartitionsError(MetadataError):
    """INVALID_PARTITIONS (37)."""


class MetadataUnavailableError(MetadataError):
    """The store could not be reached (ZooKeeper away longer than the admin timeout, or the
    session lost during the write): REQUEST_TIMED_OUT (7), which clients retry."""


class ListenerAddress(NamedTuple):
    """One advertised listener of a broker: its name, security protocol and (host, port)."""

    listener: str
    security_protocol: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker: id, advertised address, rack and epoch (ZooKeeper: czxid of
    ``/brokers/ids/<id>``).

    ``host``/``port`` are the address brokers reach it on (its inter-broker listener);
    ``endpoints`` every advertised listener (empty: that one address only, as the local store
    and older registrations have it). Clients are told the endpoint of the listener their
    request arrived on (``endpoint``), as Kafka's MetadataCache does."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = 0
    endpoints: tuple[ListenerAddress, ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of the broker's ``listener``; None when it has no such listener.
        A broker registered without endpoints answers its one address for any listener."""
        if not self.endpoints:
            return self.host, self.port
        for e in self.endpoints:
            if e.listener == listener:
                return e.host, e.port
        return None


@dataclass(slots=True)
class PartitionState:
    """Leadership of one partition (``/brokers/topics/<t>/partitions/<p>/state``). Alone:
    leader = this broker, replicas = isr = [this broker]. ``leader`` is -1 when the
    partition has no leader."""

    partition: int
    leader: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    controller_epoch: int = -1
    version: int = 0
    """The state znode's version (every partition-state write is conditional on it)."""
    offline_replicas: list[int] = field(default_factory=list)
    """Replicas the controller lists as offline (UpdateMetadata): on a dead broker or on a
    failed log dir of a live one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PartitionState:
        return cls(
            partition=int(d["partition"]),
            leader=int(d["leader"]),
            leader_epoch=int(d.get("leader_epoch", 0)),
            replicas=[int(x) for x in d.get("replicas", [d["leader"]])],
            isr=[int(x) for x in d.get("isr", [d["leader"]])],
        )


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "internal": self.internal,
            "configs": dict(self.configs),
            "partitions": [p.to_json() for p in self.partitions],
        }

    @classmethod
    def from_json(cls, name: str, d: Mapping[str, Any]) -> TopicMetadata:
        return cls(
            name=name,
            topic_id=uuid.UUID(d["topic_id"]),
            partitions=[PartitionState.from_json(p) for p in d["partitions"]],
            configs={str(k): str(v) for k, v in d.get("configs", {}).items()},
            internal=bool(d.get("internal", False)),
        )


# -- change events ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicCreated:
    topic: TopicMetadata


@dataclass(frozen=True, slots=True)
class TopicDeleted:
    topic: TopicMetadata


@dataclass(frozen=True, slots=True)
class PartitionsChanged:
    """Partitions were added, or their leader, epoch, replicas or ISR changed, or they left the
    image (a full UpdateMetadata that no longer names them: ``partition()`` answers None)."""

    topic: TopicMetadata
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicConfigsChanged:
    topic: TopicMetadata


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The live brokers or the controller changed."""

    brokers: tuple[BrokerInfo, ...]
    controller_id: int


MetadataChange = (
    TopicCreated | TopicDeleted | PartitionsChanged | TopicConfigsChanged | BrokersChanged
)
MetadataListener = Callable[[MetadataChange], None]


class MetadataStore(Protocol):
    """Cluster metadata as this broker sees it. See the module docstring for the contract."""

    @property
    def node_id(self) -> int:
        """This broker's id (``broker.id``)."""
        ...

    @property
    def cluster_id(self) -> str: ...

    # -- reads (in-memory image, never block) ---------------------------------------------

    def live_brokers(self) -> Sequence[BrokerInfo]:
        """Every registered broker, by node id."""
        ...

    def broker(self, node_id: int) -> BrokerInfo | None: ...

    def controller_id(self) -> int:
        """The active controller's id, -1 when there is none."""
        ...

    def topics(self) -> list[TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def partition(self, name: str, partition: int) -> PartitionState | None: ...

    # -- writes (coroutines) ----------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo) -> None:
        """Announce this broker as live at ``info``'s address (ZooKeeper: the ephemeral
        ``/brokers/ids/<id>``)."""
        ...

    async def create_topic(
        self,
        name: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata:
        """Create ``name`` with ``assignment`` {partition: [broker ids], first = preferred
        leader} for partitions 0..n-1."""
        ...

    async def delete_topic(self, name: str) -> TopicMetadata: ...

    async def create_partitions(
        self, name: str, assignment: Mapping[int, Sequence[int]]
    ) -> TopicMetadata:
        """Add the partitions of ``assignment`` (numbered from the current count up)."""
        ...

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace the topic's config overrides with ``configs``."""
        ...

    async def allocate_producer_ids(self, block_size: int) -> int:
        """Reserve ``block_size`` producer ids for this broker; returns the first (ZooKeeper:
        ``/latest_producer_id_block``). Ids are never handed out twice, also across restarts."""
        ...

    # -- change listeners ----------------------------------------------------------------------

    def add_listener(self, listener: MetadataListener) -> None: ...

    def remove_listener(self, listener: MetadataListener) -> None: ...

    def close(self) -> None: ...


class MetadataImage:
    """The in-memory image a store answers reads from (brokers, topics by name and by id), and
    its listeners. ``LocalMetadataStore`` and ``ZkMetadataStore`` build on it; each keeps the
    image current in its own way and answers ``controller_id`` itself."""

    def __init__(self, node_id: int, cluster_id: str) -> None:
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._listeners: list[MetadataListener] = []

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def live_brokers(self) -> Sequence[BrokerInfo]:
        return [self._brokers[n] for n in sorted(self._brokers)]

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self._brokers.get(node_id)

    def topics(self) -> list[TopicMetadata]:
        return list(self._topics.values())

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, partition: int) -> PartitionState | None:
        t = self._topics.get(name)
        if t is None or partition < 0:
            return None
        parts = t.partitions
        if partition < len(parts) and parts[partition].partition == partition:
            return parts[partition]
        for p in parts:  # an image built from UpdateMetadata need not be dense or sorted
            if p.partition == partition:
                return p
        return None

    def _announce(self, change: MetadataChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:
                log.exception("metadata listener failed on %r", change)

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: MetadataListener) -> None:
        self._listeners.remove(listener)
