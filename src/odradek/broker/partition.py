"""``Partition``: one partition this broker holds a replica of (Kafka's ``Partition``).

A Partition owns the replica's log, its topic config, its leadership state (leader, leader
epoch, replicas, ISR: a ``PartitionState`` from the metadata store), the high watermark (kept
by the log: ``high_watermark_follows_leo`` alone) and the idempotent-producer state (in
storage, next to the log). Follower state (each follower's log end offset and last caught-up
time, for ISR changes) has its placeholder in ``followers``: alone it stays empty.

``check_leader_epoch`` is the one leadership and epoch check, used by Produce, Fetch,
ListOffsets and OffsetsForLeaderEpoch alike (Kafka's ``localLogWithEpochOrThrow``, KIP-320):

* this broker does not lead the partition → NOT_LEADER_OR_FOLLOWER (6);
* the request's ``current_leader_epoch`` (-1: no check) is older than ours →
  FENCED_LEADER_EPOCH (74); newer → UNKNOWN_LEADER_EPOCH (75).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from odradek.broker.metadata_store import PartitionState
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.producer_state import ProducerStateManager

__all__ = ["FollowerState", "Partition"]

_NONE = ErrorCode.none
_NOT_LEADER = ErrorCode.not_leader_or_follower
_FENCED = ErrorCode.fenced_leader_epoch
_UNKNOWN_EPOCH = ErrorCode.unknown_leader_epoch


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (for the replicated mode; unused alone)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = -1


class Partition:
    """One partition replica on this broker. See the module docstring."""

    __slots__ = (
        "_producer_state",
        "config",
        "followers",
        "log",
        "node_id",
        "partition",
        "snapshot_path",
        "state",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        log: PartitionLog,
        config: LogConfig,
        state: PartitionState,
        node_id: int,
        snapshot_path: Path | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.config = config
        self.state = state
        self.node_id = node_id
        self.snapshot_path = snapshot_path
        """Where the producer-state snapshot lives (None: in memory only)."""
        self.followers: dict[int, FollowerState] = {}
        self._producer_state: ProducerStateManager | None = None

    # -- leadership ----------------------------------------------------------------------------

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.node_id

    @property
    def isr(self) -> list[int]:
        return self.state.isr

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def check_leader_epoch(self, current_leader_epoch: int = -1) -> ErrorCode:
        """NONE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH."""
        state = self.state
        if state.leader != self.node_id:
            return _NOT_LEADER
        if current_leader_epoch < 0:
            return _NONE
        epoch = state.leader_epoch
        if current_leader_epoch == epoch:
            return _NONE
        return _FENCED if current_leader_epoch < epoch else _UNKNOWN_EPOCH

    # -- idempotent producers -----------------------------------------------------------------

    def producer_state(self) -> ProducerStateManager:
        """Loaded lazily: last snapshot, then the batch headers from its offset to the log end."""
        ps = self._producer_state
        if ps is None:
            ps = self._producer_state = ProducerStateManager.load(self.log, self.snapshot_path)
        return ps

    def loaded_producer_state(self) -> ProducerStateManager | None:
        return self._producer_state
