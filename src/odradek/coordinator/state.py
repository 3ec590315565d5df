"""Group states, members and the classic group (Kafka's ``ClassicGroup``), as data + a table.

Group states and what happens in each (Kafka's ``ClassicGroupState`` doc comment, restated)::

  Empty                the group has no members, but may have committed offsets. It is also
                       the state of a group that only stores offsets (simple consumers,
                       generation -1 commits).
      actions:  JoinGroup (new member)         -> PreparingRebalance (first rebalance of an empty
                                                  group waits group.initial.rebalance.delay.ms,
                                                  extended while new members keep arriving, up to
                                                  the rebalance timeout)
                SyncGroup / Heartbeat          -> UNKNOWN_MEMBER_ID
                OffsetCommit generation -1     -> accepted (offset storage only)
                OffsetCommit with a generation -> UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION
                offsets expire (offsets.retention.minutes after it became Empty); with no
                offsets left, or on DeleteGroups  -> Dead
  PreparingRebalance   a rebalance is under way; members must rejoin.
      actions:  JoinGroup                      -> park the request until every known member
                                                  has rejoined or the rebalance timeout fires
                Heartbeat                      -> REBALANCE_IN_PROGRESS (member is kept alive)
                SyncGroup                      -> REBALANCE_IN_PROGRESS
                OffsetCommit from a member     -> accepted (commit before revoking partitions)
                LeaveGroup / member expiry     -> remove member, maybe complete the join
      transitions: every member rejoined / rebalance timeout (dynamic members that did not
                rejoin are removed; static members that did not rejoin are kept, KIP-345,
                until their session times out): some members left -> CompletingRebalance
                (generation + 1, protocol chosen, leader kept or, if it did not rejoin, the
                first rejoined member; join responses sent; the leader's carries every member's
                metadata, static members' that did not rejoin included); no members left ->
                Empty (generation + 1, persisted); members left but none rejoined (only static
                members that did not rejoin) -> stay, wait another rebalance timeout
  CompletingRebalance  join responses sent; waiting for the leader's SyncGroup with assignments.
      actions:  SyncGroup from a follower      -> park until the leader's assignment is persisted
                SyncGroup from the leader      -> persist GroupMetadata (assignments); on replay
                                                  every parked SyncGroup is answered -> Stable
                Heartbeat                      -> OK
                OffsetCommit                   -> REBALANCE_IN_PROGRESS
                JoinGroup with new protocols, LeaveGroup, member expiry, a static member
                rejoining, or no SyncGroup within the rebalance timeout -> PreparingRebalance
                (parked SyncGroups answered REBALANCE_IN_PROGRESS)
  Stable               assignments delivered; members heartbeat and commit.
      actions:  Heartbeat / SyncGroup / OffsetCommit -> OK (SyncGroup returns the assignment)
                JoinGroup by the leader or with changed protocols, a new member, LeaveGroup,
                member expiry                  -> PreparingRebalance
                JoinGroup by a follower with unchanged protocols -> current generation, no
                rebalance
                JoinGroup of a known static member (group.instance.id) with a fresh member id
                and unchanged protocols -> the old member id is replaced (old one fenced:
                FENCED_INSTANCE_ID), the member keeps its assignment, no rebalance; a
                restarted leader is told the old member id leads (JoinGroup < v9), so it
                syncs as a follower, or to skip the assignment (v9+)
  Dead                 the group is gone (deleted, or all offsets expired while Empty).
      actions:  every request -> UNKNOWN_MEMBER_ID / GROUP_ID_NOT_FOUND / COORDINATOR_NOT_AVAILABLE;
                the group is removed from the coordinator's map.

``VALID_PREVIOUS_STATES`` is the same table the other way round: the states a group may move
*from* into each state. ``ClassicGroup.transition_to`` refuses anything else.

Persisted vs. live state: the generation, protocol, leader, members' static data and
assignments, and committed offsets change only by replaying records (``GroupMetadataRecord``,
``OffsetCommitRecord``), which is also how start-up loads them. Liveness — parked JoinGroup /
SyncGroup requests, heartbeat deadlines, members that have rejoined the current rebalance —
lives only in memory, as in Kafka.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from odradek.coordinator.records import GroupMetadataValue, OffsetAndMetadata

__all__ = [
    "VALID_PREVIOUS_STATES",
    "ClassicGroup",
    "Errors",
    "GroupConfig",
    "GroupState",
    "IllegalStateTransition",
    "JoinResult",
    "Member",
    "SyncResult",
    "Waiter",
]


class Errors(enum.IntEnum):
    """The Kafka error codes the coordinator answers with (Kafka's numbers)."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    UNSTABLE_OFFSET_COMMIT = 88


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_S = GroupState

VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.STABLE, _S.COMPLETING_REBALANCE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(
        {_S.EMPTY, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.STABLE, _S.DEAD}
    ),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Coordinator settings (broker config keys in parentheses)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    # How long a new member's first JoinGroup may stay parked (Kafka's internal
    # CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS): new members cannot heartbeat yet, so their
    # session timeout does not apply; a member that disconnected is dropped after this.
    new_member_join_timeout_ms: int = 5 * 60 * 1000


T = TypeVar("T")


class Waiter(Generic[T]):
    """A parked response: completed once, callbacks run at completion (or at once if done)."""

    __slots__ = ("_callbacks", "done", "result")

    def __init__(self) -> None:
        self.result: T | None = None
        self.done = False
        self._callbacks: list[Callable[[T], None]] = []

    def complete(self, result: T) -> bool:
        if self.done:
            return False
        self.result = result
        self.done = True
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(result)
        return True

    def add_done_callback(self, cb: Callable[[T], None]) -> None:
        if self.done:
            cb(self.result)  # type: ignore[arg-type]
        else:
            self._callbacks.append(cb)


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: Errors
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    # (member_id, group_instance_id, metadata) — only in the leader's response
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True, eq=False)
class Member:
    """A member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    # liveness (never persisted)
    join_waiter: Waiter[JoinResult] | None = None
    sync_waiter: Waiter[SyncResult] | None = None
    heartbeat_deadline_ms: int = 0
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member does not support any candidate protocol")

    def is_alive(self, now_ms: int) -> bool:
        """Kafka's shouldKeepAlive: a parked request keeps a member alive."""
        if self.join_waiter is not None:
            return not self.is_new or now_ms < self.heartbeat_deadline_ms
        if self.sync_waiter is not None:
            return True
        return now_ms < self.heartbeat_deadline_ms

    def complete_join(self, result: JoinResult) -> None:
        waiter, self.join_waiter = self.join_waiter, None
        if waiter is not None:
            waiter.complete(result)

    def complete_sync(self, result: SyncResult) -> None:
        waiter, self.sync_waiter = self.sync_waiter, None
        if waiter is not None:
            waiter.complete(result)


@dataclass(slots=True, eq=False)
class ClassicGroup:
    """A classic-protocol group: persisted metadata, offsets and live membership."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline ms
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    persisted: GroupMetadataValue | None = None  # the last GroupMetadataValue replayed
    # rebalance timers (live)
    rebalance_deadline_ms: int | None = None
    initial_delay_remaining_ms: int | None = None  # set while the initial delayed join runs
    initial_delay_ms: int = 0
    new_member_added: bool = False
    sync_deadline_ms: int | None = None
    pending_sync: set[str] = field(default_factory=set)

    # -- state machine ---------------------------------------------------------------------

    def can_transition_to(self, target: GroupState) -> bool:
        return self.state in VALID_PREVIOUS_STATES[target]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if not self.can_transition_to(target):
            raise IllegalStateTransition(
                f"group {self.group_id!r}: {self.state} -> {target} is not allowed"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- membership -----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def validate_member(self, member_id: str, instance_id: str | None) -> Errors:
        """Kafka's validateMember: a request naming a group.instance.id must carry the member
        id currently registered for it (an older one is FENCED_INSTANCE_ID, an instance id the
        group does not know is UNKNOWN_MEMBER_ID); without one the member id must be known."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return Errors.UNKNOWN_MEMBER_ID
            return Errors.NONE if known == member_id else Errors.FENCED_INSTANCE_ID
        return Errors.NONE if member_id in self.members else Errors.UNKNOWN_MEMBER_ID

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(
                (m.member_id for m in self.members.values() if m.is_awaiting_join),
                next(iter(self.members), None),
            )
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.complete_join(JoinResult(Errors.FENCED_INSTANCE_ID, member_id=old_id))
        member.complete_sync(SyncResult(Errors.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's maybeElectNewJoinedLeader, at join completion: keep the leader if it has
        rejoined, else make the first member that has rejoined the leader. False when no member
        has rejoined (a static leader that did not rejoin stays leader; the join is postponed)."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for m in members[1:]:
            common &= set(m.protocol_names)
        return common

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Every member votes for its first preference among the common protocols; most votes win
        (ties go to the protocol named first by the earliest member)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError("no protocol supported by every member")
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    # -- timers ----------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """The earliest timer that ``tick`` would act on (None: nothing to wait for).

        A member with a parked SyncGroup, or a parked JoinGroup once it has been a member, is
        kept alive whatever its heartbeat deadline (``Member.is_alive``), so that deadline is
        left out: the timer task would otherwise wake again and again for nothing.
        """
        deadlines = [
            m.heartbeat_deadline_ms
            for m in self.members.values()
            if m.sync_waiter is None and (m.join_waiter is None or m.is_new)
        ]
        deadlines.extend(self.pending_members.values())
        if self.rebalance_deadline_ms is not None and self.state is GroupState.PREPARING_REBALANCE:
            deadlines.append(self.rebalance_deadline_ms)
        if self.sync_deadline_ms is not None:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription (version int16, topics array of string)."""
    try:
        if len(metadata) < 6:
            return None
        pos = 2
        count = int.from_bytes(metadata[pos : pos + 4], "big", signed=True)
        pos += 4
        topics = []
        for _ in range(max(count, 0)):
            n = int.from_bytes(metadata[pos : pos + 2], "big", signed=True)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.append(metadata[pos : pos + n].decode())
            pos += n
        return topics
    except (ValueError, UnicodeDecodeError):
        return None


def parse_assignment(assignment: bytes) -> list[tuple[str, list[int]]] | None:
    """A ConsumerProtocolAssignment: version int16, [topic string, [partition int32]], user data."""
    try:
        pos = 2
        count = int.from_bytes(assignment[pos : pos + 4], "big", signed=True)
        pos += 4
        out = []
        for _ in range(max(count, 0)):
            n = int.from_bytes(assignment[pos : pos + 2], "big", signed=True)
            pos += 2
            topic = assignment[pos : pos + n].decode()
            pos += n
            pcount = int.from_bytes(assignment[pos : pos + 4], "big", signed=True)
            pos += 4
            parts = [
                int.from_bytes(assignment[pos + 4 * i : pos + 4 * i + 4], "big", signed=True)
                for i in range(max(pcount, 0))
            ]
            pos += 4 * max(pcount, 0)
            out.append((topic, parts))
        if pos > len(assignment):
            return None
        return out
    except (ValueError, UnicodeDecodeError):
        return None
