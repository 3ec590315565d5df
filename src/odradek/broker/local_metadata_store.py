"""``LocalMetadataStore``: the ``MetadataStore`` of a single broker (no ZooKeeper).

This broker is the only live broker and the controller; every partition it creates is led by
it, with replicas = ISR = [this broker] (an explicit assignment naming other brokers is
refused by the admin APIs before it gets here). Reads answer from dicts; writes complete
without suspending (see ``odradek.broker.metadata_store`` for the contract).

On disk (storage.engine=file) the state is one JSON file, ``<first log dir>/odradek-metadata.json``::

    {"version": 1, "cluster_id": "<22-char base64 uuid>",
     "topics": {"<name>": {"topic_id": "<uuid>", "internal": false,
                           "configs": {"retention.ms": "1000"},
                           "partitions": [{"partition": 0, "leader": 0, "leader_epoch": 0,
                                           "replicas": [0], "isr": [0]}, ...]}}}

and the producer-id blocks in ``<first log dir>/odradek-producer-ids.json`` (``{"next": n}``:
the first id not yet reserved). Every change is written with ``write_atomic`` (temporary
file, fsync, rename, directory fsync), so a crash leaves either the old or the new state.
storage.engine=memory keeps the state in memory only.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.broker.metadata_store import (
    BrokerInfo,
    BrokersChanged,
    InvalidPartitionsError,
    MetadataError,
    MetadataImage,
    MetadataStore,
    PartitionsChanged,
    PartitionState,
    TopicConfigsChanged,
    TopicCreated,
    TopicDeleted,
    TopicExistsError,
    TopicMetadata,
    UnknownTopicError,
)
from odradek.storage.checkpoint import write_atomic

__all__ = [
    "FILE_NAME",
    "PRODUCER_IDS_FILE_NAME",
    "BrokerInfo",
    "InvalidPartitionsError",
    "LocalMetadataStore",
    "MetadataError",
    "MetadataStore",
    "PartitionState",
    "TopicExistsError",
    "TopicMetadata",
    "UnknownTopicError",
]

log = logging.getLogger(__name__)

FILE_NAME = "odradek-metadata.json"
PRODUCER_IDS_FILE_NAME = "odradek-producer-ids.json"


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class LocalMetadataStore(MetadataImage):
    """Topics and partition leadership of a single broker, persisted in the data dir."""

    def __init__(self, node_id: int, data_dir: Path | None) -> None:
        super().__init__(node_id, _new_cluster_id())
        self._dir = None if data_dir is None else Path(data_dir)
        self._path = None if self._dir is None else self._dir / FILE_NAME
        self._next_producer_id = 0
        self.version = 0
        """Bumped on every change (callers may cache lookups against it)."""
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._load()

    # -- persistence -------------------------------------------------------------------------

    def _load(self) -> None:
        assert self._path is not None and self._dir is not None
        ids = self._dir / PRODUCER_IDS_FILE_NAME
        if ids.exists():
            self._next_producer_id = int(json.loads(ids.read_text())["next"])
        if not self._path.exists():
            self._save()
            return
        data = json.loads(self._path.read_text(encoding="utf-8"))
        self._cluster_id = str(data.get("cluster_id") or self._cluster_id)
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
            "cluster_id": self._cluster_id,
            "topics": {name: t.to_json() for name, t in sorted(self._topics.items())},
        }
        write_atomic(self._path, json.dumps(data, indent=1, sort_keys=True).encode())

    # -- reads -------------------------------------------------------------------------------

    def controller_id(self) -> int:
        """This broker controls itself once registered."""
        return self._node_id if self._node_id in self._brokers else -1

    # -- writes --------------------------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo) -> None:
        self._brokers[info.node_id] = info
        self._announce(BrokersChanged(tuple(self.live_brokers()), self.controller_id()))

    def _states(self, assignment: Mapping[int, Sequence[int]], start: int) -> list[PartitionState]:
        if sorted(assignment) != list(range(start, start + len(assignment))):
            raise InvalidPartitionsError(
                f"the assignment must number partitions {start}..{start + len(assignment) - 1}"
            )
        states = []
        for p in sorted(assignment):
            replicas = [int(b) for b in assignment[p]]
            if not replicas:
                raise InvalidPartitionsError(f"partition {p} has no replicas")
            states.append(PartitionState(p, replicas[0], 0, replicas, list(replicas)))
        return states

    async def create_topic(
        self,
        name: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicMetadata:
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        if len(assignment) < 1:
            raise InvalidPartitionsError("number of partitions must be at least 1")
        tid = topic_id or uuid.uuid4()
        topic = TopicMetadata(
            name=name,
            topic_id=tid,
            partitions=self._states(assignment, 0),
            configs=dict(configs or {}),
            internal=internal,
        )
        self._topics[name] = topic
        self._by_id[tid] = topic
        self._save()
        self._announce(TopicCreated(topic))
        return topic

    async def delete_topic(self, name: str) -> TopicMetadata:
        topic = self._topics.pop(name, None)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        self._by_id.pop(topic.topic_id, None)
        self._save()
        self._announce(TopicDeleted(topic))
        return topic

    async def create_partitions(
        self, name: str, assignment: Mapping[int, Sequence[int]]
    ) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        if not assignment:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.num_partitions} partitions; the new count must be larger"
            )
        start = topic.num_partitions
        topic.partitions.extend(self._states(assignment, start))
        self._save()
        self._announce(PartitionsChanged(topic, tuple(range(start, topic.num_partitions))))
        return topic

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        topic.configs = dict(configs)
        self._save()
        self._announce(TopicConfigsChanged(topic))
        return topic

    async def allocate_producer_ids(self, block_size: int) -> int:
        start = self._next_producer_id
        self._next_producer_id = start + block_size
        if self._dir is not None:
            payload = json.dumps({"next": self._next_producer_id}).encode()
            write_atomic(self._dir / PRODUCER_IDS_FILE_NAME, payload, sync_dir=False)
        return start

    # -- listeners -----------------------------------------------------------------------------

    def close(self) -> None:
        self._listeners.clear()


def _check(store: LocalMetadataStore) -> MetadataStore:
    return store  # LocalMetadataStore implements the Protocol (checked by mypy)
