"""``ReplicaManager``: the partitions this broker holds, as ``Partition`` objects (Kafka's
ReplicaManager, reduced to what one broker needs and shaped for the replicated mode).

* ``get_partition(topic, p)`` opens (or creates) a partition's log on first use; with
  ``create=False`` a partition without a log gives None (an internal topic's logs are created
  lazily, each on its first use).
* ``leader_partition(topic, p, current_leader_epoch)`` is what Produce, Fetch, ListOffsets and
  OffsetsForLeaderEpoch call: (partition, NONE) or (partition or None, the error):
  UNKNOWN_TOPIC_OR_PARTITION, or ``Partition.check_leader_epoch``'s verdict.
* Producer-state snapshots: ``producer_state_snapshots()`` collects, on the event loop, the
  JSON of every changed state (consistent with its log end); ``write_snapshots`` writes them
  (a worker thread may run it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from pathlib import Path

from kio.schema.errors import ErrorCode

from odradek.broker.metadata_store import MetadataStore, TopicMetadata
from odradek.broker.partition import Partition
from odradek.broker.purgatory import Purgatory
from odradek.storage import LogConfig, LogManager
from odradek.storage.producer_state import write_snapshot

__all__ = ["PRODUCER_STATE_DIR", "ReplicaManager"]

log = logging.getLogger("odradek.broker")

PRODUCER_STATE_DIR = "odradek-producer-state"
_UNKNOWN = ErrorCode.unknown_topic_or_partition


class ReplicaManager:
    """The partitions of this broker. See the module docstring."""

    def __init__(
        self,
        metadata: MetadataStore,
        log_manager: LogManager,
        default_log_config: LogConfig,
        purgatory: Purgatory,
        data_dir: Path | None,
    ) -> None:
        self.metadata = metadata
        self.node_id = metadata.node_id
        self.log_manager = log_manager
        self.default_log_config = default_log_config
        self.purgatory = purgatory
        self._state_dir = None if data_dir is None else data_dir / PRODUCER_STATE_DIR
        self._partitions: dict[tuple[str, int], Partition] = {}

    # -- partitions ---------------------------------------------------------------------------

    def log_config_for(self, topic: TopicMetadata) -> LogConfig:
        if not topic.configs:
            return self.default_log_config
        return LogConfig.from_topic_config(topic.configs, self.default_log_config)

    def snapshot_path(self, topic: str, partition: int) -> Path | None:
        if self._state_dir is None:
            return None
        return self._state_dir / f"{topic}-{partition}.json"

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
        handle = Partition(
            topic,
            partition,
            plog,
            config,
            meta.partitions[partition],
            self.node_id,
            self.snapshot_path(topic, partition),
        )
        self._partitions[(topic, partition)] = handle
        return handle

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
        if not topic.internal:
            for p in range(start, topic.num_partitions):
                self.get_partition(topic.name, p)

    def remove_topic(self, topic: TopicMetadata) -> None:
        """Drop a deleted topic's partitions, logs and producer-state snapshots."""
        name = topic.name
        for key in [k for k in self._partitions if k[0] == name]:
            del self._partitions[key]
            self.purgatory.notify(name, key[1])
        self.log_manager.delete_topic(name)
        for p in range(topic.num_partitions):
            path = self.snapshot_path(name, p)
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def apply_topic_config(self, topic: TopicMetadata) -> None:
        """Apply a topic's changed overrides to its live logs."""
        config = self.log_config_for(topic)
        self.log_manager.update_config(topic.name, config)
        for (t, _p), handle in self._partitions.items():
            if t == topic.name:
                handle.config = config

    # -- producer state -----------------------------------------------------------------------

    def truncate_producer_states(self) -> None:
        """After retention: forget producer batches below each log's start."""
        for handle in self._partitions.values():
            ps = handle.loaded_producer_state()
            if ps is not None:
                bases = getattr(handle.log, "segment_base_offsets", None)
                ps.truncate_before(handle.log.log_start_offset, bases() if bases else None)

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
