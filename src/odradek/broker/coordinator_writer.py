"""The broker's side of the coordinators' ``PartitionWriter``: internal-topic partitions
through the replica manager, the topic through the topic admin, leaders from the metadata
store. ``follow_leadership`` is the one seam through which a coordinator (group or
transaction) learns, in a cluster, which partitions of its internal topic this broker leads."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from odradek.broker.metadata_store import MetadataStore
from odradek.broker.replica_manager import AppendOrigin, ReplicaManager
from odradek.broker.topic_admin import TopicAdmin
from odradek.coordinator.writer import HighWatermarkListener
from odradek.storage import PartitionLog

__all__ = [
    "BrokerPartitionWriter",
    "InternalLeadershipListener",
    "complete_now",
    "follow_leadership",
]

T = TypeVar("T")


def complete_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that must finish without suspending (a ``LocalMetadataStore`` write)
    and return its result. The coordinator ensures its topic from synchronous code; a store
    whose writes suspend (ZooKeeper) must have the internal topic created ahead, which the
    cluster mode's controller does."""
    try:
        coro.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    coro.close()
    raise RuntimeError("the metadata store suspended during an internal topic creation")


InternalLeadershipListener = Callable[[Mapping[int, int], Sequence[int]], None]
"""``(became_leader, became_follower)`` of one internal topic: {partition: leader epoch} that
this broker now leads, and the partitions it stopped leading."""


def follow_leadership(
    replicas: ReplicaManager, topic: str, listener: InternalLeadershipListener
) -> None:
    """Call ``listener`` whenever LeaderAndIsr makes this broker lead, or stop leading,
    partitions of the internal ``topic`` (Kafka's onElection / onResignation of the group and
    transaction coordinators). The leader epoch is the coordinator epoch."""

    def on_change(
        became_leader: list[tuple[str, int, int]], became_follower: list[tuple[str, int, int]]
    ) -> None:
        led = {p: epoch for t, p, epoch in became_leader if t == topic}
        followed = [p for t, p, _ in became_follower if t == topic]
        if led or followed:
            listener(led, followed)

    replicas.add_leadership_listener(on_change)


class BrokerPartitionWriter:
    """``odradek.coordinator.PartitionWriter`` over this broker's services."""

    def __init__(
        self,
        metadata: MetadataStore,
        replicas: ReplicaManager,
        topic_admin: TopicAdmin,
        commit_timeout_ms: int = 5000,
    ) -> None:
        self._commit_timeout_ms = commit_timeout_ms
        self._metadata = metadata
        self._replicas = replicas
        self._topic_admin = topic_admin
        self._listeners: dict[str, list[HighWatermarkListener]] = {}

    def _high_watermark_moved(self, topic: str, partition: int, high_watermark: int) -> None:
        """The high watermark of an internal partition moved (an append, followers' fetches)."""
        for listener in self._listeners.get(topic, ()):
            listener(partition, high_watermark)

    def ensure_internal_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> int:
        topic = self._metadata.topic(name)
        if topic is None:
            topic = complete_now(
                self._topic_admin.create_topic(name, partitions, configs, internal=True)
            )
        return topic.num_partitions

    def partition_count(self, topic: str) -> int | None:
        meta = self._metadata.topic(topic)
        return None if meta is None else meta.num_partitions

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        meta = self._metadata.topic(topic)
        return {} if meta is None else meta.configs

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        handle = self._replicas.get_partition(topic, partition, create=False)
        return None if handle is None else handle.log

    def append(self, topic: str, partition: int, records: bytes) -> int:
        """Append the coordinator's batch as this partition's leader
        (``ReplicaManager.append_records`` with acks=1: the coordinator waits for the ISR with
        ``wait_replicated``); its base offset. Raises RuntimeError when the partition does not
        exist, is not led here, or the append fails."""
        results, _ = self._replicas.append_records(
            [(topic, partition, records)], 1, 0.0, origin=AppendOrigin.COORDINATOR
        )
        result = results[0]
        error = result.error
        if error is ErrorCode.none:
            return result.base_offset
        if error is ErrorCode.unknown_topic_or_partition:
            raise RuntimeError(f"{topic}-{partition} does not exist")
        if error is ErrorCode.not_leader_or_follower:
            raise RuntimeError(f"{topic}-{partition} is not led by this broker")
        raise RuntimeError(f"append to {topic}-{partition} failed: {error.name} {result.message}")

    async def wait_replicated(self, topic: str, partition: int, end_offset: int) -> bool:
        """In a cluster: acks=all for the coordinator's own appends (commits survive the loss
        of the leader), within ``offsets.commit.timeout.ms``; not committed when the ISR is
        below the topic's ``min.insync.replicas`` override (``__transaction_state`` has
        transaction.state.log.min.isr there)."""
        handle = self._replicas.get_partition(topic, partition, create=False)
        if handle is None:
            return False
        if not handle.controller_managed:
            return True
        try:
            min_isr = max(1, int(self.topic_configs(topic).get("min.insync.replicas", 1)))
        except ValueError:
            min_isr = 1
        code = await self._replicas.wait_for_acks(
            handle, end_offset, min_isr, self._commit_timeout_ms / 1000
        )
        return code == ErrorCode.none

    def flush(self, topic: str, partition: int) -> None:
        handle = self._replicas.get_partition(topic, partition, create=False)
        if handle is not None:
            handle.log.flush()

    def leader(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        state = self._metadata.partition(topic, partition)
        leader_id = self._metadata.node_id if state is None else state.leader
        if leader_id < 0:
            return None
        info = self._metadata.broker(leader_id)
        return None if info is None else (info.node_id, info.host, info.port)

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self._metadata.partition(topic, partition)
        return 0 if state is None else max(0, state.leader_epoch)

    def add_high_watermark_listener(self, topic: str, listener: HighWatermarkListener) -> None:
        if topic not in self._listeners:  # only this topic's partitions call the writer
            self._replicas.add_high_watermark_listener(self._high_watermark_moved, topic)
        self._listeners.setdefault(topic, []).append(listener)
