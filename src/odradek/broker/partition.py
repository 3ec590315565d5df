"""``Partition``: one partition this broker holds a replica of (Kafka's ``Partition``).

A Partition owns the replica's log, its topic config, its leadership state (leader, leader
epoch, replicas, ISR, partition epoch: a ``PartitionState``), the high watermark (kept by the
log) and the idempotent-producer state (in storage, next to the log).

Two modes:

* **Alone** (no controller): the state is the metadata store's, this broker leads, the ISR is
  itself and the log's high watermark follows its log end offset (``high_watermark_follows_leo``).
* **Replicated** (``controller_managed``, from the first LeaderAndIsr): the state is a copy
  owned by the Partition, changed only by LeaderAndIsr (``make_leader`` / ``make_follower``)
  and by committed ISR changes (``apply_isr_update``). The high watermark is driven here:

  - leader: ``followers`` holds a ``FollowerState`` per other replica (its log end offset =
    its last fetch offset, and when it was last caught up). HW = min(LEO of the leader and of
    every replica of the *maximal* ISR) — the committed ISR plus a pending expansion (Kafka's
    "maximal ISR": a pending shrink counts only once committed). The HW never moves back.
  - follower: the HW is the leader's, clamped to the own log end (the replica fetcher).

The decisions are pure functions of this object's fields and the time passed in (no I/O, no
clock): ``update_follower_fetch``, ``maybe_increment_high_watermark``,
``isr_expansion``, ``isr_shrink``, ``check_enough_replicas`` (acks=all before the append)
and ``acks_all_status`` (acks=all after it, Kafka's ``checkEnoughReplicasReachOffset``).

The leader's doors, each reached through the ``ReplicaManager``: ``append_as_leader`` (Kafka's
``appendRecordsToLeader``: Produce, transaction markers, the coordinators' writes),
``fetch_records`` (consumers and followers), ``fetch_offset_for_timestamp`` (ListOffsets, with
OFFSET_NOT_AVAILABLE below the current epoch's start), ``last_offset_for_leader_epoch``
(OffsetsForLeaderEpoch). Each begins with ``check_leader_epoch``, the one leadership and epoch
check (Kafka's ``localLogWithEpochOrThrow``, KIP-320):

* this broker does not lead the partition → NOT_LEADER_OR_FOLLOWER (6);
* the request's ``current_leader_epoch`` (-1: no check) is older than ours →
  FENCED_LEADER_EPOCH (74); newer → UNKNOWN_LEADER_EPOCH (75).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from odradek.broker.metadata_store import PartitionState
from odradek.broker.purgatory import Purgatory
from odradek.protocol.offsets import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from odradek.protocol.records import BATCH_HEADER, BATCH_HEADER_SIZE, BatchHeader, RecordBatch
from odradek.storage import AppendResult, FileRegion, LogConfig, PartitionLog
from odradek.storage.cleaner_records import RecordValidationError
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from odradek.storage.producer_state import (
    MarkerVerdict,
    ProducerStateManager,
    Verdict,
    snapshot_offset,
)
from odradek.storage.transaction_index import ControlRecordType, parse_control_record

__all__ = [
    "AppendOrigin",
    "FetchPartitionData",
    "FollowerState",
    "HighWatermarkListener",
    "LeaderAppendResult",
    "Partition",
    "TxnVerifier",
    "caught_up_time",
    "high_watermark_candidate",
]

log = logging.getLogger("odradek.broker")

_NONE = ErrorCode.none
_NOT_LEADER = ErrorCode.not_leader_or_follower
_FENCED = ErrorCode.fenced_leader_epoch
_UNKNOWN_EPOCH = ErrorCode.unknown_leader_epoch
_NOT_ENOUGH = ErrorCode.not_enough_replicas
_NOT_ENOUGH_AFTER = ErrorCode.not_enough_replicas_after_append
_CORRUPT = ErrorCode.corrupt_message
_INVALID_RECORD = ErrorCode.invalid_record
_TOO_LARGE = ErrorCode.message_too_large
_OUT_OF_ORDER = ErrorCode.out_of_order_sequence_number
_BAD_EPOCH = ErrorCode.invalid_producer_epoch
_TXN_STATE = ErrorCode.invalid_txn_state
_STORAGE = ErrorCode.kafka_storage_error
_OUT_OF_RANGE = ErrorCode.offset_out_of_range
_OFFSET_NOT_AVAILABLE = ErrorCode.offset_not_available
_SEQ_MOD = 2**31
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_tuple_new = tuple.__new__

HighWatermarkListener = Callable[[str, int, int], None]
"""``(topic, partition, high_watermark)``: called whenever a led partition's high watermark
moves (Kafka's ``PartitionListener.onHighWatermarkUpdated``)."""

TxnVerifier = Callable[[int, int, str, int], ErrorCode]
"""(producer id, epoch, topic, partition) -> NONE when the partition is in the producer's
ongoing transaction (the transaction coordinator's verdict, KIP-890 part 1)."""


class AppendOrigin(enum.Enum):
    """Who appends as leader (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"
    """A producer's batches (Produce): headers, sizes, idempotence and transactions checked."""
    COORDINATOR = "coordinator"
    """The group and transaction coordinators' own batches and transaction markers
    (control batches): trusted, only the producer state is kept (a marker is checked against
    it: a fenced coordinator epoch or an old producer epoch is refused)."""


class FetchPartitionData(NamedTuple):
    """One partition's answer to a Fetch (Kafka's ``FetchPartitionData``), the fields of
    ``protocol.fetch_response.FetchPartitionResponse`` in its order. ``records``: whole
    batches (None: none); ``aborted_transactions``: (producer id, first offset) of the
    aborted transactions overlapping them, read_committed only; ``diverging_epoch``: (epoch,
    end offset) a follower must truncate to (KIP-320)."""

    partition: int
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | bytes | None = None
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    diverging_epoch: tuple[int, int] | None = None


class LeaderAppendResult(NamedTuple):
    """One partition's outcome of ``Partition.append_as_leader`` (Kafka's ``LogAppendInfo``
    with its error). On an error nothing was appended. ``last_offset`` is -1 when nothing was
    appended (an error, or a duplicate of an idempotent batch, answered with the original's
    ``base_offset``); ``log_append_time_ms`` is -1 with CreateTime; ``record_errors`` are
    (index of the record across the batches, message) pairs for INVALID_RECORD (KIP-467)."""

    error: ErrorCode
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[tuple[int, str | None], ...] = ()
    message: str | None = None


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's ``Replica``): its log end offset (-1:
    unknown yet), when it was last caught up, and the leader's LEO and time at its last fetch."""

    log_end_offset: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = -1


def caught_up_time(state: FollowerState, fetch_offset: int, leader_leo: int, now_ms: int) -> int:
    """The follower's new ``last_caught_up_ms`` after a fetch at ``fetch_offset`` (Kafka's
    rule): now if it fetched at the leader's LEO; else the time of its previous fetch if it has
    now reached the leader's LEO of that time; else unchanged."""
    if fetch_offset >= leader_leo:
        return now_ms
    if state.last_fetch_ms >= 0 and fetch_offset >= state.last_fetch_leader_leo:
        return max(state.last_caught_up_ms, state.last_fetch_ms)
    return state.last_caught_up_ms


def high_watermark_candidate(leader_leo: int, replica_leos: Iterable[int]) -> int:
    """min(leader LEO, LEO of every other replica of the maximal ISR); an unknown LEO (-1)
    holds it at -1 (the caller never moves the HW back)."""
    return min([leader_leo, *replica_leos])


class Partition:
    """One partition replica on this broker. See the module docstring."""

    __slots__ = (
        "_hw_listeners",
        "_producer_state",
        "_producer_state_generation",
        "_purgatory",
        "config",
        "controller_managed",
        "followers",
        "leader_epoch_start_offset",
        "log",
        "node_id",
        "partition",
        "pending_isr",
        "snapshot_path",
        "state",
        "topic",
        "topic_id",
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
        *,
        purgatory: Purgatory | None = None,
        high_watermark_listeners: list[HighWatermarkListener] | None = None,
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
        self._producer_state_generation = 0
        """Bumped whenever the loaded state is dropped (a truncation, a reset): an
        asynchronous load begun before is then discarded."""
        self.controller_managed = False
        """True once a LeaderAndIsr set this partition's state (the replicated mode)."""
        self.pending_isr: list[int] | None = None
        """The ISR of an AlterPartition in flight (one at a time), else None."""
        self.leader_epoch_start_offset = 0
        """The leader's LEO when it took its current epoch (ISR expansion needs a follower
        past it)."""
        self.topic_id: uuid.UUID | None = None
        """The topic id a LeaderAndIsr named (None alone)."""
        self._purgatory = purgatory
        """Woken after every append and whenever the high watermark moves (Kafka's delayed
        operations of the partition)."""
        self._hw_listeners = (
            high_watermark_listeners if high_watermark_listeners is not None else []
        )
        """Called whenever the high watermark moves: the replica manager's list for this
        partition's topic (shared, so a listener added later is seen; usually empty)."""

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

    def check_leader_epoch(
        self, current_leader_epoch: int = -1, *, require_leader: bool = True
    ) -> ErrorCode:
        """NONE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH. Without
        ``require_leader`` (a consumer's Fetch v11+, KIP-392) a follower of the current
        leader passes too."""
        state = self.state
        if state.leader != self.node_id and (
            require_leader
            or state.leader < 0
            or not self.controller_managed
            or self.node_id not in state.replicas
        ):
            return _NOT_LEADER
        if current_leader_epoch < 0:
            return _NONE
        epoch = state.leader_epoch
        if current_leader_epoch == epoch:
            return _NONE
        return _FENCED if current_leader_epoch < epoch else _UNKNOWN_EPOCH

    def current_epoch_for_controller(self) -> int:
        """The leader epoch a LeaderAndIsr must exceed: -1 until the first one arrived."""
        return self.state.leader_epoch if self.controller_managed else -1

    def make_leader(self, state: PartitionState, now_ms: int) -> None:
        """Take leadership from a LeaderAndIsr ``state`` (copied): the new leader epoch starts
        at the log end (leader-epoch-checkpoint, KAFKA-7415); every follower in the ISR counts
        as caught up now, the others as never (the same epoch again, with a newer partition
        epoch, keeps what is known of the followers); the HW is recomputed (never backwards)."""
        same_term = (
            self.controller_managed
            and self.is_leader
            and (state.leader_epoch == self.state.leader_epoch)
        )
        previous = self.followers if same_term else {}
        self.state = _copy(state)
        self.controller_managed = True
        log = self.log
        log.high_watermark_follows_leo = False
        entries = log.leader_epoch_entries()
        if not entries or entries[-1][0] < state.leader_epoch:
            log.assign_leader_epoch(state.leader_epoch, log.log_end_offset)
        if not same_term:
            self.leader_epoch_start_offset = log.log_end_offset
        isr = set(state.isr)
        self.followers = {
            r: previous.get(r) or FollowerState(last_caught_up_ms=now_ms if r in isr else -1)
            for r in state.replicas
            if r != self.node_id
        }
        self.pending_isr = None
        self.maybe_increment_high_watermark()

    def make_follower(self, state: PartitionState) -> None:
        """Follow the leader of a LeaderAndIsr ``state`` (copied). Truncation is the
        replica fetcher's (KIP-101/279); the producer state is rebuilt when it is needed."""
        self.state = _copy(state)
        self.controller_managed = True
        self.log.high_watermark_follows_leo = False
        self.followers = {}
        self.pending_isr = None

    def stop(self) -> None:
        """StopReplica without deletion: no longer a leader nor a follower here."""
        self.state = replace(self.state, leader=-1, isr=list(self.state.isr))
        self.followers = {}
        self.pending_isr = None

    # -- leader: follower tracking, HW, ISR ----------------------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Record a follower's fetch (its LEO is ``fetch_offset``); False when ``replica_id``
        is not a replica of this partition."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return False
        leader_leo = self.log.log_end_offset
        follower.last_caught_up_ms = caught_up_time(follower, fetch_offset, leader_leo, now_ms)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_leader_leo = leader_leo
        follower.last_fetch_ms = now_ms
        return True

    def maximal_isr(self) -> list[int]:
        """The committed ISR plus the members a pending expansion adds."""
        pending = self.pending_isr
        if pending is None:
            return self.state.isr
        isr = list(self.state.isr)
        isr.extend(r for r in pending if r not in isr)
        return isr

    def maybe_increment_high_watermark(self) -> bool:
        """Leader: move the HW to min LEO over the maximal ISR if that is higher; whether it
        moved."""
        log = self.log
        if not self.is_leader:
            return False
        leos = []
        for r in self.maximal_isr():
            if r == self.node_id:
                continue
            follower = self.followers.get(r)
            leos.append(-1 if follower is None else follower.log_end_offset)
        candidate = high_watermark_candidate(log.log_end_offset, leos)
        if candidate > log.high_watermark:
            log.update_high_watermark(candidate)
            return True
        return False

    def isr_expansion(self, replica_id: int) -> list[int] | None:
        """The new ISR if ``replica_id`` (a replica out of the ISR) has caught up: its LEO is at
        least the HW and the start of the leader's current epoch; None otherwise or while
        another ISR change is in flight."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        isr = self.state.isr
        follower = self.followers.get(replica_id)
        if follower is None or replica_id in isr:
            return None
        leo = follower.log_end_offset
        if leo >= self.log.high_watermark and leo >= self.leader_epoch_start_offset:
            return [*isr, replica_id]
        return None

    def isr_shrink(self, now_ms: int, lag_time_max_ms: int) -> list[int] | None:
        """The new ISR without the followers out of sync (not at the leader's LEO and not caught
        up for more than ``lag_time_max_ms``); None when none is, or while another ISR change is
        in flight. The leader never removes itself, so the ISR is never empty."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        leader_leo = self.log.log_end_offset
        out = set()
        for r in self.state.isr:
            if r == self.node_id:
                continue
            follower = self.followers.get(r)
            if follower is None:
                out.add(r)
                continue
            if (
                follower.log_end_offset != leader_leo
                and now_ms - follower.last_caught_up_ms > lag_time_max_ms
            ):
                out.add(r)
        if not out:
            return None
        return [r for r in self.state.isr if r not in out]

    def apply_isr_update(self, state: PartitionState) -> bool:
        """A committed ISR change (from the AlterPartitionManager): applied when it is for our
        leader epoch and newer than our partition epoch; whether it was applied."""
        self.pending_isr = None
        if state.leader_epoch != self.state.leader_epoch or state.version < self.state.version:
            return False
        self.state = replace(self.state, isr=list(state.isr), version=state.version)
        for r in state.isr:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerState()
        return True

    # -- acks=all ------------------------------------------------------------------------------

    def check_enough_replicas(self, min_insync_replicas: int) -> ErrorCode:
        """Before an acks=all append: NOT_ENOUGH_REPLICAS when |ISR| < min.insync.replicas."""
        if len(self.state.isr) < min_insync_replicas:
            return _NOT_ENOUGH
        return _NONE

    def acks_all_status(self, required_offset: int, min_insync_replicas: int) -> ErrorCode | None:
        """After an acks=all append up to ``required_offset`` (exclusive): None while the HW is
        below it; then NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR has
        shrunk below min.insync.replicas; NOT_LEADER_OR_FOLLOWER once leadership is lost."""
        if not self.is_leader:
            return _NOT_LEADER
        if self.log.high_watermark < required_offset:
            return None
        if len(self.maximal_isr()) < min_insync_replicas:
            return _NOT_ENOUGH_AFTER
        return _NONE

    # -- the leader's reads ---------------------------------------------------------------------

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """(epoch, end offset) when a replicated fetcher's last fetched epoch diverges from
        this log (KIP-320, Kafka's ``Partition.fetchRecords``): the leader's end offset for
        that epoch is below ``fetch_offset``, or the leader's largest epoch ≤ it is older;
        None otherwise, alone, or when ``last_fetched_epoch`` is -1."""
        if last_fetched_epoch < 0 or not self.controller_managed:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0:  # no epoch this old here (log start moved): the offset checks decide
            return None
        if end < fetch_offset or epoch < last_fetched_epoch:
            return epoch, end
        return None

    def fetch_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        min_one_batch: bool,
        *,
        follower: bool,
        read_committed: bool,
        current_leader_epoch: int = -1,
        last_fetched_epoch: int = -1,
        client_rack: str | None = None,
        rack_of: Callable[[int], str | None] | None = None,
        now_ms: int = -1,
    ) -> FetchPartitionData:
        """Read as leader (Kafka's ``Partition.fetchRecords``): the leadership and epoch check;
        a diverging fetch gets its ``diverging_epoch`` and no records; an offset below the log
        start or past the log end is OFFSET_OUT_OF_RANGE; then whole batches from the one
        holding ``fetch_offset``, at most ``max_bytes`` (at least one batch with
        ``min_one_batch``), below the limit: the log end for a follower, else the high
        watermark, or the last stable offset with ``read_committed`` (with the aborted
        transactions overlapping what is returned).

        KIP-392: a consumer that sent a rack (``client_rack``, Fetch v11+; None before) may read
        from a follower, up to the follower's high watermark. With a replica selector
        (``rack_of``: a live broker's rack) the leader answers such a consumer, when
        ``preferred_read_replica`` names a replica, with that replica, the offsets and no
        records (Kafka's ``ReplicaManager.readFromLog``)."""
        index = self.partition
        code = self.check_leader_epoch(current_leader_epoch, require_leader=client_rack is None)
        if code is not _NONE:
            return FetchPartitionData(index, code)
        plog = self.log
        hw = plog.high_watermark
        start = plog.log_start_offset
        if client_rack and rack_of is not None and self.is_leader:
            preferred = self.preferred_read_replica(fetch_offset, client_rack, rack_of, now_ms)
            if preferred >= 0:
                lso = self.producer_state().last_stable_offset(hw) if read_committed else hw
                return FetchPartitionData(
                    index, _NONE, hw, lso, start, preferred_read_replica=preferred
                )
        if last_fetched_epoch >= 0:
            diverging = self.diverging_epoch(last_fetched_epoch, fetch_offset)
            if diverging is not None:
                return FetchPartitionData(index, _NONE, hw, hw, start, None, None, -1, diverging)
        if fetch_offset < start or fetch_offset > plog.log_end_offset:
            return FetchPartitionData(index, _OUT_OF_RANGE, hw, hw, start)
        limit = plog.log_end_offset if follower else hw
        lso = hw
        if read_committed:
            state = self.producer_state()
            lso = limit = state.last_stable_offset(hw)
        if fetch_offset >= limit:
            return FetchPartitionData(index, _NONE, hw, lso, start)
        try:
            result = plog.read(
                fetch_offset, max(max_bytes, 1), max_offset=limit, min_one_batch=min_one_batch
            )
        except OffsetOutOfRangeError:
            return FetchPartitionData(index, _OUT_OF_RANGE, hw, hw, plog.log_start_offset)
        except OSError:  # storage's KafkaStorageError and plain I/O errors
            return FetchPartitionData(index, _STORAGE, hw, hw, start)
        records = result.records
        if not len(records):
            return FetchPartitionData(index, _NONE, hw, lso, start)
        if read_committed:
            aborted = [
                (a.producer_id, a.first_offset)
                for a in state.aborted_transactions(fetch_offset, lso)
            ]
            return FetchPartitionData(index, _NONE, hw, lso, start, records, aborted)
        return FetchPartitionData(index, _NONE, hw, hw, start, records)

    def preferred_read_replica(
        self, fetch_offset: int, client_rack: str, rack_of: Callable[[int], str | None], now_ms: int
    ) -> int:
        """Kafka's ``findPreferredReadReplica`` with its ``RackAwareReplicaSelector``, as
        leader: among the in-sync followers whose log end is at or past ``fetch_offset`` and
        the leader, those whose broker (live, ``rack_of``) is in ``client_rack``; -1 (read
        here) when none is or the leader is one of them, else the most caught-up one (largest
        log end offset, then most recently caught up)."""
        if rack_of(self.node_id) == client_rack:
            return -1
        isr = self.state.isr
        best: tuple[int, int, int] | None = None
        for replica, follower in self.followers.items():
            if replica not in isr or follower.log_end_offset < fetch_offset:
                continue
            if rack_of(replica) != client_rack:
                continue
            key = (follower.log_end_offset, -(now_ms - follower.last_caught_up_ms), replica)
            if best is None or key > best:
                best = key
        return -1 if best is None else best[2]

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        *,
        follower: bool,
        read_committed: bool,
        current_leader_epoch: int = -1,
    ) -> tuple[ErrorCode, int, int, int]:
        """ListOffsets as leader (Kafka's ``Partition.fetchOffsetForTimestamp``): (error,
        timestamp, offset, leader epoch). -2/-4 the log start; -3 the record with the largest
        timestamp; -1 the last fetchable offset (a follower's: the log end; a consumer's: the
        high watermark, or the last stable offset with ``read_committed``); t ≥ 0 the first
        offset whose timestamp is ≥ t below the last fetchable offset. A leader whose high
        watermark is still below the start offset of its epoch (just elected) answers a
        consumer OFFSET_NOT_AVAILABLE for the latest offset, and for a timestamp not found
        below it: its high watermark may be below what the previous leader gave out."""
        code = self.check_leader_epoch(current_leader_epoch)
        if code is not _NONE:
            return code, -1, -1, -1
        plog = self.log
        epoch = self.state.leader_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return _NONE, -1, plog.log_start_offset, epoch
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp()
            if found is None:
                return _NONE, -1, -1, epoch
            return _NONE, found[1], found[0], epoch
        if timestamp < LATEST_TIMESTAMP:
            return ErrorCode.invalid_request, -1, -1, -1
        if follower:
            last_fetchable, lagging = plog.log_end_offset, False
        else:
            hw = plog.high_watermark
            last_fetchable = self.producer_state().last_stable_offset(hw) if read_committed else hw
            lagging = hw < self.leader_epoch_start_offset
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                return _OFFSET_NOT_AVAILABLE, -1, -1, epoch
            return _NONE, -1, last_fetchable, epoch
        found = plog.offset_for_timestamp(timestamp)
        if found is not None and found[0] < last_fetchable:
            return _NONE, found[1], found[0], epoch
        if lagging:
            return _OFFSET_NOT_AVAILABLE, -1, -1, epoch
        return _NONE, -1, -1, epoch

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """OffsetsForLeaderEpoch as leader (Kafka's ``Partition.lastOffsetForLeaderEpoch``):
        (error, the largest epoch ≤ ``leader_epoch`` this log knows, where it ends); (-1, -1)
        when it knows none."""
        code = self.check_leader_epoch(current_leader_epoch)
        if code is not _NONE:
            return code, -1, -1
        epoch, end_offset = self.log.end_offset_for_epoch(leader_epoch)
        return _NONE, epoch, end_offset

    # -- the leader append ---------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview | None,
        origin: AppendOrigin,
        required_acks: int,
        min_insync_replicas: int,
        now_ms: int,
        verify_txn: TxnVerifier | None = None,
    ) -> LeaderAppendResult:
        """The one leader append (Kafka's ``Partition.appendRecordsToLeader``), in this order;
        nothing is written when one step refuses:

        1. leadership: NOT_LEADER_OR_FOLLOWER; acks=-1 with an ISR smaller than
           ``min_insync_replicas``: NOT_ENOUGH_REPLICAS;
        2. ``CLIENT``: every batch whole (else CORRUPT_MESSAGE), magic 2 (else INVALID_RECORD),
           at most the topic's max.message.bytes (else MESSAGE_TOO_LARGE); a transactional
           batch opening its producer's transaction here verified (``verify_txn``, else
           INVALID_TXN_STATE); idempotence (a duplicate answers the original's base offset
           and is not appended; INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER).
           ``COORDINATOR``: a marker (control batch) checked against the producer state
           (TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH);
        3. the log append, stamped with this leader's epoch (storage checks CRCs and records:
           CORRUPT_MESSAGE, INVALID_RECORD with the records' errors, MESSAGE_TOO_LARGE,
           RECORD_LIST_TOO_LARGE; KAFKA_STORAGE_ERROR on I/O errors), LogAppendTime when the
           topic says so;
        4. the producer state (sequences, the transaction opened or ended by a marker);
        5. the high watermark: replicated, it may move (an ISR of this leader alone); alone it
           followed the log end; when it moved the high-watermark listeners are called;
        6. the partition's waiters in the purgatory are woken (Fetch, acks=all).
        """
        if self.state.leader != self.node_id:
            return LeaderAppendResult(_NOT_LEADER)
        if required_acks == -1 and len(self.state.isr) < min_insync_replicas:
            return LeaderAppendResult(_NOT_ENOUGH)
        if not records:
            return LeaderAppendResult(_INVALID_RECORD, message="no record batches")
        plog = self.log
        config = self.config
        if origin is AppendOrigin.CLIENT:
            # step 2, inline (it runs for every partition of every Produce request): each
            # batch's header; the producer's checks only for an idempotent or transactional one
            n = len(records)
            pos = 0
            unpack = BATCH_HEADER.unpack_from
            max_size = config.max_message_bytes
            batches: list[tuple[int, int, int, int, int]] = []
            transactional = False
            while pos < n:
                if n - pos < BATCH_HEADER_SIZE:
                    return LeaderAppendResult(_CORRUPT, message="truncated record batch header")
                (
                    _bo,
                    length,
                    _ple,
                    magic,
                    _crc,
                    attrs,
                    last_delta,
                    _bts,
                    _mts,
                    pid,
                    epoch,
                    base_seq,
                    _count,
                ) = unpack(records, pos)
                size = length + 12
                if magic != 2:
                    return LeaderAppendResult(
                        _INVALID_RECORD,
                        message=f"record batch magic {magic}; only v2 (magic 2) is accepted",
                    )
                if length < 49 or pos + size > n:
                    return LeaderAppendResult(_CORRUPT, message="record batch length out of bounds")
                if size > max_size:
                    return LeaderAppendResult(
                        _TOO_LARGE,
                        message=f"record batch of {size} bytes exceeds max.message.bytes"
                        f" {max_size}",
                    )
                batches.append((pid, epoch, base_seq, last_delta, attrs))
                if attrs & _TRANSACTIONAL:
                    transactional = True
                pos += size
            head = batches[0]
            idempotent = head[0] >= 0 and head[2] >= 0
            if idempotent or transactional:
                refused = self._check_producer_batches(
                    batches, idempotent, transactional, verify_txn
                )
                if refused is not None:
                    return refused
                idempotent = True  # (a transactional batch without a producer id was refused)
            marker = None
        else:
            batches, idempotent, transactional = _coordinator_batches(records), False, False
            marker = _marker_of(records, batches)
            if marker is not None:
                verdict = self.producer_state().check_marker(
                    batches[0][0], batches[0][1], marker[1]
                )
                if verdict is MarkerVerdict.COORDINATOR_FENCED:
                    return LeaderAppendResult(ErrorCode.transaction_coordinator_fenced)
                if verdict is MarkerVerdict.INVALID_PRODUCER_EPOCH:
                    return LeaderAppendResult(_BAD_EPOCH)
        log_append_time = config.message_timestamp_type == "LogAppendTime"
        hw_before = plog.high_watermark
        try:
            result = plog.append(
                records, self.state.leader_epoch, now_ms=now_ms, log_append_time=log_append_time
            )
        except CorruptRecordError as exc:
            return LeaderAppendResult(_CORRUPT, message=str(exc) or "corrupt record batch")
        except InvalidRecordError as exc:
            # KIP-467: storage lists the offending records (e.g. keyless on a compacted topic)
            record_errors = (
                tuple(exc.record_errors) if isinstance(exc, RecordValidationError) else ()
            )
            return LeaderAppendResult(
                _INVALID_RECORD,
                record_errors=record_errors,
                message=str(exc) or "invalid record batch",
            )
        except RecordTooLargeError as exc:
            return LeaderAppendResult(_TOO_LARGE, message=str(exc))
        except RecordBatchTooLargeError as exc:
            return LeaderAppendResult(ErrorCode.record_list_too_large, message=str(exc))
        except OSError as exc:  # storage's KafkaStorageError and plain I/O errors
            log.error("append to %s-%d failed: %s", self.topic, self.partition, exc)
            return LeaderAppendResult(_STORAGE, message=str(exc))
        base_offset = result.base_offset
        if idempotent:
            state = self.producer_state()
            off = base_offset
            for b_pid, b_epoch, b_seq, b_delta, _attrs in batches:
                state.update(
                    b_pid, b_epoch, b_seq, (b_seq + b_delta) % _SEQ_MOD, off, off + b_delta
                )
                off += b_delta + 1
            if transactional:
                state.append_txn_data(batches[0][0], base_offset)
        elif marker is not None:
            self.producer_state().apply_marker(
                batches[0][0],
                batches[0][1],
                base_offset,
                marker[0] == ControlRecordType.ABORT,
                marker[1],
                plog.segment_base_offsets(),
            )
        elif origin is AppendOrigin.COORDINATOR:
            first = batches[0] if batches else None
            if first is not None and first[4] & (_TRANSACTIONAL | _CONTROL) == _TRANSACTIONAL:
                # a transactional data batch (a coordinator's offsets in a transaction)
                self.producer_state().append_txn_data(first[0], base_offset)
        if self.controller_managed:
            self.maybe_increment_high_watermark()
        if self._hw_listeners and plog.high_watermark > hw_before:
            self._call_high_watermark_listeners()
        if self._purgatory is not None:
            self._purgatory.notify(self.topic, self.partition)
        lat = result.log_append_time_ms if log_append_time else -1
        # tuple.__new__ directly: a NamedTuple's own __new__ is a Python function, and this
        # runs once per partition of every Produce request
        return _tuple_new(
            LeaderAppendResult,
            (
                _NONE,
                base_offset,
                result.last_offset,
                -1 if lat is None else lat,
                result.log_start_offset,
                (),
                None,
            ),
        )

    def _check_producer_batches(
        self,
        batches: list[tuple[int, int, int, int, int]],
        idempotent: bool,
        transactional: bool,
        verify_txn: TxnVerifier | None,
    ) -> LeaderAppendResult | None:
        """Step 2 of ``append_as_leader`` for an idempotent or transactional producer's
        ``batches`` ((producer id, producer epoch, base sequence, last offset delta,
        attributes) each): the refusal (a duplicate answers NONE with the original's base
        offset), or None."""
        pid, epoch, base_seq, last_delta, _attrs = batches[0]
        log_start = self.log.log_start_offset
        if transactional and not idempotent:
            return LeaderAppendResult(
                _INVALID_RECORD, message="a transactional batch needs a producer id"
            )
        state = self.producer_state()
        if transactional and not state.in_transaction(pid):
            code = (
                _TXN_STATE
                if verify_txn is None
                else verify_txn(pid, epoch, self.topic, self.partition)
            )
            if code is not _NONE:
                return LeaderAppendResult(code, log_start_offset=log_start)
        if len(batches) == 1:
            verdict, dup_offset = state.check(
                pid, epoch, base_seq, (base_seq + last_delta) % _SEQ_MOD
            )
            if verdict is not Verdict.OK:
                if verdict is Verdict.DUPLICATE:
                    return LeaderAppendResult(_NONE, dup_offset, log_start_offset=log_start)
                code = _BAD_EPOCH if verdict is Verdict.INVALID_PRODUCER_EPOCH else _OUT_OF_ORDER
                return LeaderAppendResult(code, log_start_offset=log_start)
        else:
            for b_pid, b_epoch, b_seq, b_delta, _a in batches:
                verdict, _ = state.check(b_pid, b_epoch, b_seq, (b_seq + b_delta) % _SEQ_MOD)
                if verdict is not Verdict.OK:
                    code = (
                        _BAD_EPOCH if verdict is Verdict.INVALID_PRODUCER_EPOCH else _OUT_OF_ORDER
                    )
                    return LeaderAppendResult(code, log_start_offset=log_start)
        return None

    def needs_transaction_verification(
        self, records: bytes | bytearray | memoryview | None
    ) -> tuple[int, int] | None:
        """(producer id, producer epoch) when ``records`` open their producer's transaction
        on this partition led here (the first batch is transactional, and the producer has no
        ongoing transaction here): the transaction coordinator must verify it first (KIP-890
        part 1, Kafka's ``Partition.maybeStartTransactionVerification``); else None."""
        if records is None or len(records) < BATCH_HEADER_SIZE:
            return None
        header = BatchHeader._make(BATCH_HEADER.unpack_from(records))
        if not header.attributes & _TRANSACTIONAL or self.state.leader != self.node_id:
            return None
        if self.producer_state().in_transaction(header.producer_id):
            return None
        return header.producer_id, header.producer_epoch

    def follower_high_watermark_moved(self) -> None:
        """As a follower, the high watermark moved (the leader's fetch answer): wake the
        consumers' Fetches waiting here (KIP-392; Kafka's fetcher completes its delayed
        fetches). The high-watermark listeners are the leader's only."""
        if self._purgatory is not None:
            self._purgatory.notify(self.topic, self.partition)

    def high_watermark_moved(self) -> None:
        """The high watermark moved (a follower's fetch, an ISR change): wake the partition's
        waiters and call the high-watermark listeners."""
        if self._purgatory is not None:
            self._purgatory.notify(self.topic, self.partition)
        self._call_high_watermark_listeners()

    def _call_high_watermark_listeners(self) -> None:
        listeners = self._hw_listeners
        if not listeners:
            return
        hw = self.log.high_watermark
        for listener in list(listeners):
            try:
                listener(self.topic, self.partition, hw)
            except Exception:
                log.exception("high watermark listener failed")

    # -- idempotent producers -----------------------------------------------------------------

    def producer_state(self) -> ProducerStateManager:
        """Loaded lazily: last snapshot, then the batch headers from its offset to the log end."""
        ps = self._producer_state
        if ps is None:
            ps = self._producer_state = ProducerStateManager.load(self.log, self.snapshot_path)
        return ps

    async def load_producer_state(self, yield_every_s: float = 0.01) -> ProducerStateManager:
        """``producer_state()`` without stalling the event loop on a long replay: the log is
        replayed in chunks, yielding to the loop every ``yield_every_s`` or so. If the state was loaded or
        dropped meanwhile (a produce loaded it, a truncation), or the scan failed (retention
        moved the log start), the synchronous path decides."""
        ps = self._producer_state
        if ps is not None:
            return ps
        generation = self._producer_state_generation

        def is_current() -> bool:
            return self._producer_state is None and self._producer_state_generation == generation

        try:
            loaded = await ProducerStateManager.load_async(
                self.log, self.snapshot_path, is_current, yield_every_s=yield_every_s
            )
        except (OffsetOutOfRangeError, OSError):  # retention moved the log start meanwhile
            loaded = None
        if loaded is not None and is_current():
            self._producer_state = loaded
        return self.producer_state()

    def loaded_producer_state(self) -> ProducerStateManager | None:
        return self._producer_state

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append the leader's batches as they are (``PartitionLog.append_as_follower``) and
        apply them to the producer state, which a follower keeps current as Kafka's
        ``appendAsFollower`` does, so that it is ready (no replay of the log) when this replica
        becomes the leader. The state is loaded before the first append (a new replica: an
        empty log; after a restart: the last snapshot and the log past it)."""
        state = self.producer_state()
        result = self.log.append_as_follower(records)
        state.apply_appended(records, self.log.segment_base_offsets())
        return result

    def truncate_to(self, offset: int) -> None:
        """A follower's truncation to ``offset`` (KIP-101/279). When records go, the producer
        state is rebuilt at once from the snapshot, if it covers no more than ``offset``, else
        from the log start (a snapshot past ``offset`` is deleted: it describes records that
        are gone). Truncation is rare (a diverged log), so this replay is bounded by it."""
        plog = self.log
        if offset >= plog.log_end_offset:
            plog.truncate_to(offset)  # only leader-epoch entries starting at the log end go
            return
        plog.truncate_to(offset)
        self._producer_state = None
        self._producer_state_generation += 1
        path = self.snapshot_path
        if path is not None and path.exists():
            covered = snapshot_offset(path)
            if covered is None or covered > offset:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self._producer_state = ProducerStateManager.load(plog, path)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower behind the leader's log start restarts its log at ``offset``: the
        producer state starts empty there (and its snapshot goes)."""
        self.log.truncate_fully_and_start_at(offset)
        self.reset_producer_state(drop_snapshot=True)
        self._producer_state = ProducerStateManager.load(self.log, None)

    def reset_producer_state(self, *, drop_snapshot: bool = False) -> None:
        """Forget the loaded producer state (a follower's log changed under it); with
        ``drop_snapshot`` also its snapshot (the log was truncated below it). It is rebuilt
        from the log on next use."""
        self._producer_state = None
        self._producer_state_generation += 1
        if drop_snapshot and self.snapshot_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.snapshot_path.unlink()


def _coordinator_batches(
    data: bytes | bytearray | memoryview,
) -> list[tuple[int, int, int, int, int]]:
    """(producer id, producer epoch, base sequence, last offset delta, attributes) of each
    whole batch of a coordinator's buffer (headers only; storage validates the rest)."""
    out = []
    n = len(data)
    pos = 0
    unpack = BATCH_HEADER.unpack_from
    while n - pos >= BATCH_HEADER_SIZE:
        header = unpack(data, pos)
        out.append((header[9], header[10], header[11], header[6], header[5]))
        pos += header[1] + 12
    return out


def _marker_of(
    data: bytes | bytearray | memoryview, batches: list[tuple[int, int, int, int, int]]
) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of a transaction marker: a single transactional
    control batch holding one COMMIT/ABORT record; None for anything else."""
    if len(batches) != 1 or batches[0][4] & (_CONTROL | _TRANSACTIONAL) != (
        _CONTROL | _TRANSACTIONAL
    ):
        return None
    for record in RecordBatch(data, 0).records():
        try:
            kind, coordinator_epoch = parse_control_record(record.key, record.value)
        except ValueError:
            return None
        if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return kind, coordinator_epoch
    return None


def _copy(state: PartitionState) -> PartitionState:
    return replace(state, replicas=list(state.replicas), isr=list(state.isr))
