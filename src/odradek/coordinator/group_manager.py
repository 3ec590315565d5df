"""The group coordinator's handlers: (groups, request, now) -> (records to persist, response).

``GroupMetadataManager`` holds every group of this coordinator and has one method per
request. A method returns an ``Outcome``: the records to append to ``__consumer_offsets``
and either a response or a ``Waiter`` that completes later (a parked JoinGroup/SyncGroup).
Whoever calls a method (``GroupCoordinator``, or a unit test) must append the records, then
pass each to ``replay`` — only then send the response. Persisted state (offsets, generation,
protocol, leader, assignments) changes only in ``replay``; loading at start-up is
``replay(record, loading=True)`` for every record of the log followed by ``finish_loading``.
Liveness (parked requests, heartbeat deadlines, rebalance timers) is changed by the join /
sync / heartbeat / leave handlers and by ``tick(now)`` directly, as in Kafka.

No I/O and no clock here: ``now_ms`` is an argument everywhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from odradek.coordinator.records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetAndMetadata,
    OffsetCommitRecord,
    Record,
)
from odradek.coordinator.state import (
    ClassicGroup,
    Errors,
    GroupConfig,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
    Waiter,
)
from odradek.coordinator.transaction.offsets import PendingOffset, PendingTransactionalOffsets

__all__ = [
    "GroupMetadataManager",
    "GroupSummary",
    "JoinParams",
    "MemberSummary",
    "OffsetCommitEntry",
    "Outcome",
]

T = TypeVar("T")
S = GroupState


@dataclass(slots=True)
class Outcome(Generic[T]):
    records: list[Record] = field(default_factory=list)
    response: T | None = None
    waiter: Waiter[T] | None = None


@dataclass(frozen=True, slots=True)
class JoinParams:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = False  # JoinGroup v9+


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[MemberSummary, ...]


def _default_member_id(client_id: str) -> str:
    return f"{client_id}-{uuid.uuid4()}"


class GroupMetadataManager:
    """Every classic group of one coordinator, and the handlers that act on them."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        new_member_id: Callable[[str], str] = _default_member_id,
    ) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self._new_member_id = new_member_id
        self._records: list[Record] = []
        # __consumer_offsets partition -> offsets committed in transactions not yet ended
        self.pending_txn_offsets: dict[int, PendingTransactionalOffsets] = {}

    # -- helpers ---------------------------------------------------------------------------

    def _emit(self, record: Record) -> None:
        self._records.append(record)

    def _take(self) -> list[Record]:
        records, self._records = self._records, []
        return records

    def _out(self, response: T | None = None, waiter: Waiter[T] | None = None) -> Outcome[T]:
        return Outcome(self._take(), response, waiter)

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def _group_metadata_value(
        self, group: ClassicGroup, assignments: dict[str, bytes] | None = None
    ) -> GroupMetadataValue:
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                assignments.get(m.member_id, b"") if assignments is not None else m.assignment,
            )
            for m in group.members.values()
        )
        return GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp_ms,
            members,
        )

    # -- JoinGroup -------------------------------------------------------------------------

    def join_group(self, p: JoinParams, now_ms: int) -> Outcome[JoinResult]:
        if not p.group_id:
            return self._out(JoinResult(Errors.INVALID_GROUP_ID, member_id=p.member_id))
        if not (
            self.config.min_session_timeout_ms
            <= p.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return self._out(JoinResult(Errors.INVALID_SESSION_TIMEOUT, member_id=p.member_id))
        group = self.groups.get(p.group_id)
        if group is None:
            if p.member_id:
                return self._out(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=p.member_id))
            if not p.protocol_type or not p.protocols:
                return self._out(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL))
            group = ClassicGroup(p.group_id, state_timestamp_ms=now_ms)
            self.groups[p.group_id] = group
        if group.state is S.DEAD:
            return self._out(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, member_id=p.member_id))
        if not group.supports_protocols(p.protocol_type, p.protocols):
            return self._out(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=p.member_id))
        if not p.member_id:
            return self._new_member_join(group, p, now_ms)
        return self._current_member_join(group, p, now_ms)

    def _new_member_join(self, group: ClassicGroup, p: JoinParams, now: int) -> Outcome[JoinResult]:
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return self._out(JoinResult(Errors.GROUP_MAX_SIZE_REACHED))
        new_id = self._new_member_id(p.client_id)
        if p.group_instance_id is not None:
            old_id = group.static_members.get(p.group_instance_id)
            if old_id is None:
                return self._add_member_and_rebalance(group, new_id, p, now)
            return self._update_static_member_and_rebalance(group, old_id, new_id, p, now)
        if p.require_known_member_id:
            # two-step join: hand out a member id the client must come back with
            group.pending_members[new_id] = now + p.session_timeout_ms
            return self._out(JoinResult(Errors.MEMBER_ID_REQUIRED, member_id=new_id))
        return self._add_member_and_rebalance(group, new_id, p, now)

    def _current_member_join(
        self, group: ClassicGroup, p: JoinParams, now: int
    ) -> Outcome[JoinResult]:
        mid = p.member_id
        if mid in group.pending_members and p.group_instance_id is None:
            return self._add_member_and_rebalance(group, mid, p, now)
        error = group.validate_member(mid, p.group_instance_id)
        if error is not Errors.NONE:
            return self._out(JoinResult(error, member_id=mid))
        member = group.members[mid]
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, p, now)
        if group.state is S.COMPLETING_REBALANCE:
            if member.matches(p.protocols):
                # a retransmission of the join of this generation: answer it again
                return self._out(self._join_result(group, member))
            return self._update_member_and_rebalance(group, member, p, now)
        if group.state is S.STABLE:
            if group.is_leader(mid) or not member.matches(p.protocols):
                return self._update_member_and_rebalance(group, member, p, now)
            return self._out(self._join_result(group, member, with_members=False))
        return self._out(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=mid))

    def _join_result(
        self, group: ClassicGroup, member: Member, *, with_members: bool = True
    ) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if with_members and group.is_leader(member.member_id):
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            Errors.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, p: JoinParams, now: int
    ) -> Outcome[JoinResult]:
        group.pending_members.pop(member_id, None)
        member = Member(
            member_id=member_id,
            group_instance_id=p.group_instance_id,
            client_id=p.client_id,
            client_host=p.client_host,
            rebalance_timeout_ms=p.rebalance_timeout_ms,
            session_timeout_ms=p.session_timeout_ms,
            protocol_type=p.protocol_type,
            protocols=list(p.protocols),
            # a new member cannot heartbeat while its first join is parked (Kafka's new member
            # join timeout, not the session timeout, bounds it)
            heartbeat_deadline_ms=now + self.config.new_member_join_timeout_ms,
            is_new=True,
        )
        waiter: Waiter[JoinResult] = Waiter()
        member.join_waiter = waiter
        if group.state is S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now)
        self._try_complete_join(group, now)
        return self._out(waiter=waiter)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, p: JoinParams, now: int
    ) -> Outcome[JoinResult]:
        member.protocols = list(p.protocols)
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.heartbeat_deadline_ms = now + p.session_timeout_ms
        if member.join_waiter is not None:
            member.complete_join(
                JoinResult(Errors.REBALANCE_IN_PROGRESS, member_id=member.member_id)
            )
        waiter: Waiter[JoinResult] = Waiter()
        member.join_waiter = waiter
        self._maybe_prepare_rebalance(group, now)
        self._try_complete_join(group, now)
        return self._out(waiter=waiter)

    def _update_static_member_and_rebalance(
        self, group: ClassicGroup, old_id: str, new_id: str, p: JoinParams, now: int
    ) -> Outcome[JoinResult]:
        assert p.group_instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(p.group_instance_id, old_id, new_id)
        member.protocols = list(p.protocols)
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.client_id = p.client_id
        member.client_host = p.client_host
        member.heartbeat_deadline_ms = now + p.session_timeout_ms
        waiter: Waiter[JoinResult] = Waiter()
        member.join_waiter = waiter
        if group.state is S.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol next generation: persist the new member id, no rebalance; the
                # member gets the current generation and then its assignment from SyncGroup.
                # JoinGroup v9+ tells a rejoining leader to skip the assignment (it gets the
                # member list, KIP-814); older versions name the old member id as leader, so
                # a rejoining leader syncs as a follower and nothing is reassigned.
                self._emit(GroupMetadataRecord(group.group_id, self._group_metadata_value(group)))
                if p.supports_skip_assignment:
                    leader = group.is_leader(new_id)
                    result = JoinResult(
                        Errors.NONE,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=group.leader_id or "",
                        member_id=new_id,
                        members=self._join_result(group, member).members if leader else (),
                        skip_assignment=leader,
                    )
                else:
                    result = JoinResult(
                        Errors.NONE,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader_id=current_leader or "",
                        member_id=new_id,
                    )
                member.complete_join(result)
            else:
                self._maybe_prepare_rebalance(group, now)
        elif group.state is S.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, now)
        self._try_complete_join(group, now)
        return self._out(waiter=waiter)

    # -- rebalance -------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.can_transition_to(S.PREPARING_REBALANCE):
            self._prepare_rebalance(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                m.complete_sync(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        delay = self.config.initial_rebalance_delay_ms
        if group.state is S.EMPTY and delay > 0:
            group.initial_delay_ms = delay
            group.initial_delay_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.rebalance_deadline_ms = now + delay
            group.new_member_added = False
        else:
            group.initial_delay_remaining_ms = None
            group.rebalance_deadline_ms = now + group.max_rebalance_timeout_ms()
        group.transition_to(S.PREPARING_REBALANCE, now)

    def _try_complete_join(self, group: ClassicGroup, now: int) -> None:
        if (
            group.state is S.PREPARING_REBALANCE
            and group.initial_delay_remaining_ms is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: int) -> None:
        """Kafka's onCompleteJoin: drop the dynamic members that did not rejoin (static members
        stay until their session times out, KIP-345), start the next generation. If no member
        has rejoined, only static members that did not, wait another rebalance timeout."""
        group.rebalance_deadline_ms = None
        group.initial_delay_remaining_ms = None
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._remove(group, m)
        if group.state is not S.PREPARING_REBALANCE:
            return
        if group.members and not group.maybe_elect_new_joined_leader():
            group.rebalance_deadline_ms = now + group.max_rebalance_timeout_ms()
            return
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(S.EMPTY, now)
            self._emit(GroupMetadataRecord(group.group_id, self._group_metadata_value(group)))
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(S.COMPLETING_REBALANCE, now)
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now + group.max_rebalance_timeout_ms()
        for m in list(group.members.values()):
            m.is_new = False
            m.heartbeat_deadline_ms = now + m.session_timeout_ms
            m.complete_join(self._join_result(group, m))

    def _remove(self, group: ClassicGroup, member: Member) -> None:
        group.remove(member.member_id)
        member.complete_join(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        member.complete_sync(SyncResult(Errors.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now: int
    ) -> None:
        self._remove(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now)
        self._try_complete_join(group, now)

    # -- SyncGroup -------------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Sequence[tuple[str, bytes]],
        now_ms: int,
    ) -> Outcome[SyncResult]:
        group = self.groups.get(group_id)
        if group is None:
            return self._out(SyncResult(Errors.UNKNOWN_MEMBER_ID))
        if group.state is S.DEAD:
            return self._out(SyncResult(Errors.COORDINATOR_NOT_AVAILABLE))
        error = group.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return self._out(SyncResult(error))
        member = group.members[member_id]
        if generation_id != group.generation_id:
            return self._out(SyncResult(Errors.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return self._out(SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL))
        if group.state is S.PREPARING_REBALANCE:
            return self._out(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline_ms = None
        if group.state is S.STABLE:
            return self._out(
                SyncResult(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
        if group.state is not S.COMPLETING_REBALANCE:
            return self._out(SyncResult(Errors.UNKNOWN_MEMBER_ID))
        if member.sync_waiter is not None:
            member.complete_sync(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        waiter: Waiter[SyncResult] = Waiter()
        member.sync_waiter = waiter
        if group.is_leader(member_id):
            given = dict(assignments)
            value = self._group_metadata_value(
                group, {mid: given.get(mid, b"") for mid in group.members}
            )
            self._emit(GroupMetadataRecord(group_id, value))
        return self._out(waiter=waiter)

    # -- Heartbeat / LeaveGroup --------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> Errors:
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.state is S.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return error
        member = group.members[member_id]
        if group.state is S.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is S.PREPARING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]], now_ms: int
    ) -> Outcome[list[Errors]]:
        """Remove members (member_id, group_instance_id); one error per member, in order."""
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return self._out([Errors.UNKNOWN_MEMBER_ID] * len(members))
        errors: list[Errors] = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    errors.append(Errors.UNKNOWN_MEMBER_ID)
                elif member_id and member_id != known:
                    errors.append(Errors.FENCED_INSTANCE_ID)
                else:
                    self._remove_member_and_update_group(group, group.members[known], now_ms)
                    errors.append(Errors.NONE)
            elif member_id in group.pending_members:
                del group.pending_members[member_id]
                self._try_complete_join(group, now_ms)
                errors.append(Errors.NONE)
            elif member_id in group.members:
                self._remove_member_and_update_group(group, group.members[member_id], now_ms)
                errors.append(Errors.NONE)
            else:
                errors.append(Errors.UNKNOWN_MEMBER_ID)
        return self._out(errors)

    # -- offsets -----------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
        now_ms: int,
    ) -> Outcome[list[Errors]]:
        """One error per entry, in order. Pure: the offsets change when the records replay."""
        error = self._validate_commit(group_id, generation_id, member_id, group_instance_id, now_ms)
        return self._offset_records(group_id, error, entries, now_ms)

    def _offset_records(
        self,
        group_id: str,
        error: Errors,
        entries: Sequence[OffsetCommitEntry],
        now_ms: int,
    ) -> Outcome[list[Errors]]:
        """Every entry fails with ``error`` unless it is NONE; else one OffsetCommitRecord per
        entry whose metadata fits offset.metadata.max.bytes (OFFSET_METADATA_TOO_LARGE)."""
        if error is not Errors.NONE:
            return Outcome([], [error] * len(entries))
        records: list[Record] = []
        errors: list[Errors] = []
        limit = self.config.offset_metadata_max_bytes
        for e in entries:
            metadata = e.metadata or ""
            if len(metadata) > limit:
                errors.append(Errors.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetAndMetadata(e.offset, e.leader_epoch, metadata, now_ms)
            records.append(OffsetCommitRecord(group_id, e.topic, e.partition, value))
            errors.append(Errors.NONE)
        return Outcome(records, errors)

    def _validate_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> Errors:
        if not group_id:
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            # a group that only stores offsets (generation -1) is created by the replay
            return Errors.NONE if generation_id < 0 else Errors.ILLEGAL_GENERATION
        if group.state is S.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is S.EMPTY:
            return Errors.NONE
        if generation_id < 0 and not member_id and group_instance_id is None:
            # no member, no generation (OffsetCommit v0 style): only an Empty group's offsets
            return Errors.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return error
        member = group.members[member_id]
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.state is S.COMPLETING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return Errors.NONE

    def txn_commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
        now_ms: int,
    ) -> Outcome[list[Errors]]:
        """TxnOffsetCommit (KIP-98, KIP-447): the records to append as a transactional batch
        of the producer (``replay_txn_offset``); Kafka's checks: a member id other than ""
        must be in the group, a generation >= 0 must be the group's."""
        error = Errors.NONE
        group = self.groups.get(group_id)
        if not group_id:
            error = Errors.INVALID_GROUP_ID
        elif group is not None:
            if group.state is S.DEAD:
                error = Errors.COORDINATOR_NOT_AVAILABLE
            elif (
                group_instance_id is not None
                and group.static_members.get(group_instance_id, member_id) != member_id
            ):  # a static member replaced by a newer instance (KIP-345)
                error = Errors.FENCED_INSTANCE_ID
            elif member_id and member_id not in group.members:
                error = Errors.UNKNOWN_MEMBER_ID
            elif generation_id >= 0 and generation_id != group.generation_id:
                error = Errors.ILLEGAL_GENERATION
        elif member_id:
            error = Errors.UNKNOWN_MEMBER_ID
        elif generation_id >= 0:
            error = Errors.ILLEGAL_GENERATION
        return self._offset_records(group_id, error, entries, now_ms)

    def replay_txn_offset(
        self, partition: int, producer_id: int, record: OffsetCommitRecord, record_offset: int
    ) -> None:
        """A transactional OffsetCommitRecord of ``producer_id`` at ``record_offset`` of
        ``__consumer_offsets``-``partition``: pending until the producer's marker."""
        if record.value is None:
            return
        pending = self.pending_txn_offsets.setdefault(partition, PendingTransactionalOffsets())
        pending.add(
            producer_id,
            PendingOffset(
                record.group_id, record.topic, record.partition, record.value, record_offset
            ),
        )

    def complete_txn_offsets(self, partition: int, producer_id: int, committed: bool) -> int:
        """The producer's COMMIT/ABORT marker on ``__consumer_offsets``-``partition``: its
        pending offsets become committed offsets (COMMIT) or are dropped; how many."""
        pending = self.pending_txn_offsets.get(partition)
        if pending is None:
            return 0
        done = pending.complete(producer_id, committed)
        if not pending.pending:
            del self.pending_txn_offsets[partition]
        for o in done:
            self._replay_offset(OffsetCommitRecord(o.group_id, o.topic, o.partition, o.value))
        return len(done)

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """An offset of the group's partition is committed in an open transaction (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        return any(
            p.has_pending(group_id, topic, partition) for p in self.pending_txn_offsets.values()
        )

    def fetch_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Committed offsets; ``topics`` None = every partition the group has an offset for."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
            for (topic, partition), om in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, om))
            return list(by_topic.items())
        return [(topic, [(p, offsets.get((topic, p))) for p in parts]) for topic, parts in topics]

    def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> Outcome[tuple[Errors, list[Errors]]]:
        """OffsetDelete: (top-level error, one error per partition)."""
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return Outcome([], (Errors.GROUP_ID_NOT_FOUND, []))
        subscribed: set[str] = set()
        if group.state is not S.EMPTY:
            topics = group.subscribed_topics()
            if topics is None:
                return Outcome([], (Errors.NON_EMPTY_GROUP, []))
            subscribed = topics
        records: list[Record] = []
        errors: list[Errors] = []
        for topic, partition in partitions:
            if topic in subscribed:
                errors.append(Errors.GROUP_SUBSCRIBED_TO_TOPIC)
                continue
            if (topic, partition) in group.offsets:
                records.append(OffsetCommitRecord(group_id, topic, partition, None))
            errors.append(Errors.NONE)
        return Outcome(records, (Errors.NONE, errors))

    def delete_groups(self, group_ids: Sequence[str], now_ms: int) -> Outcome[list[Errors]]:
        """One error per group id, in order: NONE (the group's offsets and metadata tombstoned),
        NON_EMPTY_GROUP, or GROUP_ID_NOT_FOUND (unknown, dead, or named twice).

        Each named group's timers due at ``now_ms`` fire first, as ``tick`` would: a member
        whose session ran out is gone even if the timer task has not woken yet (Kafka expires
        heartbeats on the timer wheel's own thread, within a tick of the deadline). So a group
        whose last static member stopped heartbeating ``session.timeout.ms`` ago can be deleted
        (KIP-345 members send no LeaveGroup on close); the records of that expiry come first.
        """
        errors: list[Errors] = []
        seen: set[str] = set()
        for gid in dict.fromkeys(group_ids):
            group = self.groups.get(gid)
            if group is not None and group.state is not S.DEAD:
                self._tick_group(group, now_ms)
        records = self._take()
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None or group.state is S.DEAD or gid in seen:
                errors.append(Errors.GROUP_ID_NOT_FOUND)
            elif group.state is not S.EMPTY:
                errors.append(Errors.NON_EMPTY_GROUP)
            else:
                seen.add(gid)
                records.extend(self._delete_group_records(group))
                errors.append(Errors.NONE)
        return Outcome(records, errors)

    def _delete_group_records(self, group: ClassicGroup) -> list[Record]:
        out: list[Record] = [
            OffsetCommitRecord(group.group_id, t, p, None) for (t, p) in sorted(group.offsets)
        ]
        out.append(GroupMetadataRecord(group.group_id, None))
        return out

    def expire_offsets(self, now_ms: int) -> list[Record]:
        """offsets.retention.minutes: tombstones for expired offsets of groups without members
        (measured from when the group became Empty, or from the commit for offset-only groups);
        a group left Empty with no offsets is deleted."""
        retention = self.config.offsets_retention_ms
        records: list[Record] = []
        for group in list(self.groups.values()):
            if group.state is not S.EMPTY:
                continue
            expired = []
            for (topic, partition), om in group.offsets.items():
                base = om.commit_timestamp_ms
                if group.protocol_type and group.state_timestamp_ms >= 0:
                    base = max(group.state_timestamp_ms, om.commit_timestamp_ms)
                if base + retention <= now_ms:
                    expired.append((topic, partition))
            for topic, partition in sorted(expired):
                records.append(OffsetCommitRecord(group.group_id, topic, partition, None))
            if (
                len(expired) == len(group.offsets)
                and not group.pending_members
                and (expired or group.state_timestamp_ms + retention <= now_ms)
            ):
                records.append(GroupMetadataRecord(group.group_id, None))
        return records

    # -- ListGroups / DescribeGroups ---------------------------------------------------------

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> list[tuple[str, str, str, str]]:
        """(group_id, protocol_type, state, group type) of every live group."""
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        if types and "classic" not in types:
            return []
        out = []
        for g in self.groups.values():
            if g.state is S.DEAD:
                continue
            if states and g.state.value.lower() not in states:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value, "classic"))
        return out

    def describe_group(self, group_id: str) -> GroupSummary:
        group = self.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return GroupSummary(group_id, S.DEAD.value, "", "", ())
        stable = group.state is S.STABLE
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupSummary(
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    # -- timers ------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for g in self.groups.values() if (d := g.next_deadline_ms()) is not None]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> list[Record]:
        """Fire every timer due at ``now_ms``: pending member ids, session timeouts, rebalance
        (and initial delay) timeouts, SyncGroup timeouts. Returns records to persist."""
        for group in list(self.groups.values()):
            if group.state is S.DEAD:
                continue
            self._tick_group(group, now_ms)
        return self._take()

    def _tick_group(self, group: ClassicGroup, now: int) -> None:
        expired_pending = [mid for mid, dl in group.pending_members.items() if dl <= now]
        for mid in expired_pending:
            del group.pending_members[mid]
        if expired_pending:
            self._try_complete_join(group, now)
        for member in list(group.members.values()):
            if member.member_id in group.members and not member.is_alive(now):
                self._remove_member_and_update_group(group, member, now)
        if (
            group.state is S.PREPARING_REBALANCE
            and group.rebalance_deadline_ms is not None
            and now >= group.rebalance_deadline_ms
        ):
            remaining = group.initial_delay_remaining_ms
            if remaining is not None and group.new_member_added and remaining > 0:
                # initial delayed join: more members arrived, wait another delay (bounded)
                group.new_member_added = False
                delay = min(group.initial_delay_ms, remaining)
                group.initial_delay_remaining_ms = max(remaining - group.initial_delay_ms, 0)
                group.rebalance_deadline_ms = now + delay
            else:
                self._complete_join(group, now)
        if group.sync_deadline_ms is not None and now >= group.sync_deadline_ms:
            group.sync_deadline_ms = None
            laggards = [group.members[mid] for mid in group.pending_sync if mid in group.members]
            group.pending_sync.clear()
            if laggards and group.state in (S.COMPLETING_REBALANCE, S.STABLE):
                for m in laggards:
                    self._remove(group, m)
                self._maybe_prepare_rebalance(group, now)
                self._try_complete_join(group, now)

    # -- replay --------------------------------------------------------------------------------

    def replay(self, record: Record, *, loading: bool = False) -> None:
        """Apply a persisted record. The only way offsets and group metadata change."""
        if isinstance(record, OffsetCommitRecord):
            self._replay_offset(record)
        else:
            self._replay_group(record, loading)

    def _replay_offset(self, record: OffsetCommitRecord) -> None:
        group = self.groups.get(record.group_id)
        tp = (record.topic, record.partition)
        if record.value is None:
            if group is not None:
                group.offsets.pop(tp, None)
            return
        if group is None:
            group = ClassicGroup(
                record.group_id, state_timestamp_ms=record.value.commit_timestamp_ms
            )
            self.groups[record.group_id] = group
        group.offsets[tp] = record.value

    def _replay_group(self, record: GroupMetadataRecord, loading: bool) -> None:
        gid = record.group_id
        group = self.groups.get(gid)
        value = record.value
        if value is None:
            if group is None:
                return
            for m in list(group.members.values()):
                self._remove(group, m)
            group.pending_members.clear()
            if group.offsets and loading:
                # offsets written after the tombstone survive it (an offset-only group)
                self.groups[gid] = ClassicGroup(gid, offsets=group.offsets)
                return
            group.state = S.DEAD
            del self.groups[gid]
            return
        if group is not None:
            group.persisted = value
        if loading or group is None:
            if group is None:
                group = ClassicGroup(gid, persisted=value)
                self.groups[gid] = group
            group.generation_id = value.generation
            group.protocol_type = value.protocol_type or None
            group.protocol_name = value.protocol
            group.leader_id = value.leader
            group.state_timestamp_ms = value.current_state_timestamp_ms
            group.members = {}
            group.static_members = {}
            for mv in value.members:
                group.add(
                    Member(
                        member_id=mv.member_id,
                        group_instance_id=mv.group_instance_id,
                        client_id=mv.client_id,
                        client_host=mv.client_host,
                        rebalance_timeout_ms=mv.rebalance_timeout_ms,
                        session_timeout_ms=mv.session_timeout_ms,
                        protocol_type=value.protocol_type,
                        protocols=[(value.protocol, mv.subscription)] if value.protocol else [],
                        assignment=mv.assignment,
                    )
                )
            group.leader_id = value.leader
            group.state = S.STABLE if group.members else S.EMPTY
            return
        # live: the leader's assignment of the current generation -> Stable
        if (
            group.state is S.COMPLETING_REBALANCE
            and group.generation_id == value.generation
            and value.members
        ):
            assignments = {mv.member_id: mv.assignment for mv in value.members}
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition_to(S.STABLE, max(group.state_timestamp_ms, 0))
            for m in group.members.values():
                m.complete_sync(
                    SyncResult(Errors.NONE, group.protocol_type, group.protocol_name, m.assignment)
                )

    def snapshot(self, group_ids: Iterable[str]) -> list[Record]:
        """Records that rebuild the persisted state of these groups when replayed on their own:
        each group's last GroupMetadataValue and its committed offsets. Replaying the log from
        the first of them gives the same persisted state as replaying it from the start."""
        out: list[Record] = []
        for gid in sorted(group_ids):
            group = self.groups.get(gid)
            if group is None:
                continue
            if group.persisted is not None:
                out.append(GroupMetadataRecord(gid, group.persisted))
            for (topic, partition), om in sorted(group.offsets.items()):
                out.append(OffsetCommitRecord(gid, topic, partition, om))
        return out

    def finish_loading(self, group_ids: Iterable[str], now_ms: int) -> None:
        """After replaying a partition: loaded members must heartbeat within their session."""
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                continue
            for m in group.members.values():
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
