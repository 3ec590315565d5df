"""``PartitionWriter``: what the group coordinator needs from the broker, and nothing more
(modelled on Kafka's ``PartitionWriter`` of the new group coordinator, plus the loader's read
access). The broker implements it (``odradek.broker.coordinator_writer``); the coordinator
never sees the broker, its config or its data directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from odradek.storage import PartitionLog

__all__ = ["HighWatermarkListener", "PartitionWriter"]

HighWatermarkListener = Callable[[int, int], None]
"""Called with (partition, new high watermark) of an internal partition."""


class PartitionWriter(Protocol):
    def ensure_internal_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> int:
        """Create the internal topic ``name`` unless it exists; its partition count. Its
        partitions' logs are created on first append."""
        ...

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count, None when it does not exist."""
        ...

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        """The topic's config overrides (empty when none or no topic)."""
        ...

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log when it has one (loading reads it), else None."""
        ...

    def append(self, topic: str, partition: int, records: bytes) -> int:
        """Append one v2 record batch (the log is created on first use); its base offset.
        Raises storage's errors."""
        ...

    def flush(self, topic: str, partition: int) -> None:
        """fsync the partition's log (no-op without one)."""
        ...

    def leader(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        """(node id, host, port) of the partition's leader, None when it has none."""
        ...

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch (the transaction coordinator's coordinator epoch);
        0 when unknown."""
        ...

    async def wait_replicated(self, topic: str, partition: int, end_offset: int) -> bool:
        """Wait (bounded) until the records before ``end_offset`` are committed by the
        partition's ISR (acks=all); whether they are. True at once without replication."""
        ...

    def add_high_watermark_listener(self, topic: str, listener: HighWatermarkListener) -> None:
        """Call ``listener`` whenever the high watermark of one of ``topic``'s partitions
        moves (alone: after every append, as the high watermark follows the log end)."""
        ...
