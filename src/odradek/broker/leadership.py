"""Leadership changes on this broker's partitions: the LeaderAndIsr and StopReplica requests
of the controller applied (Kafka's ``ReplicaManager.becomeLeaderOrFollower``, ``makeLeaders``,
``makeFollowers`` and ``stopReplicas``). ``ReplicaManager`` has these methods through
``LeadershipChanges``; they are its state changes, kept apart from its reads and appends.

* ``become_leader_or_follower(controller_id, controller_epoch, partition_states,
  live_leaders)`` applies a LeaderAndIsr: a stale controller epoch refuses the whole request
  (``is_stale_controller_epoch``); a partition is applied only when this broker is one of its
  replicas (else UNKNOWN_TOPIC_OR_PARTITION) and its leader epoch is newer than ours (or the
  same epoch with a newer partition epoch), else STALE_CONTROLLER_EPOCH. A topic id the
  request names that differs from the one in the partition directory's ``partition.metadata``
  → INCONSISTENT_TOPIC_ID (cluster mode). A partition whose log dir failed (its log an
  ``OfflineLog``) → KAFKA_STORAGE_ERROR: the controller takes that replica offline. Leaders stop fetching and take the epoch
  (``Partition.make_leader``); followers (``Partition.make_follower``) are handed to a
  ``ReplicaFetcher`` of their leader through the ``ReplicaFetcherManager``
  (``odradek.broker.replica_fetcher_manager``: ``num.replica.fetchers`` per leader broker),
  which truncates first. Every applied partition wakes its purgatory waiters.
* ``stop_replicas(controller_id, controller_epoch, partitions)`` applies a StopReplica: the
  fetcher stops; with ``delete`` the partition, its log and its producer-state snapshot go. A
  leader epoch older than ours → FENCED_LEADER_EPOCH (-1, no epoch, and -2, the epoch sent
  while a topic is being deleted, always pass).
* ``add_leadership_listener(fn)``: ``fn(became_leader, became_follower)`` with
  (topic, partition, leader_epoch) lists after each LeaderAndIsr, and the stopped partitions
  as ``became_follower`` after a StopReplica (the coordinators' hook, ``follow_leadership``).

Invariant: ``controller_epoch`` only grows; a partition's state changes only through a request
of the newest controller and with a newer (leader epoch, partition epoch).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from odradek.broker.metadata_store import MetadataStore, PartitionState, TopicMetadata
from odradek.broker.partition import HighWatermarkListener, Partition
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_fetcher_manager import ReplicaFetcherManager
from odradek.clock import Clock
from odradek.storage import LogConfig, LogManager, PartitionLog
from odradek.storage.future_log import OfflineLog

__all__ = [
    "LeaderAndIsrPartition",
    "LeadershipChanges",
    "LeadershipListener",
    "StopReplicaPartition",
]

log = logging.getLogger("odradek.broker")

_UNKNOWN = ErrorCode.unknown_topic_or_partition
_NONE = ErrorCode.none
_STALE_CONTROLLER = ErrorCode.stale_controller_epoch
_FENCED = ErrorCode.fenced_leader_epoch

LeadershipListener = Callable[[list[tuple[str, int, int]], list[tuple[str, int, int]]], None]
"""``(became_leader, became_follower)``: (topic, partition, leader_epoch) lists."""


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartition:
    """One partition of a LeaderAndIsr, as ``become_leader_or_follower`` needs it (the
    fields of ``protocol.inter_broker.LeaderAndIsrPartitionState`` of the same names)."""

    topic_name: str
    partition_index: int
    leader: int
    leader_epoch: int
    isr: Sequence[int]
    partition_epoch: int
    replicas: Sequence[int]
    controller_epoch: int = -1


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    topic_name: str
    partition_index: int
    leader_epoch: int = -1
    delete_partition: bool = False


_NO_EPOCH = -1
_EPOCH_DURING_DELETE = -2


class LeadershipChanges:
    """LeaderAndIsr and StopReplica on ``ReplicaManager`` (see the module docstring); the
    attributes and methods it uses are ``ReplicaManager``'s."""

    if TYPE_CHECKING:
        node_id: int
        controller_epoch: int
        controller_managed: bool
        clock: Clock
        metadata: MetadataStore
        default_log_config: LogConfig
        log_manager: LogManager
        purgatory: Purgatory
        fetcher_manager: ReplicaFetcherManager
        _partitions: dict[tuple[str, int], Partition]
        _listeners: list[LeadershipListener]

        def high_watermark_listeners(self, topic: str) -> list[HighWatermarkListener]: ...

        def log_config_for(self, topic: TopicMetadata) -> LogConfig: ...

        def snapshot_path(self, topic: str, partition: int) -> Path | None: ...

        def _new_partition(
            self,
            topic: str,
            partition: int,
            plog: PartitionLog,
            config: LogConfig,
            state: PartitionState,
        ) -> Partition: ...

        def _start_background(self) -> None: ...

        @staticmethod
        def _assign_topic_id(handle: Partition, topic_id: uuid.UUID) -> uuid.UUID | None: ...

    def is_stale_controller_epoch(self, controller_epoch: int) -> bool:
        """A request from a controller older than the newest seen (STALE_CONTROLLER_EPOCH)."""
        return controller_epoch < self.controller_epoch

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)

    def _partition_for_controller(self, topic: str, partition: int) -> Partition:
        """The partition, its log created if missing; the topic need not be known to the
        metadata store (its config then is the broker default)."""
        key = (topic, partition)
        handle = self._partitions.get(key)
        if handle is not None:
            return handle
        meta = self.metadata.topic(topic)
        config = self.default_log_config if meta is None else self.log_config_for(meta)
        plog = self.log_manager.get_or_create(topic, partition, config)
        initial = PartitionState(partition=partition, leader=-1, leader_epoch=-1)
        plog.high_watermark_follows_leo = False
        handle = self._new_partition(topic, partition, plog, config, initial)
        self._partitions[key] = handle
        return handle

    def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Iterable[Any],
        live_leaders: Iterable[Any],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> dict[tuple[str, int], ErrorCode]:
        """Apply a LeaderAndIsr (see the module docstring). ``partition_states`` are
        ``LeaderAndIsrPartition``-like (inter_broker's ``LeaderAndIsrPartitionState`` fits);
        ``live_leaders`` have ``broker_id``, ``host_name``, ``port``. Returns the error per
        (topic, partition)."""
        states = list(partition_states)
        if self.is_stale_controller_epoch(controller_epoch):
            log.warning(
                "ignoring LeaderAndIsr from controller %d with stale epoch %d (newest %d)",
                controller_id,
                controller_epoch,
                self.controller_epoch,
            )
            return {(s.topic_name, s.partition_index): _STALE_CONTROLLER for s in states}
        self.controller_epoch = controller_epoch
        self._start_background()
        leaders = {int(ll.broker_id): (str(ll.host_name), int(ll.port)) for ll in live_leaders}
        now_ms = self.clock.now_ms()
        result: dict[tuple[str, int], ErrorCode] = {}
        became_leader: list[tuple[str, int, int]] = []
        became_follower: list[tuple[str, int, int]] = []
        for s in states:
            key = (s.topic_name, s.partition_index)
            if self.node_id not in s.replicas:
                result[key] = _UNKNOWN
                continue
            if getattr(s, "is_new", False):  # a new partition's log may go to a live dir
                self.log_manager.expect_new_topic(key[0])  # even while another is offline
            try:
                handle = self._partition_for_controller(*key)
            except (ValueError, OSError) as exc:  # illegal name, storage failure
                log.warning("LeaderAndIsr for %s-%d: %s", key[0], key[1], exc)
                result[key] = (
                    ErrorCode.kafka_storage_error if isinstance(exc, OSError) else _UNKNOWN
                )
                continue
            if isinstance(handle.log, OfflineLog):  # its log dir failed (Kafka: an offline partition)
                result[key] = ErrorCode.kafka_storage_error
                continue
            current = handle.current_epoch_for_controller()
            newer = s.leader_epoch > current or (
                s.leader_epoch == current and s.partition_epoch > handle.state.version
            )
            if not newer:
                result[key] = _STALE_CONTROLLER
                continue
            if topic_ids and key[0] in topic_ids:
                tid = topic_ids[key[0]]
                if (
                    self.controller_managed
                    and tid.int
                    and self._assign_topic_id(handle, tid) not in (tid, None)
                ):
                    result[key] = ErrorCode.inconsistent_topic_id  # another topic's log
                    continue
                handle.topic_id = tid
            state = PartitionState(
                partition=s.partition_index,
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                replicas=list(s.replicas),
                isr=list(s.isr),
                controller_epoch=controller_epoch,
                version=s.partition_epoch,
            )
            self.fetcher_manager.remove_fetcher_for_partitions([key])
            if s.leader == self.node_id:
                handle.make_leader(state, now_ms)
                became_leader.append((key[0], key[1], s.leader_epoch))
            else:
                handle.make_follower(state)
                address = leaders.get(s.leader)
                if address is not None:
                    self.fetcher_manager.add_fetcher_for_partition(s.leader, *address, handle)
                else:
                    log.info("%s-%d: leader %d is not live; not fetching", key[0], key[1], s.leader)
                became_follower.append((key[0], key[1], s.leader_epoch))
            self.purgatory.notify(*key)  # acks=all waiters see the new leadership
            result[key] = _NONE
        self.fetcher_manager.shutdown_idle_fetchers()
        if became_leader or became_follower:
            self._notify_leadership(became_leader, became_follower)
        return result

    def _notify_leadership(
        self, became_leader: list[tuple[str, int, int]], became_follower: list[tuple[str, int, int]]
    ) -> None:
        for listener in list(self._listeners):
            try:
                listener(became_leader, became_follower)
            except Exception:
                log.exception("leadership listener failed")

    def stop_replicas(
        self,
        controller_id: int,
        controller_epoch: int,
        partitions: Iterable[Any],
    ) -> dict[tuple[str, int], ErrorCode]:
        """Apply a StopReplica (see the module docstring). ``partitions`` are
        ``StopReplicaPartition``-like. Returns the error per (topic, partition)."""
        items = list(partitions)
        if self.is_stale_controller_epoch(controller_epoch):
            return {(p.topic_name, p.partition_index): _STALE_CONTROLLER for p in items}
        self.controller_epoch = controller_epoch
        result: dict[tuple[str, int], ErrorCode] = {}
        stopped: list[tuple[str, int, int]] = []
        for p in items:
            key = (p.topic_name, p.partition_index)
            handle = self._partitions.get(key)
            epoch = p.leader_epoch
            if (
                handle is not None
                and epoch not in (_NO_EPOCH, _EPOCH_DURING_DELETE)
                and epoch < handle.current_epoch_for_controller()
            ):
                result[key] = _FENCED
                continue
            self.fetcher_manager.remove_fetcher_for_partitions([key])
            if p.delete_partition:
                self._partitions.pop(key, None)
                try:
                    self.log_manager.delete_log(*key)
                except OSError as exc:
                    log.warning("StopReplica: deleting %s-%d failed: %s", key[0], key[1], exc)
                    result[key] = ErrorCode.kafka_storage_error
                    continue
                path = self.snapshot_path(*key)
                if path is not None:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
            elif handle is not None:
                handle.stop()
            if handle is not None:
                stopped.append((key[0], key[1], epoch))
            self.purgatory.notify(*key)
            result[key] = _NONE
        self.fetcher_manager.shutdown_idle_fetchers()
        if stopped:  # no longer led here (Kafka's coordinators resign on StopReplica too)
            self._notify_leadership([], stopped)
        return result
