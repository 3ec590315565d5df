"""Value types shared by the producer, consumer and admin clients."""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
]

Headers = list[tuple[str, bytes | None]]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a produced record landed. ``offset`` is -1 with acks=0; ``timestamp`` is the
    record's create time, or the broker's log append time when the topic uses LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    """One consumed record. ``timestamp_type``: 0 CreateTime, 1 LogAppendTime.
    ``headers`` is a list of (key, value) pairs in wire order."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    leader_epoch: int = -1


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = -1
    error_code: int = 0
    offline_replicas: tuple[int, ...] = ()
    """Replicas on a failed log dir or an unavailable broker (Metadata v5+; empty before)."""


class TopicDescription(NamedTuple):
    name: str
    partitions: list[PartitionInfo]
    is_internal: bool = False
    topic_id: str | None = None

    @property
    def partition_count(self) -> int:
        return len(self.partitions)
