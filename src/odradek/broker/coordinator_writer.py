"""The broker's side of the group coordinator's ``PartitionWriter``: internal-topic partitions
through the replica manager, the topic through the topic admin, leaders from the metadata
store."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from odradek.broker.metadata_store import MetadataStore
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.topic_admin import TopicAdmin
from odradek.coordinator.writer import HighWatermarkListener
from odradek.storage import PartitionLog

__all__ = ["BrokerPartitionWriter", "complete_now"]

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


class BrokerPartitionWriter:
    """``odradek.coordinator.PartitionWriter`` over this broker's services."""

    def __init__(
        self,
        metadata: MetadataStore,
        replicas: ReplicaManager,
        topic_admin: TopicAdmin,
    ) -> None:
        self._metadata = metadata
        self._replicas = replicas
        self._topic_admin = topic_admin
        self._listeners: dict[str, list[HighWatermarkListener]] = {}

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
        handle = self._replicas.get_partition(topic, partition)
        if handle is None:
            raise RuntimeError(f"{topic}-{partition} does not exist")
        result = handle.log.append(records, handle.leader_epoch)
        if records[22] & 0x10 and not records[22] & 0x20:  # a transactional data batch
            pid = int.from_bytes(records[43:51], "big", signed=True)
            handle.producer_state().append_txn_data(pid, result.base_offset)
        listeners = self._listeners.get(topic)
        if listeners:
            hw = handle.log.high_watermark
            for listener in listeners:
                listener(partition, hw)
        return result.base_offset

    def flush(self, topic: str, partition: int) -> None:
        handle = self._replicas.get_partition(topic, partition, create=False)
        if handle is not None:
            handle.log.flush()

    def leader(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        state = self._metadata.partition(topic, partition)
        leader_id = self._metadata.node_id if state is None else state.leader
        info = self._metadata.broker(leader_id)
        return None if info is None else (info.node_id, info.host, info.port)

    def leader_epoch(self, topic: str, partition: int) -> int:
        state = self._metadata.partition(topic, partition)
        return 0 if state is None else max(0, state.leader_epoch)

    def add_high_watermark_listener(self, topic: str, listener: HighWatermarkListener) -> None:
        self._listeners.setdefault(topic, []).append(listener)
