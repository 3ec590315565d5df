"""``ReplicaManager``: the partitions this broker holds, as ``Partition`` objects (Kafka's
ReplicaManager).

* ``get_partition(topic, p)`` opens (or creates) a partition's log on first use; with
  ``create=False`` a partition without a log gives None (an internal topic's logs are created
  lazily, each on its first use).
* ``append_records(entries, acks, timeout_s, origin=...)`` is the one leader append (Kafka's
  ``appendRecords``): Produce, transaction markers and the coordinators' writer call it; each
  entry goes through ``Partition.append_as_leader``; it returns the local outcomes and, when an
  acks=all entry still has to reach the ISR, the ``DelayedProduce`` that waits for it. ``fetch_messages(params, infos)`` is the one local read (Kafka's
  ``fetchMessages`` → ``readFromLocalLog`` → ``Partition.fetch_records``): consumers and
  followers alike, with the follower bookkeeping and the delayed fetch. ListOffsets
  (``fetch_offsets_for_timestamps``) and OffsetsForLeaderEpoch
  (``last_offset_for_leader_epoch``) ask Partition the same way: every leader and epoch decision
  is Partition's. ``leader_partition(topic, p, current_leader_epoch)``: (partition, NONE) or
  (partition or None, the error): UNKNOWN_TOPIC_OR_PARTITION, or
  ``Partition.check_leader_epoch``'s verdict.
* Producer-state snapshots: ``producer_state_snapshots()`` collects, on the event loop, the
  JSON of every changed state (consistent with its log end); ``write_snapshots`` writes them
  (a worker thread may run it).

Replication (the cluster mode; nothing of it runs alone until a LeaderAndIsr arrives;
``controller_managed``, the default with an AlterPartitionManager, makes partitions opened from
the metadata image neither leader nor follower until their LeaderAndIsr):

* LeaderAndIsr and StopReplica (``become_leader_or_follower``, ``stop_replicas``,
  ``add_leadership_listener``) are ``odradek.broker.leadership``'s ``LeadershipChanges``,
  which ``ReplicaManager`` inherits.
* Leader side: ``record_follower_fetch`` (Fetch with replica_id ≥ 0) tracks the follower,
  moves the HW and expands the ISR; a background task shrinks the ISR every
  ``replica.lag.time.max.ms``/2 and checkpoints high watermarks every
  ``replica.high.watermark.checkpoint.interval.ms``. ISR changes go through the injected
  ``AlterPartitionManager`` (None: the ISR stays what the controller sent); one per partition
  in flight; an expansion counts for the HW at once, a shrink once committed.
* acks=all: ``min_insync_replicas(topic)`` and ``wait_for_acks`` (parks in the purgatory until
  ``Partition.acks_all_status`` decides).
* ``add_high_watermark_listener(fn, topic=None)``: ``fn(topic, partition, hw)`` whenever a led
  partition's (of ``topic``, or any) high watermark moves (the coordinator writer's
  ``HighWatermarkListener`` rides on it, for its internal topics only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from odradek.broker.delayed_produce import DelayedProduce
from odradek.broker.inter_broker_client import InterBrokerClient
from odradek.broker.leadership import (
    LeaderAndIsrPartition,
    LeadershipChanges,
    LeadershipListener,
    StopReplicaPartition,
)
from odradek.broker.log_dirs import LogDirs
from odradek.broker.metadata_store import MetadataStore, PartitionState, TopicMetadata
from odradek.broker.partition import (
    AppendOrigin,
    FetchPartitionData,
    HighWatermarkListener,
    LeaderAppendResult,
    Partition,
    TxnVerifier,
)
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_fetcher import FetcherConfig, ReplicaFetcher
from odradek.broker.replica_fetcher_manager import ReplicaFetcherManager
from odradek.clock import Clock, SystemClock
from odradek.storage import LogConfig, LogManager, PartitionLog
from odradek.storage.partition_metadata import assign_topic_id
from odradek.storage.producer_state import write_snapshot

__all__ = [
    "PRODUCER_STATE_DIR",
    "AlterPartitionManager",
    "AppendOrigin",
    "DelayedProduce",
    "FetchParams",
    "FetchPartitionData",
    "FetchPartitionInfo",
    "HighWatermarkListener",
    "LeaderAndIsrPartition",
    "LeaderAppendResult",
    "LeadershipListener",
    "ReplicaManager",
    "ReplicationConfig",
    "StopReplicaPartition",
]

log = logging.getLogger("odradek.broker")

PRODUCER_STATE_DIR = "odradek-producer-state"
_UNKNOWN = ErrorCode.unknown_topic_or_partition
_NONE = ErrorCode.none
_TIMED_OUT = ErrorCode.request_timed_out
_NOT_LEADER = ErrorCode.not_leader_or_follower
_STORAGE = ErrorCode.kafka_storage_error
_NOBODY: frozenset[tuple[str, int]] = frozenset()


@dataclass(frozen=True, slots=True)
class FetchParams:
    """A Fetch request's own parameters (Kafka's ``FetchParams``): ``replica_id`` ≥ 0 for a
    follower, -1 for a consumer; ``max_bytes`` the response's limit (the broker's
    fetch.max.bytes already applied for consumers); ``isolation_level`` 1 = read_committed."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0
    client_rack: str | None = None
    """A consumer's ``rack_id`` (Fetch v11+, "" when it has none); None before v11: such a
    consumer reads from the leader only."""

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class FetchPartitionInfo(NamedTuple):
    """One partition of a Fetch (Kafka's ``FetchRequest.PartitionData``); -1 epochs: not
    sent (``current_leader_epoch`` before v9, ``last_fetched_epoch`` before v12)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


FetchInfos = Sequence[tuple[str, Sequence[FetchPartitionInfo]]]
"""(topic, its partitions) in request order."""
FetchResults = list[tuple[str, list[FetchPartitionData]]]
"""(topic, its partitions' answers) in request order."""


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """The broker settings replication uses (Kafka's names and defaults)."""

    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30_000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    num_replica_fetchers: int = 1
    replica_selector_class: str | None = None
    """``org.apache.kafka.common.replica.RackAwareReplicaSelector``: consumers with a rack are
    sent to a replica in it (KIP-392); None: every consumer reads from the leader."""

    @classmethod
    def from_broker_config(cls, config: Any) -> ReplicationConfig:
        """From a ``BrokerConfig`` (attribute ``x_y_z`` for key ``x.y.z``); keys it does not
        define keep Kafka's defaults."""
        fields: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            value = getattr(config, name, None)
            if isinstance(value, int | str) and not isinstance(value, bool):
                fields[name] = value
        return cls(**fields)


class AlterPartitionManager(Protocol):
    """Sends an ISR change to the controller (AlterPartition, API 56) and returns the committed
    state, or the error (e.g. FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION)."""

    async def submit(
        self,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        new_isr: list[int],
        partition_epoch: int,
    ) -> PartitionState | ErrorCode: ...


class ReplicaManager(LeadershipChanges):
    """The partitions of this broker. See the module docstring."""

    def __init__(
        self,
        metadata: MetadataStore,
        log_manager: LogManager,
        default_log_config: LogConfig,
        purgatory: Purgatory,
        data_dir: Path | None,
        *,
        clock: Clock | None = None,
        replication: ReplicationConfig | None = None,
        alter_partition_manager: AlterPartitionManager | None = None,
        controller_managed: bool | None = None,
        inter_broker_client: InterBrokerClient | None = None,
    ) -> None:
        self.inter_broker_client = inter_broker_client
        """The fetchers' client (the broker's); None: each fetcher opens its own."""
        self.metadata = metadata
        self.node_id = metadata.node_id
        self.log_manager = log_manager
        self.default_log_config = default_log_config
        self.purgatory = purgatory
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.replication = replication if replication is not None else ReplicationConfig()
        self.alter_partition_manager = alter_partition_manager
        self.controller_managed = (
            alter_partition_manager is not None
            if controller_managed is None
            else controller_managed
        )
        """Cluster mode (default: when there is an AlterPartitionManager): a partition leads or
        follows only once a LeaderAndIsr said so; until then it is neither (NOT_LEADER_OR_FOLLOWER),
        whatever the metadata image says, and its HW does not follow its log end."""
        self._state_dir = None if data_dir is None else data_dir / PRODUCER_STATE_DIR
        self._partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = -1
        """The newest controller epoch seen in a LeaderAndIsr/StopReplica."""
        self.fetcher_manager = ReplicaFetcherManager(
            self.node_id,
            FetcherConfig.from_replication(self.replication),
            self.replication.num_replica_fetchers,
            self.clock,
            inter_broker_client,
        )
        """The followers' fetchers (``odradek.broker.replica_fetcher_manager``)."""
        self._listeners: list[LeadershipListener] = []
        self._hw_listeners: list[HighWatermarkListener] = []
        """The listeners of every topic's high watermark."""
        self._hw_topic_listeners: dict[str, list[HighWatermarkListener]] = {}
        """Per topic: the listeners its partitions call (every topic's, then its own); a
        partition shares its topic's list."""
        self._background: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.isr_shrinks = 0
        """ISR changes committed by the controller that shrank a partition's ISR led here
        (Kafka's IsrShrinksPerSec); ``isr_expands`` likewise (IsrExpandsPerSec)."""
        self.isr_expands = 0
        self._closed = False
        self.log_dirs = LogDirs(log_manager, self._partitions, self._tasks, self.fetcher_manager)
        """Moves between log dirs and failed log dirs (``odradek.broker.log_dirs``)."""

    # -- partitions ---------------------------------------------------------------------------

    def log_config_for(self, topic: TopicMetadata) -> LogConfig:
        if not topic.configs:
            return self.default_log_config
        return LogConfig.from_topic_config(topic.configs, self.default_log_config)

    def snapshot_path(self, topic: str, partition: int) -> Path | None:
        if self._state_dir is None:
            return None
        return self._state_dir / f"{topic}-{partition}.json"

    def _new_partition(
        self,
        topic: str,
        partition: int,
        plog: PartitionLog,
        config: LogConfig,
        state: PartitionState,
    ) -> Partition:
        """A ``Partition`` over ``plog`` starting in ``state``, with this broker's purgatory and
        high-watermark listeners (registered by the caller)."""
        return Partition(
            topic,
            partition,
            plog,
            config,
            state,
            self.node_id,
            self.snapshot_path(topic, partition),
            purgatory=self.purgatory,
            high_watermark_listeners=self.high_watermark_listeners(topic),
        )

    def get_partition(self, topic: str, partition: int, *, create: bool = True) -> Partition | None:
        """The partition, or None if it does not exist (see the module docstring)."""
        handle = self._partitions.get((topic, partition))
        if handle is not None:
            return handle
        meta = self.metadata.topic(topic)
        if meta is None or partition < 0 or partition >= meta.num_partitions:
            return None
        if not create and self.log_manager.get(topic, partition) is None:
            return None
        config = self.log_config_for(meta)
        plog = self.log_manager.get_or_create(topic, partition, config)
        state = meta.partitions[partition]
        if self.controller_managed:  # no leadership before the controller's LeaderAndIsr
            state = PartitionState(partition=partition, leader=-1, leader_epoch=-1)
            plog.high_watermark_follows_leo = False
        handle = self._new_partition(topic, partition, plog, config, state)
        if not self.controller_managed:  # alone: the store's id is the topic's (KIP-516)
            self._assign_topic_id(handle, meta.topic_id)
        self._partitions[(topic, partition)] = handle
        return handle

    @staticmethod
    def _assign_topic_id(handle: Partition, topic_id: uuid.UUID) -> uuid.UUID | None:
        """The id in the partition directory's ``partition.metadata``, ``topic_id`` written
        there first if it has none (None: no directory, or the file cannot be read)."""
        try:
            return assign_topic_id(handle.log, topic_id)
        except (OSError, ValueError) as exc:
            log.warning("partition.metadata of %s-%d: %s", handle.topic, handle.partition, exc)
            return None

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> tuple[Partition | None, ErrorCode]:
        """The one leadership and epoch check (see the module docstring)."""
        handle = self._partitions.get((topic, partition))
        if handle is None:
            handle = self.get_partition(topic, partition)
            if handle is None:
                return None, _UNKNOWN
        return handle, handle.check_leader_epoch(current_leader_epoch)

    def has_inconsistent_topic_id(
        self, topic: str, topic_id: uuid.UUID, partitions: Iterable[int]
    ) -> bool:
        """True when a local replica of one of ``topic``'s ``partitions`` was created under
        another topic id than ``topic_id`` (the metadata image's): a LeaderAndIsr named it and
        the image has not caught up, so a Fetch v13+ answers INCONSISTENT_TOPIC_ID for the
        topic (KIP-516). Alone the metadata store's id is the only one: never. A partition
        without a local log, or whose topic id is not known, is not inconsistent."""
        if not self.controller_managed:
            return False
        for index in partitions:
            handle = self.get_partition(topic, index, create=False)
            if handle is None or handle.topic_id is None or not handle.topic_id.int:
                continue
            if handle.topic_id != topic_id:
                return True
        return False

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def open_all(self) -> None:
        """Open every partition log at start (recovery happens here, not on the first
        request); an internal topic's logs open only when they are on disk."""
        for topic in self.metadata.topics():
            for p in topic.partitions:
                self.get_partition(topic.name, p.partition, create=not topic.internal)

    def open_topic(self, topic: TopicMetadata, start: int = 0) -> None:
        """Create the logs of a new topic's partitions from ``start`` (not an internal
        topic's: those are created on first use)."""
        self.log_manager.expect_new_topic(topic.name)  # created even while a log dir is offline
        if not topic.internal:
            for p in range(start, topic.num_partitions):
                self.get_partition(topic.name, p)

    def remove_topic(self, topic: TopicMetadata) -> None:
        """Drop a deleted topic's partitions, logs and producer-state snapshots."""
        name = topic.name
        for key in [k for k in self._partitions if k[0] == name]:
            self.fetcher_manager.remove_fetcher_for_partitions([key])
            del self._partitions[key]
            self.purgatory.notify(name, key[1])
        self.log_manager.delete_topic(name)
        for p in range(topic.num_partitions):
            path = self.snapshot_path(name, p)
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def set_default_log_config(self, config: LogConfig) -> None:
        """New broker-wide log defaults (dynamic broker configs): applied at once to every
        live log, under its topic's overrides."""
        self.default_log_config = config
        self.log_manager.default_config = config
        for topic in self.metadata.topics():
            self.apply_topic_config(topic)

    def apply_topic_config(self, topic: TopicMetadata) -> None:
        """Apply a topic's changed overrides to its live logs."""
        config = self.log_config_for(topic)
        self.log_manager.update_config(topic.name, config)
        for (t, _p), handle in self._partitions.items():
            if t == topic.name:
                handle.config = config

    def fetchers(self) -> dict[tuple[int, int], ReplicaFetcher]:
        """The replica fetchers by (leader broker id, fetcher id) (for tests and metrics)."""
        return self.fetcher_manager.fetchers()

    # -- replication: leader side -------------------------------------------------------------

    def add_high_watermark_listener(
        self, listener: HighWatermarkListener, topic: str | None = None
    ) -> None:
        """``listener(topic, partition, high_watermark)`` whenever a led partition's (of
        ``topic``; None: of any topic) high watermark moves: after a leader append that moved
        it (alone it follows the log end), a follower's fetch or an ISR change
        (``Partition.high_watermark_moved``). A partition without a listener pays nothing."""
        if topic is not None:
            self.high_watermark_listeners(topic).append(listener)
            return
        self._hw_listeners.append(listener)
        for listeners in self._hw_topic_listeners.values():
            listeners.append(listener)

    def high_watermark_listeners(self, topic: str) -> list[HighWatermarkListener]:
        """The list the partitions of ``topic`` call when their high watermark moves (shared:
        listeners added later are in it)."""
        listeners = self._hw_topic_listeners.get(topic)
        if listeners is None:
            listeners = self._hw_topic_listeners[topic] = list(self._hw_listeners)
        return listeners

    def min_insync_replicas(self, topic: str) -> int:
        """The topic's min.insync.replicas, else the broker default."""
        meta = self.metadata.topic(topic)
        if meta is not None:
            value = meta.configs.get("min.insync.replicas")
            if value is not None:
                with contextlib.suppress(ValueError):
                    return int(value)
        return self.replication.min_insync_replicas

    def record_follower_fetch(self, handle: Partition, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched ``handle`` at ``fetch_offset``: track it, move the HW (waking
        acks=all waiters and consumers), maybe expand the ISR. False if ``replica_id`` is not a
        replica of the partition."""
        if not handle.update_follower_fetch(replica_id, fetch_offset, self.clock.now_ms()):
            return False
        if handle.maybe_increment_high_watermark():
            handle.high_watermark_moved()
        new_isr = handle.isr_expansion(replica_id)
        if new_isr is not None:
            self._submit_isr(handle, new_isr)
        return True

    def append_records(
        self,
        entries: Sequence[tuple[str, int, bytes | bytearray | memoryview | None]],
        acks: int,
        timeout_s: float,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verify_txn: TxnVerifier | None = None,
        min_insync_replicas: int | None = None,
    ) -> tuple[list[LeaderAppendResult], DelayedProduce | None]:
        """The one door for leader appends (Kafka's ``ReplicaManager.appendRecords``): each
        (topic, partition, records) of ``entries``, in order, through
        ``Partition.append_as_leader``. acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS
        for every entry); an unknown partition is UNKNOWN_TOPIC_OR_PARTITION. With acks=-1 the
        ISR must hold ``min_insync_replicas`` (None: the topic's min.insync.replicas) before
        the append and, after it, the high watermark must pass the appended records within
        ``timeout_s``. Returns (the local appends' outcomes, one per entry, in order; the
        ``DelayedProduce`` to await, whose ``complete()`` gives the final outcomes, or None
        when nothing waits: acks 0 or 1, or every acks=-1 entry failed or is below the high
        watermark already, as alone, where it follows the log end)."""
        if acks not in (0, 1, -1):
            return [LeaderAppendResult(ErrorCode.invalid_required_acks) for _ in entries], None
        results: list[LeaderAppendResult] = []
        waits: list[tuple[int, Partition, int, int]] | None = None
        now_ms = self.clock.now_ms()
        partitions = self._partitions
        for topic, index, records in entries:
            handle = partitions.get((topic, index))
            if handle is None:
                handle = self.get_partition(topic, index)
                if handle is None:
                    results.append(LeaderAppendResult(_UNKNOWN))
                    continue
            if acks != -1:
                result = handle.append_as_leader(records, origin, acks, 1, now_ms, verify_txn)
                if result.error is _STORAGE:  # an I/O error: the log's dir goes offline
                    self.log_dirs.log_dir_failed(topic, index, result.message or "append failed")
                results.append(result)
                continue
            min_insync = (
                self.min_insync_replicas(topic)
                if min_insync_replicas is None
                else min_insync_replicas
            )
            result = handle.append_as_leader(records, origin, acks, min_insync, now_ms, verify_txn)
            if result.error is _NONE:
                plog = handle.log
                if plog.high_watermark < plog.log_end_offset:
                    if waits is None:
                        waits = []
                    waits.append((len(results), handle, plog.log_end_offset, min_insync))
            elif result.error is _STORAGE:
                self.log_dirs.log_dir_failed(topic, index, result.message or "append failed")
            results.append(result)
        if waits is None:
            return results, None
        return results, DelayedProduce(self, results, waits, timeout_s)

    async def wait_for_acks(
        self, handle: Partition, required_offset: int, min_insync: int, timeout_s: float
    ) -> ErrorCode:
        """acks=all after the append up to ``required_offset`` (exclusive): NONE,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, or REQUEST_TIMED_OUT when
        the HW has not passed it within ``timeout_s`` (Kafka's DelayedProduce)."""
        clock = self.clock
        deadline = clock.monotonic() + timeout_s
        key = (handle.topic, handle.partition)
        for _ in range(1_000_000):  # bounded: every round waits for a notification or the deadline
            if self._partitions.get(key) is not handle:
                return _NOT_LEADER
            status = handle.acks_all_status(required_offset, min_insync)
            if status is not None:
                return status
            left = deadline - clock.monotonic()
            if left <= 0:
                break
            if not await self.purgatory.wait([key], left):
                status = handle.acks_all_status(required_offset, min_insync)
                return _TIMED_OUT if status is None else status
        return _TIMED_OUT

    def partitions_to_verify(
        self, entries: Sequence[tuple[str, int, bytes | bytearray | memoryview | None]]
    ) -> dict[tuple[int, int], list[tuple[str, int]]]:
        """The (topic, partition)s of ``entries`` led here whose records open their producer's
        transaction, by (producer id, producer epoch): what the transaction coordinator must
        verify before the append (``Partition.needs_transaction_verification``)."""
        wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for topic, index, records in entries:
            handle = self._partitions.get((topic, index)) or self.get_partition(topic, index)
            if handle is None:
                continue
            producer = handle.needs_transaction_verification(records)
            if producer is not None:
                wanted.setdefault(producer, []).append((topic, index))
        return wanted

    # -- the leader's reads ----------------------------------------------------------------------

    async def fetch_messages(self, params: FetchParams, infos: FetchInfos) -> FetchResults:
        """The one local read (Kafka's ``ReplicaManager.fetchMessages``): a follower's fetch
        first records its position on every replicated partition it asks for
        (``record_follower_fetch``: the HW may move, the ISR expand; not when its epoch is
        not ours, its offset is past our log end or its fetch diverges; a fetcher that is not
        a replica gets NOT_LEADER_OR_FOLLOWER); read_committed loads the producer states
        first (yielding to the event loop); then ``read_from_local_log``. When fewer than
        ``min_bytes`` are there and no partition answered an error (nor a diverging epoch),
        the fetch parks in the purgatory (Kafka's DelayedFetch) and reads again each time one
        of its partitions is notified, until ``min_bytes`` or ``max_wait_ms``."""
        follower = params.replica_id >= 0
        refused = self._record_follower_fetches(params.replica_id, infos) if follower else _NOBODY
        if not follower and params.isolation_level == 1:
            await self.load_producer_states(
                (topic, fp.partition) for topic, partitions in infos for fp in partitions
            )
        results, total, error = self.read_from_local_log(params, infos, refused)
        min_bytes = params.min_bytes
        if total >= min_bytes or error or not infos or params.max_wait_ms <= 0:
            return results
        clock = self.clock
        deadline = clock.monotonic() + params.max_wait_ms / 1000
        watched = [(topic, fp.partition) for topic, partitions in infos for fp in partitions]
        wait = self.purgatory.wait
        while True:
            left = deadline - clock.monotonic()
            if left <= 0:
                return results
            woken = await wait(watched, left)
            results, total, error = self.read_from_local_log(params, infos, refused)
            if not woken or total >= min_bytes or error:
                return results

    def _rack_of(self, node_id: int) -> str | None:
        """A live broker's ``broker.rack``; None: none, or not live (Kafka: no endpoint)."""
        info = self.metadata.broker(node_id)
        return None if info is None else info.rack

    def read_from_local_log(
        self,
        params: FetchParams,
        infos: FetchInfos,
        refused: set[tuple[str, int]] | frozenset[tuple[str, int]] = _NOBODY,
    ) -> tuple[FetchResults, int, bool]:
        """Every partition of ``infos`` through ``Partition.fetch_records`` within the
        response's ``max_bytes`` (Kafka's ``readFromLocalLog``): the first partition with data
        always returns at least one batch ("min one message"), a later one whose data would
        exceed what is left returns none. (results, record bytes, whether a partition
        answered an error, a diverging epoch or a preferred read replica: answer at once)."""
        remaining = params.max_bytes if params.max_bytes > 0 else 0x7FFFFFFF
        follower = params.replica_id >= 0
        read_committed = not follower and params.isolation_level == 1
        total = 0
        error = False
        out: FetchResults = []
        partitions = self._partitions
        for topic, fetches in infos:
            presults: list[FetchPartitionData] = []
            for fp in fetches:
                index = fp.partition
                handle = partitions.get((topic, index))
                if handle is None:
                    handle = self.get_partition(topic, index)
                    if handle is None:
                        presults.append(FetchPartitionData(index, _UNKNOWN))
                        error = True
                        continue
                if refused and (topic, index) in refused:  # the fetching broker is no replica
                    code = handle.check_leader_epoch(fp.current_leader_epoch)
                    presults.append(
                        FetchPartitionData(index, _NOT_LEADER if code is _NONE else code)
                    )
                    error = True
                    continue
                budget = min(fp.partition_max_bytes, remaining)
                result = handle.fetch_records(
                    fp.fetch_offset,
                    budget,
                    total == 0,
                    follower=follower,
                    read_committed=read_committed,
                    current_leader_epoch=fp.current_leader_epoch,
                    last_fetched_epoch=fp.last_fetched_epoch,
                    client_rack=None if follower else params.client_rack,
                    rack_of=self._rack_of if self.replication.replica_selector_class else None,
                    now_ms=self.clock.now_ms() if params.client_rack else -1,
                )
                records = result.records
                if result.error is _STORAGE:  # an I/O error: the log's dir goes offline
                    self.log_dirs.log_dir_failed(topic, index, "read failed")
                if records is None:
                    # an error, a diverging epoch or a preferred read replica answers at once
                    if (
                        result.error is not _NONE
                        or result.diverging_epoch is not None
                        or result.preferred_read_replica >= 0
                    ):
                        error = True
                    presults.append(result)
                    continue
                size = len(records)
                if total > 0 and size > budget:
                    # only the first partition with data may exceed the limits
                    presults.append(
                        FetchPartitionData(
                            index,
                            _NONE,
                            result.high_watermark,
                            result.last_stable_offset,
                            result.log_start_offset,
                        )
                    )
                    continue
                total += size
                remaining = max(0, remaining - size)
                presults.append(result)
            out.append((topic, presults))
        return out, total, error

    def _record_follower_fetches(self, replica_id: int, infos: FetchInfos) -> set[tuple[str, int]]:
        """A follower's fetch: record its position on every replicated partition it asks for
        (see ``fetch_messages``); the (topic, partition)s of which it is not a replica."""
        unknown: set[tuple[str, int]] = set()
        for topic, fetches in infos:
            for fp in fetches:
                handle = self._partitions.get((topic, fp.partition))
                if handle is None:
                    handle = self.get_partition(topic, fp.partition)
                    if handle is None:
                        continue
                # a follower of an older epoch (not truncated yet) must not move the HW
                if (
                    not handle.controller_managed
                    or handle.check_leader_epoch(fp.current_leader_epoch) is not _NONE
                ):
                    continue
                offset = fp.fetch_offset
                if (
                    offset > handle.log.log_end_offset
                    or handle.diverging_epoch(fp.last_fetched_epoch, offset) is not None
                ):
                    continue  # not a position on this log (Kafka records none either)
                if not self.record_follower_fetch(handle, replica_id, offset):
                    unknown.add((topic, fp.partition))
        return unknown

    async def fetch_offsets_for_timestamps(
        self,
        entries: Sequence[tuple[str, int, int, int]],
        *,
        replica_id: int,
        isolation_level: int,
    ) -> list[tuple[ErrorCode, int, int, int]]:
        """ListOffsets (Kafka's ``ReplicaManager.fetchOffsetForTimestamp``): for each (topic,
        partition, timestamp, current leader epoch), (error, timestamp, offset, leader epoch)
        from ``Partition.fetch_offset_for_timestamp``; UNKNOWN_TOPIC_OR_PARTITION for an
        unknown partition. read_committed loads the producer states first."""
        follower = replica_id >= 0
        read_committed = isolation_level == 1
        if read_committed and not follower:
            await self.load_producer_states((t, p) for t, p, _ts, _e in entries)
        out: list[tuple[ErrorCode, int, int, int]] = []
        for topic, index, timestamp, current_epoch in entries:
            handle = self._partitions.get((topic, index)) or self.get_partition(topic, index)
            if handle is None:
                out.append((_UNKNOWN, -1, -1, -1))
                continue
            out.append(
                handle.fetch_offset_for_timestamp(
                    timestamp,
                    follower=follower,
                    read_committed=read_committed,
                    current_leader_epoch=current_epoch,
                )
            )
        return out

    def last_offset_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetsForLeaderEpoch: (error, epoch, end offset) from
        ``Partition.last_offset_for_leader_epoch``; UNKNOWN_TOPIC_OR_PARTITION for an unknown
        partition."""
        handle = self._partitions.get((topic, partition)) or self.get_partition(topic, partition)
        if handle is None:
            return _UNKNOWN, -1, -1
        return handle.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def _submit_isr(self, handle: Partition, new_isr: list[int]) -> None:
        manager = self.alter_partition_manager
        if manager is None or self._closed:
            return
        handle.pending_isr = list(new_isr)
        task = asyncio.get_running_loop().create_task(self._alter_isr(manager, handle, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter_isr(
        self, manager: AlterPartitionManager, handle: Partition, new_isr: list[int]
    ) -> None:
        state = handle.state
        try:
            result = await manager.submit(
                handle.topic,
                handle.topic_id if handle.topic_id is not None else uuid.UUID(int=0),
                handle.partition,
                state.leader_epoch,
                list(new_isr),
                state.version,
            )
        except Exception:
            log.exception("AlterPartition for %s-%d failed", handle.topic, handle.partition)
            result = ErrorCode.unknown_server_error
        if isinstance(result, PartitionState):
            before = len(handle.isr)
            applied = handle.apply_isr_update(result)
            if applied and len(result.isr) < before:
                self.isr_shrinks += 1
            elif applied and len(result.isr) > before:
                self.isr_expands += 1
            log.info(
                "%s-%d: ISR %s (partition epoch %d)%s",
                handle.topic,
                handle.partition,
                result.isr,
                result.version,
                "" if applied else ", ignored (stale)",
            )
        else:
            handle.pending_isr = None
            log.info(
                "%s-%d: ISR change to %s refused: %s",
                handle.topic,
                handle.partition,
                new_isr,
                result,
            )
        if handle.maybe_increment_high_watermark():
            handle.high_watermark_moved()
        elif isinstance(result, PartitionState):
            self.purgatory.notify(handle.topic, handle.partition)  # the ISR changed

    def maybe_shrink_isr(self) -> None:
        """Shrink the ISR of every led partition with followers out of sync (Kafka's
        isr-expiration task; the background task calls it every replica.lag.time.max.ms/2)."""
        now_ms = self.clock.now_ms()
        lag = self.replication.replica_lag_time_max_ms
        for handle in list(self._partitions.values()):
            if not handle.controller_managed or not handle.is_leader:
                continue
            new_isr = handle.isr_shrink(now_ms, lag)
            if new_isr is not None:
                log.info(
                    "%s-%d: shrinking ISR %s to %s",
                    handle.topic,
                    handle.partition,
                    handle.isr,
                    new_isr,
                )
                self._submit_isr(handle, new_isr)

    def _start_background(self) -> None:
        if self._background is None and not self._closed:
            self._background = asyncio.get_running_loop().create_task(self._run_background())

    async def _run_background(self) -> None:
        r = self.replication
        shrink_every = max(0.01, r.replica_lag_time_max_ms / 2000)
        checkpoint_every = max(0.1, r.replica_high_watermark_checkpoint_interval_ms / 1000)
        clock = self.clock
        next_checkpoint = clock.monotonic() + checkpoint_every
        while not self._closed:
            await asyncio.sleep(min(shrink_every, checkpoint_every))
            try:
                self.maybe_shrink_isr()
                if clock.monotonic() >= next_checkpoint:
                    next_checkpoint = clock.monotonic() + checkpoint_every
                    self.log_manager.checkpoint()  # replication-offset-checkpoint among them
            except Exception:
                log.exception("replica manager background work failed")

    async def close(self) -> None:
        """Stop the fetchers and the background task (broker shutdown)."""
        self._closed = True
        fetchers = self.fetcher_manager.close_all()
        tasks = list(self._tasks)
        if self._background is not None:
            tasks.append(self._background)
            self._background = None
        for task in tasks:
            task.cancel()
        for fetcher in fetchers:
            await fetcher.wait_closed()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- producer state -----------------------------------------------------------------------

    async def load_producer_states(self, keys: Iterable[tuple[str, int]]) -> None:
        """Load, yielding to the event loop, the producer state of every partition in
        ``keys`` led here that has none loaded yet (before a read_committed read, whose
        synchronous path would otherwise replay the log in one go)."""
        for key in keys:
            handle = self._partitions.get(key)
            if handle is not None and handle.is_leader and handle.loaded_producer_state() is None:
                await handle.load_producer_state()

    def truncate_producer_states(self) -> None:
        """After retention: forget producer batches below each log's start."""
        for handle in self._partitions.values():
            ps = handle.loaded_producer_state()
            if ps is not None:
                ps.truncate_before(
                    handle.log.log_start_offset, handle.log.segment_base_offsets() or None
                )

    def producer_state_snapshots(self, force: bool = False) -> list[tuple[Path, bytes]]:
        """(path, JSON) of every producer state changed since its last snapshot (call on the
        event loop, so each covers every batch up to its log end offset)."""
        out: list[tuple[Path, bytes]] = []
        for handle in list(self._partitions.values()):
            ps = handle.loaded_producer_state()
            path = handle.snapshot_path
            if ps is None or path is None:
                continue
            payload = ps.snapshot_payload(handle.log, force)
            if payload is not None:
                out.append((path, payload))
        return out


def write_snapshots(snapshots: list[tuple[Path, bytes]]) -> None:
    for path, payload in snapshots:
        write_snapshot(path, payload)
