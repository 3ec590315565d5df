"""Cluster metadata of a single broker: topics, partitions, leaders, topic configs.

``MetadataStore`` is the seam where a ZooKeeper-backed store will slot in for the cluster mode
(DESIGN.md §8): every partition carries an explicit leader, leader epoch, replica list and ISR
even though, alone, the leader is always this broker and the ISR is just it.

On disk (storage.engine=file) the state is one JSON file, ``<first log dir>/odradek-metadata.json``::

    {"version": 1, "cluster_id": "<22-char base64 uuid>",
     "topics": {"<name>": {"topic_id": "<uuid>", "internal": false,
                           "configs": {"retention.ms": "1000"},
                           "partitions": [{"partition": 0, "leader": 0, "leader_epoch": 0,
                                           "replicas": [0], "isr": [0]}, ...]}}}

Every change is written to ``odradek-metadata.json.tmp``, fsynced, renamed over the file and the
directory fsynced, so a crash leaves either the old or the new state. storage.engine=memory keeps
the state in memory only.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FILE_NAME",
    "InvalidPartitionsError",
    "MetadataError",
    "MetadataStore",
    "PartitionState",
    "TopicExistsError",
    "TopicMetadata",
    "UnknownTopicError",
]

FILE_NAME = "odradek-metadata.json"


class MetadataError(Exception):
    pass


class TopicExistsError(MetadataError):
    """TOPIC_ALREADY_EXISTS (36)."""


class UnknownTopicError(MetadataError):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""


class InvalidPartitionsError(MetadataError):
    """INVALID_PARTITIONS (37)."""


@dataclass(slots=True)
class PartitionState:
    """Leadership of one partition. Alone: leader = this broker, replicas = isr = [this broker]."""

    partition: int
    leader: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)

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


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class MetadataStore:
    """Topics and partition leadership of a single broker, persisted in the data dir."""

    def __init__(self, node_id: int, data_dir: Path | None) -> None:
        self.node_id = node_id
        self._path = None if data_dir is None else Path(data_dir) / FILE_NAME
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self.cluster_id = _new_cluster_id()
        self.version = 0
        """Bumped on every change (callers cache lookups against it)."""
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._load()

    # -- persistence -------------------------------------------------------------------------

    def _load(self) -> None:
        assert self._path is not None
        if not self._path.exists():
            self._save()
            return
        data = json.loads(self._path.read_text(encoding="utf-8"))
        self.cluster_id = str(data.get("cluster_id") or self.cluster_id)
        for name, t in data.get("topics", {}).items():
            topic = TopicMetadata.from_json(name, t)
            self._topics[name] = topic
            self._by_id[topic.topic_id] = topic

    def _save(self) -> None:
        self.version += 1
        if self._path is None:
            return
        data = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "topics": {name: t.to_json() for name, t in sorted(self._topics.items())},
        }
        tmp = self._path.with_name(self._path.name + ".tmp")
        payload = json.dumps(data, indent=1, sort_keys=True).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._path)
        dfd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    # -- queries -----------------------------------------------------------------------------

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def topics(self) -> list[TopicMetadata]:
        return list(self._topics.values())

    def partition(self, name: str, partition: int) -> PartitionState | None:
        t = self._topics.get(name)
        if t is None or partition < 0 or partition >= len(t.partitions):
            return None
        return t.partitions[partition]

    # -- changes -----------------------------------------------------------------------------

    def _partition_states(self, start: int, stop: int) -> list[PartitionState]:
        return [
            PartitionState(p, self.node_id, 0, [self.node_id], [self.node_id])
            for p in range(start, stop)
        ]

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata:
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        if num_partitions < 1:
            raise InvalidPartitionsError("number of partitions must be at least 1")
        tid = topic_id or uuid.uuid4()
        topic = TopicMetadata(
            name=name,
            topic_id=tid,
            partitions=self._partition_states(0, num_partitions),
            configs=dict(configs or {}),
            internal=internal,
        )
        self._topics[name] = topic
        self._by_id[tid] = topic
        self._save()
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self._topics.pop(name, None)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        self._by_id.pop(topic.topic_id, None)
        self._save()
        return topic

    def add_partitions(self, name: str, total: int) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        if total <= topic.num_partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.num_partitions} partitions; the new count must be larger, got {total}"
            )
        topic.partitions.extend(self._partition_states(topic.num_partitions, total))
        self._save()
        return topic

    def alter_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace the topic's config overrides with ``configs``."""
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        topic.configs = dict(configs)
        self._save()
        return topic

    def bump_leader_epochs(self, names: Iterable[str] | None = None) -> None:
        """Start a new leader epoch for partitions (not needed alone; for the cluster mode)."""
        for t in self._topics.values():
            if names is not None and t.name not in names:
                continue
            for p in t.partitions:
                p.leader_epoch += 1
        self._save()

    def close(self) -> None:
        pass
