"""The controller's decisions: pure functions of (context, event) -> (next context, Decision).

A :class:`Decision` lists the ZooKeeper writes (each partition-state write conditional on the
version in the context; the event loop fences all of them with the controller epoch) and the
requests to brokers. The next context is what holds once the writes succeeded; if one fails
with BADVERSION the loop re-reads those partitions and decides the event again.

Rules (Kafka's ``PartitionStateMachine`` / ``ReplicaStateMachine`` / ``Election``):

* leader = the first replica in assignment order that is live and in the ISR;
* every leader or ISR change made by the controller bumps the leader epoch by one (an ISR
  change asked by the leader through AlterPartition keeps its epoch; only the znode version
  moves);
* the ISR is never written empty: when no ISR member is live, leader = -1 and the ISR keeps the
  last leader alone, and only ``unclean.leader.election.enable`` (broker default or topic
  config) lets a replica outside the ISR lead, with ISR = [it];
* LeaderAndIsr goes to the live replicas of a changed partition, UpdateMetadata with it to every
  live broker (every partition, typed FULL, to a broker that (re)started and on failover: it
  replaces the broker's image), StopReplica to a replica that stops (``delete_partition`` when
  it goes away); each carries the controller epoch, the receiving broker's epoch and the
  partition's znode version.

Events and their handlers (Kafka's names): :func:`on_controller_failover`,
:func:`on_broker_change` (joined, left, bounced = new czxid), :func:`on_topic_change` (new
topics and new partitions), :func:`on_topic_deletion`, :func:`on_alter_partition`,
:func:`on_isr_change_notification`, :func:`on_controlled_shutdown`, :func:`on_elect_leaders`
(preferred / unclean), :func:`on_broker_log_dir_failure` and :func:`on_replicas_offline` (a failed
log dir: its replicas leave the ISRs and lead no more), :func:`on_partition_reassignment` (RS = ORS+TRS, wait for TRS in ISR,
move the leader, StopReplica the removed ones, RS = TRS) and :func:`on_auto_leader_rebalance`.
"""

from __future__ import annotations

import uuid
from base64 import urlsafe_b64decode
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum

from odradek.cluster.znodes import (
    NO_LEADER,
    SECURITY_PROTOCOLS,
    BrokerInfo,
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
)
from odradek.controller.context import ControllerContext
from odradek.controller.election import (
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import (
    TYPE_FULL,
    TYPE_UNKNOWN,
    ZERO_UUID,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

__all__ = [
    "LEADER_DURING_DELETE",
    "AlterPartitionItem",
    "AlterPartitionResult",
    "BrokerRequest",
    "Decision",
    "ElectionType",
    "on_alter_partition",
    "on_auto_leader_rebalance",
    "on_broker_change",
    "on_broker_log_dir_failure",
    "on_controlled_shutdown",
    "on_controller_failover",
    "on_elect_leaders",
    "on_isr_change_notification",
    "on_partition_reassignment",
    "on_partitions_refresh",
    "on_replicas_offline",
    "on_topic_change",
    "on_topic_deletion",
    "topic_uuid",
]

LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete, shown in UpdateMetadata
EPOCH_DURING_DELETE = -2

BrokerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request (v2/v3 fields; ``partition_epoch`` = zk version)."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0
    # v3 (KIP-903): the broker epoch of each new ISR member as the leader saw it (-1: unknown)
    new_isr_broker_epochs: tuple[int, ...] = ()


@dataclass(frozen=True)
class AlterPartitionResult:
    error_code: int
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass
class Decision:
    """What to do, in order: create states, update states, set assignments, delete topics, admin znodes,
    then send ``requests`` (broker id, request) and answer with the result fields."""

    create_states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    # new state, its zk_version = the version the conditional write must find
    update_states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    set_assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    delete_topics: list[str] = field(default_factory=list)
    # new content of /admin/reassign_partitions (None: leave it; empty: delete it)
    reassignment_znode: dict[TopicPartition, tuple[int, ...]] | None = None
    delete_preferred_replica_election: bool = False
    requests: list[tuple[int, BrokerRequest]] = field(default_factory=list)
    error_code: int = 0  # top-level answer (AlterPartition, ControlledShutdown)
    alter_partition: dict[TopicPartition, AlterPartitionResult] = field(default_factory=dict)
    elect_leaders: dict[TopicPartition, int] = field(default_factory=dict)
    reassign: dict[TopicPartition, int] = field(default_factory=dict)
    remaining_partitions: tuple[TopicPartition, ...] = ()

    def writes(self) -> int:
        return len(self.create_states) + len(self.update_states) + len(self.set_assignments) + len(self.delete_topics)


class _Batch:
    """Accumulates one event's changes (Kafka's ControllerBrokerRequestBatch plus the writes)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.base = ctx
        self.ctx = ctx
        self.d = Decision()
        self.lai: dict[int, dict[TopicPartition, bool]] = {}  # broker -> tp -> is_new
        self.um_brokers: set[int] = set()
        self.um_partitions: set[TopicPartition] = set()
        self.um_full: set[int] = set()  # brokers that get every partition
        self.stop: dict[int, dict[TopicPartition, bool]] = {}

    # -- state changes

    def set_state(self, tp: TopicPartition, leader: int, isr: Sequence[int], *, bump: bool = True) -> None:
        """A controller change of (leader, ISR): epoch + 1 over the state before this event."""
        if tp in self.d.create_states:  # created by this very event: still a creation
            self.create_state(tp, leader, isr)
            return
        before = self.base.states[tp]
        epoch = before.leader_epoch + 1 if bump else before.leader_epoch
        write = LeaderAndIsr(leader, epoch, tuple(isr), self.ctx.epoch, before.zk_version)
        self.d.update_states[tp] = write
        self.ctx = self.ctx.with_states({tp: replace(write, zk_version=before.zk_version + 1)})

    def create_state(self, tp: TopicPartition, leader: int, isr: Sequence[int]) -> None:
        state = LeaderAndIsr(leader, 0, tuple(isr), self.ctx.epoch, 0)
        self.d.create_states[tp] = replace(state, zk_version=-1)
        self.ctx = self.ctx.with_states({tp: state})

    def set_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        self.d.set_assignments[topic] = assignment
        self.ctx = replace(self.ctx, assignments={**self.ctx.assignments, topic: assignment})

    # -- requests

    def leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, *, is_new: bool = False) -> None:
        for b in brokers:
            if self.ctx.is_live_or_shutting_down(b):
                self.lai.setdefault(b, {})[tp] = is_new
        self.update_metadata(self.ctx.live_brokers, [tp])

    def update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.um_brokers.update(b for b in brokers if self.ctx.is_live_or_shutting_down(b))
        self.um_partitions.update(partitions)

    def stop_replica(self, broker: int, tp: TopicPartition, *, delete: bool) -> None:
        if self.ctx.is_live_or_shutting_down(broker):
            prev = self.stop.setdefault(broker, {}).get(tp, False)
            self.stop[broker][tp] = prev or delete

    # -- result

    def _topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID]:
        out = {}
        for t in topics:
            a = self.ctx.assignments.get(t)
            out[t] = topic_uuid(a.topic_id) if a else ZERO_UUID
        return out

    def _um_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        s = self.ctx.states.get(tp)
        if s is None:
            return None
        leader = LEADER_DURING_DELETE if tp[0] in self.ctx.topics_to_be_deleted else s.leader
        return UpdateMetadataPartitionState(
            tp[0], tp[1], s.controller_epoch, leader, s.leader_epoch, s.isr, s.zk_version,
            self.ctx.replicas(tp), self.ctx.offline_replicas(tp),
        )

    def finish(self) -> tuple[ControllerContext, Decision]:
        ctx = self.ctx
        c_id, c_epoch = ctx.controller_id, ctx.epoch
        for b in sorted(self.lai):
            if not self.lai[b]:
                continue
            states = []
            for tp, is_new in sorted(self.lai[b].items()):
                s = ctx.states[tp]
                a = ctx.assignments[tp[0]]
                states.append(
                    LeaderAndIsrPartitionState(
                        tp[0], tp[1], s.controller_epoch, s.leader, s.leader_epoch, s.isr, s.zk_version,
                        ctx.replicas(tp), tuple(a.adding_replicas.get(tp[1], ())),
                        tuple(a.removing_replicas.get(tp[1], ())), is_new,
                    )
                )
            leaders = sorted({st.leader for st in states if st.leader in ctx.live_brokers})
            live_leaders = tuple(
                LiveLeader(i, ctx.live_brokers[i].host, ctx.live_brokers[i].port) for i in leaders
            )
            self.d.requests.append(
                (b, LeaderAndIsrRequest(c_id, c_epoch, ctx.broker_epoch(b), tuple(states), live_leaders,
                                        self._topic_ids({st.topic_name for st in states})))
            )
        live = tuple(_um_broker(ctx.live_brokers[i]) for i in sorted(ctx.live_brokers))
        for b in sorted(self.um_brokers | self.um_full):
            tps = ctx.all_partitions() if b in self.um_full else sorted(self.um_partitions)
            um_states = tuple(s for s in (self._um_state(tp) for tp in tps) if s is not None)
            kind = TYPE_FULL if b in self.um_full else TYPE_UNKNOWN
            self.d.requests.append(
                (b, UpdateMetadataRequest(c_id, c_epoch, ctx.broker_epoch(b), um_states, live,
                                          self._topic_ids({s.topic_name for s in um_states}), kind))
            )
        for b in sorted(self.stop):
            parts = tuple(
                StopReplicaPartitionState(
                    tp[0], tp[1],
                    EPOCH_DURING_DELETE if delete and tp[0] in ctx.topics_to_be_deleted
                    else (ctx.states[tp].leader_epoch if tp in ctx.states else -1),
                    delete,
                )
                for tp, delete in sorted(self.stop[b].items())
            )
            self.d.requests.append((b, StopReplicaRequest(c_id, c_epoch, ctx.broker_epoch(b), parts)))
        return ctx, self.d


def topic_uuid(topic_id: str | None) -> uuid.UUID:
    """A topic id as written in ZooKeeper (URL-safe base64) as a UUID; the zero UUID when absent."""
    if not topic_id:
        return ZERO_UUID
    return uuid.UUID(bytes=urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def _um_broker(b: BrokerInfo) -> UpdateMetadataBroker:
    """Every endpoint of a live broker (UpdateMetadata carries all its listeners)."""
    endpoints = tuple(
        UpdateMetadataEndpoint(e.port, e.host, e.listener, _protocol_id(e.security_protocol))
        for e in b.all_endpoints
    )
    return UpdateMetadataBroker(b.id, endpoints, b.rack)


def _protocol_id(name: str) -> int:
    return SECURITY_PROTOCOLS.index(name) if name in SECURITY_PROTOCOLS else 0


def _live_set(ctx: ControllerContext) -> set[int]:
    return {b for b in ctx.live_brokers if b not in ctx.shutting_down_broker_ids}


# ---------------------------------------------------------------------------- partition state machine


def _online_partition(batch: _Batch, tp: TopicPartition) -> None:
    """New or Offline -> Online: create the state of a new partition, or elect a leader for an offline one."""
    ctx = batch.ctx
    replicas = ctx.replicas(tp)
    live = {b for b in _live_set(ctx) if not ctx.is_on_offline_dir(b, tp)}
    state = ctx.states.get(tp)
    if state is None:  # NewPartition: every live replica is in the first ISR
        live_replicas = [r for r in replicas if r in live]
        if live_replicas:
            batch.create_state(tp, live_replicas[0], live_replicas)
            batch.leader_and_isr(replicas, tp, is_new=True)
        return
    if state.leader != NO_LEADER and state.leader in live:
        return
    leader, isr, _unclean = leader_for_offline(replicas, state.isr, live, ctx.unclean_enabled(tp[0]))
    if leader is not None:
        batch.set_state(tp, leader, isr)
        batch.leader_and_isr(replicas, tp)
    elif state.leader != NO_LEADER:  # the leader is gone and nobody may replace it
        # Never an empty ISR: it keeps the last leader alone (Kafka's removeReplicasFromIsr).
        last = state.leader if state.leader in state.isr or not state.isr else state.isr[-1]
        batch.set_state(tp, NO_LEADER, isr or (last,))
        batch.update_metadata(ctx.live_brokers, [tp])


def _offline_replicas(batch: _Batch, dead: set[int], partitions: Iterable[TopicPartition]) -> None:
    """Replicas on ``dead`` brokers -> OfflineReplica: leaderless partitions are elected, the dead
    leave the ISR of the others (never emptying it)."""
    for tp in partitions:
        state = batch.ctx.states.get(tp)
        if state is None or tp[0] in batch.ctx.topics_to_be_deleted:  # those wait for their deletion
            continue
        if state.leader in dead or state.leader == NO_LEADER:
            _online_partition(batch, tp)
            continue
        if any(r in dead for r in state.isr):
            isr = tuple(r for r in state.isr if r not in dead) or (state.leader,)
            batch.set_state(tp, state.leader, isr)
            batch.leader_and_isr(batch.ctx.replicas(tp), tp)


# ---------------------------------------------------------------------------- events


def on_controller_failover(ctx: ControllerContext) -> tuple[ControllerContext, Decision]:
    """A freshly elected controller with a context loaded from ZooKeeper: replicas on brokers that
    are not live go offline (they leave the ISRs, as Kafka's ReplicaStateMachine.startup does:
    a broker that died with the previous controller is seen by no broker-change event), every
    offline or new partition is elected, then every live broker gets its LeaderAndIsr and the
    full UpdateMetadata."""
    batch = _Batch(ctx)
    partitions = [tp for tp in ctx.all_partitions() if tp[0] not in ctx.topics_to_be_deleted]
    dead: set[int] = set()
    for tp in partitions:
        state = ctx.states.get(tp)
        members = set(ctx.replicas(tp)) | (set(state.isr) if state is not None else set())
        dead |= {r for r in members if r not in ctx.live_brokers}
    _offline_replicas(batch, dead, partitions)
    for tp in partitions:
        if tp not in ctx.states:  # new partitions: _offline_replicas leaves them alone
            _online_partition(batch, tp)
    for tp in batch.ctx.all_partitions():
        if tp in batch.ctx.states:
            batch.leader_and_isr(batch.ctx.replicas(tp), tp)
    batch.um_full.update(ctx.live_brokers)
    for tp in list(batch.ctx.reassignments):
        _maybe_complete_reassignment(batch, tp)
    return batch.finish()


def on_partitions_refresh(
    ctx: ControllerContext, states: Mapping[TopicPartition, LeaderAndIsr]
) -> tuple[ControllerContext, Decision]:
    """After a conditional write lost a race: take the states re-read from ZooKeeper, elect where
    the partition is offline, and tell the replicas and every broker the current state."""
    batch = _Batch(ctx.with_states(states))
    batch.base = batch.ctx
    for tp in sorted(states):
        if tp[0] in batch.ctx.assignments and tp[0] not in batch.ctx.topics_to_be_deleted:
            _online_partition(batch, tp)
            batch.leader_and_isr(batch.ctx.replicas(tp), tp)
    return batch.finish()


def on_broker_change(ctx: ControllerContext, live: Mapping[int, BrokerInfo]) -> tuple[ControllerContext, Decision]:
    """``/brokers/ids`` changed: brokers that left, joined, or bounced (same id, new epoch)."""
    old = ctx.live_brokers
    dead = {b for b in old if b not in live}
    new = {b for b in live if b not in old}
    bounced = {b for b in live if b in old and live[b].epoch != old[b].epoch}
    # First the failure of the dead and the bounced (Kafka's onBrokerFailure), with the bounced absent...
    without = {b: i for b, i in live.items() if b not in bounced}
    shutting = ctx.shutting_down_broker_ids - dead - bounced
    # a broker that left or (re)started has its log dirs back (Kafka: replicasOnOfflineDirs -= broker)
    offline_dirs = {b: tps for b, tps in ctx.offline_dir_replicas.items() if b not in dead | new | bounced}
    batch = _Batch(replace(ctx, live_brokers=without, shutting_down_broker_ids=shutting,
                           offline_dir_replicas=offline_dirs))
    gone = dead | bounced
    if gone:
        _offline_replicas(batch, gone, [tp for tp in ctx.all_partitions() if set(ctx.replicas(tp)) & gone])
    # ... then the startup of the new and the bounced (onBrokerStartup).
    batch.ctx = replace(batch.ctx, live_brokers=dict(live))
    started = new | bounced
    batch.um_full.update(started)
    batch.update_metadata(live, [])
    for b in sorted(started):
        for tp in batch.ctx.partitions_on_broker(b):
            if tp in batch.ctx.states and tp[0] not in batch.ctx.topics_to_be_deleted:
                batch.leader_and_isr([b], tp)
    for tp in batch.ctx.all_partitions():
        if tp[0] not in batch.ctx.topics_to_be_deleted and not batch.ctx.is_online(tp):
            _online_partition(batch, tp)
    for tp in list(batch.ctx.reassignments):
        _maybe_complete_reassignment(batch, tp)
    ctx2, d = batch.finish()
    if ctx2.topics_to_be_deleted and started:  # deletions waiting for these brokers
        ctx3, d2 = on_topic_deletion(ctx2, sorted(ctx2.topics_to_be_deleted))
        return ctx3, _merge(d, d2)
    return ctx2, d


def on_broker_log_dir_failure(ctx: ControllerContext, broker_ids: Iterable[int]) -> tuple[ControllerContext, Decision]:
    """``/log_dir_event_notification`` named ``broker_ids`` (Kafka's onBrokerLogDirFailure): each
    live one gets a LeaderAndIsr for every replica it holds; it answers KAFKA_STORAGE_ERROR for
    those on an offline dir, which the controller then takes offline (:func:`on_replicas_offline`)."""
    batch = _Batch(ctx)
    for b in sorted(set(broker_ids)):
        if not ctx.is_live_or_shutting_down(b):
            continue
        for tp in ctx.partitions_on_broker(b):
            if tp in ctx.states and tp[0] not in ctx.topics_to_be_deleted:
                batch.leader_and_isr([b], tp)
    return batch.finish()


def on_replicas_offline(
    ctx: ControllerContext, broker_id: int, partitions: Iterable[TopicPartition]
) -> tuple[ControllerContext, Decision]:
    """``broker_id`` answered KAFKA_STORAGE_ERROR for ``partitions`` (their log dir is offline;
    Kafka's LeaderAndIsrResponseReceived and onReplicasBecomeOffline): those replicas stay offline
    until the broker restarts. A partition it led gets a new leader among the other live ISR
    members (or none: leader -1, the ISR keeping the last leader alone, as for a dead broker);
    elsewhere the replica leaves the ISR (never emptying it). UpdateMetadata tells every live
    broker, with the replica among the partition's offline replicas. Replicas known offline
    already are left alone, so repeated answers decide nothing."""
    if not ctx.is_live_or_shutting_down(broker_id):
        return ctx, Decision()
    known = ctx.offline_dir_replicas.get(broker_id, frozenset())
    newly = sorted(tp for tp in set(partitions) - known if tp in ctx.states and broker_id in ctx.replicas(tp))
    if not newly:
        return ctx, Decision()
    offline_dirs = {**ctx.offline_dir_replicas, broker_id: known | frozenset(newly)}
    batch = _Batch(replace(ctx, offline_dir_replicas=offline_dirs))
    for tp in newly:
        state = batch.ctx.states[tp]
        if tp[0] not in batch.ctx.topics_to_be_deleted:
            if state.leader == broker_id or state.leader == NO_LEADER:
                _online_partition(batch, tp)
            elif broker_id in state.isr:
                isr = tuple(r for r in state.isr if r != broker_id) or (state.leader,)
                batch.set_state(tp, state.leader, isr)
                batch.leader_and_isr(batch.ctx.replicas(tp), tp)
        batch.update_metadata(batch.ctx.live_brokers, [tp])
    return batch.finish()


def _merge(a: Decision, b: Decision) -> Decision:
    out = replace(a)
    out.create_states = {**a.create_states, **b.create_states}
    for tp, s in b.update_states.items():
        first = a.update_states.get(tp)
        out.update_states[tp] = s if first is None else replace(s, zk_version=first.zk_version)
    out.set_assignments = {**a.set_assignments, **b.set_assignments}
    out.delete_topics = a.delete_topics + b.delete_topics
    out.requests = a.requests + b.requests
    return out


def on_topic_change(
    ctx: ControllerContext,
    assignments: Mapping[str, TopicAssignment],
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[ControllerContext, Decision]:
    """New topics, or new partitions of existing ones (``/brokers/topics`` and its children's data)."""
    batch = _Batch(ctx)
    new_tps: list[TopicPartition] = []
    for topic, a in sorted(assignments.items()):
        known = ctx.assignments.get(topic)
        new_tps += [(topic, p) for p in sorted(a.partitions) if known is None or p not in known.partitions]
    batch.ctx = replace(
        batch.ctx,
        assignments={**ctx.assignments, **assignments},
        topic_configs={**ctx.topic_configs, **(configs or {})},
    )
    for tp in new_tps:
        _online_partition(batch, tp)
    return batch.finish()


def on_topic_deletion(ctx: ControllerContext, topics: Sequence[str]) -> tuple[ControllerContext, Decision]:
    """``/admin/delete_topics``: stop and delete every replica, then the topic's znodes. A topic
    with a replica on a dead broker waits (ineligible) until the broker is back."""
    batch = _Batch(replace(ctx, topics_to_be_deleted=ctx.topics_to_be_deleted | set(topics)))
    done: list[str] = []
    for topic in sorted(set(topics)):
        tps = batch.ctx.partitions_of_topic(topic)
        if any(not batch.ctx.is_live_or_shutting_down(r) for tp in tps for r in batch.ctx.replicas(tp)):
            continue
        batch.update_metadata(batch.ctx.live_brokers, tps)
        for tp in tps:
            for r in batch.ctx.replicas(tp):
                batch.stop_replica(r, tp, delete=True)
        done.append(topic)
    ctx2, d = batch.finish()
    d.delete_topics = done
    remaining_states = {tp: s for tp, s in ctx2.states.items() if tp[0] not in done}
    ctx3 = replace(
        ctx2,
        assignments={t: a for t, a in ctx2.assignments.items() if t not in done},
        states=remaining_states,
        topic_configs={t: c for t, c in ctx2.topic_configs.items() if t not in done},
        topics_to_be_deleted=ctx2.topics_to_be_deleted - set(done),
        reassignments={tp: r for tp, r in ctx2.reassignments.items() if tp[0] not in done},
    )
    return ctx3, d


def on_alter_partition(
    ctx: ControllerContext, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
) -> tuple[ControllerContext, Decision]:
    """AlterPartition from a leader: validate, write the ISR it asks for (same leader epoch)."""
    batch = _Batch(ctx)
    if broker_epoch != -1 and broker_epoch != ctx.broker_epoch(broker_id):
        batch.d.error_code = ErrorCode.stale_broker_epoch.value
        return batch.finish()
    live = _live_set(ctx)
    changed: list[TopicPartition] = []
    for it in items:
        tp = (it.topic, it.partition)
        state = ctx.states.get(tp)
        if state is None or it.topic in ctx.topics_to_be_deleted:
            batch.d.alter_partition[tp] = AlterPartitionResult(ErrorCode.unknown_topic_or_partition.value)
            continue
        if state.leader != broker_id:
            batch.d.alter_partition[tp] = AlterPartitionResult(ErrorCode.not_leader_or_follower.value)
            continue
        if it.leader_epoch != state.leader_epoch:
            batch.d.alter_partition[tp] = AlterPartitionResult(ErrorCode.fenced_leader_epoch.value)
            continue
        if it.partition_epoch != state.zk_version:
            batch.d.alter_partition[tp] = AlterPartitionResult(ErrorCode.invalid_update_version.value)
            continue
        if tuple(it.new_isr) == state.isr:
            batch.d.alter_partition[tp] = _alter_result(state)
            continue
        replicas = ctx.replicas(tp)
        stale = any(e != -1 and e != ctx.broker_epoch(r)
                    for r, e in zip(it.new_isr, it.new_isr_broker_epochs, strict=False))
        if stale or broker_id not in it.new_isr or any(
            r not in replicas or r not in live or ctx.is_on_offline_dir(r, tp) for r in it.new_isr
        ):
            batch.d.alter_partition[tp] = AlterPartitionResult(ErrorCode.ineligible_replica.value)
            continue
        batch.set_state(tp, state.leader, it.new_isr, bump=False)
        batch.d.alter_partition[tp] = _alter_result(batch.ctx.states[tp])
        changed.append(tp)
    batch.update_metadata(ctx.live_brokers, changed)
    for tp in changed:
        _maybe_complete_reassignment(batch, tp)
        batch.d.alter_partition[tp] = _alter_result(batch.ctx.states[tp])
    return batch.finish()


def _alter_result(s: LeaderAndIsr) -> AlterPartitionResult:
    return AlterPartitionResult(0, s.leader, s.leader_epoch, s.isr, s.zk_version)


def on_isr_change_notification(
    ctx: ControllerContext, states: Mapping[TopicPartition, LeaderAndIsr]
) -> tuple[ControllerContext, Decision]:
    """``/isr_change_notification``: a leader wrote its ISR itself; ``states`` were re-read from ZooKeeper."""
    batch = _Batch(ctx.with_states({tp: s for tp, s in states.items() if tp[0] in ctx.assignments}))
    batch.base = batch.ctx
    batch.update_metadata(ctx.live_brokers, [tp for tp in states if tp[0] in ctx.assignments])
    for tp in states:
        _maybe_complete_reassignment(batch, tp)
    return batch.finish()


def on_controlled_shutdown(
    ctx: ControllerContext, broker_id: int, broker_epoch: int
) -> tuple[ControllerContext, Decision]:
    """ControlledShutdown: move leadership off the broker, take it out of the ISRs it follows in,
    and answer with the partitions it still leads (replication factor > 1 only)."""
    if broker_id not in ctx.live_brokers:
        d = Decision(error_code=ErrorCode.broker_not_available.value)
        return ctx, d
    if broker_epoch != -1 and broker_epoch != ctx.broker_epoch(broker_id):
        return ctx, Decision(error_code=ErrorCode.stale_broker_epoch.value)
    batch = _Batch(replace(ctx, shutting_down_broker_ids=ctx.shutting_down_broker_ids | {broker_id}))
    live = _live_set(batch.ctx)
    for tp in ctx.partitions_on_broker(broker_id):
        replicas = ctx.replicas(tp)
        state = ctx.states.get(tp)
        if state is None or len(replicas) <= 1 or tp[0] in ctx.topics_to_be_deleted:
            continue
        if state.leader == broker_id:
            leader, isr = leader_for_controlled_shutdown(replicas, state.isr, live, batch.ctx.shutting_down_broker_ids)
            if leader is not None:
                batch.set_state(tp, leader, isr)
                batch.leader_and_isr([r for r in replicas if r != broker_id], tp)
                batch.stop_replica(broker_id, tp, delete=False)
        else:
            if broker_id in state.isr and len(state.isr) > 1:
                batch.set_state(tp, state.leader, tuple(r for r in state.isr if r != broker_id))
                batch.leader_and_isr([r for r in replicas if r != broker_id], tp)
            batch.stop_replica(broker_id, tp, delete=False)
    ctx2, d = batch.finish()
    d.remaining_partitions = tuple(
        tp for tp in ctx2.partitions_on_broker(broker_id)
        if tp in ctx2.states and ctx2.states[tp].leader == broker_id and len(ctx2.replicas(tp)) > 1
    )
    return ctx2, d


def on_elect_leaders(
    ctx: ControllerContext, election_type: ElectionType, partitions: Iterable[TopicPartition], *,
    from_znode: bool = False,
) -> tuple[ControllerContext, Decision]:
    """ElectLeaders (or ``/admin/preferred_replica_election`` when ``from_znode``): per partition an
    error code, 0 when a new leader was written."""
    batch = _Batch(ctx)
    all_live = _live_set(ctx)
    for tp in sorted(set(partitions)):
        state = ctx.states.get(tp)
        if state is None or tp[0] in ctx.topics_to_be_deleted:
            batch.d.elect_leaders[tp] = ErrorCode.unknown_topic_or_partition.value
            continue
        replicas = ctx.replicas(tp)
        live = {b for b in all_live if not ctx.is_on_offline_dir(b, tp)}
        if election_type is ElectionType.PREFERRED:
            if state.leader == replicas[0]:
                batch.d.elect_leaders[tp] = ErrorCode.election_not_needed.value
                continue
            leader = leader_for_preferred_replica(replicas, state.isr, live)
            if leader is None:
                batch.d.elect_leaders[tp] = ErrorCode.preferred_leader_not_available.value
                continue
            batch.set_state(tp, leader, state.isr)
        else:
            if state.leader in live:
                batch.d.elect_leaders[tp] = ErrorCode.election_not_needed.value
                continue
            new_leader, isr, _ = leader_for_offline(replicas, state.isr, live, unclean_enabled=True)
            if new_leader is None:
                batch.d.elect_leaders[tp] = ErrorCode.eligible_leaders_not_available.value
                continue
            batch.set_state(tp, new_leader, isr)
        batch.leader_and_isr(replicas, tp)
        batch.d.elect_leaders[tp] = 0
    batch.d.delete_preferred_replica_election = from_znode
    return batch.finish()


def on_auto_leader_rebalance(ctx: ControllerContext) -> tuple[ControllerContext, Decision]:
    """Preferred elections for every broker whose imbalance ratio (partitions it prefers but does not
    lead / partitions it prefers) exceeds ``leader.imbalance.per.broker.percentage``."""
    if ctx.reassignments:
        return ctx, Decision()
    to_elect: list[TopicPartition] = []
    for b in sorted(ctx.live_brokers):
        preferred = [
            tp for tp in ctx.all_partitions()
            if ctx.replicas(tp)[:1] == (b,) and tp in ctx.states and tp[0] not in ctx.topics_to_be_deleted
        ]
        if not preferred:
            continue
        not_led = [tp for tp in preferred if ctx.states[tp].leader != b]
        if len(not_led) * 100 > ctx.config.leader_imbalance_per_broker_percentage * len(preferred):
            to_elect += [tp for tp in not_led if ctx.is_live(b) and b in ctx.states[tp].isr]
    if not to_elect:
        return ctx, Decision()
    return on_elect_leaders(ctx, ElectionType.PREFERRED, to_elect)


# ---------------------------------------------------------------------------- reassignment


def on_partition_reassignment(
    ctx: ControllerContext, targets: Mapping[TopicPartition, Sequence[int] | None]
) -> tuple[ControllerContext, Decision]:
    """Start (or cancel, target None) reassignments: RS = TRS + (ORS - TRS), adding = TRS - ORS,
    removing = ORS - TRS; leader epoch + 1 and LeaderAndIsr to RS so new replicas start following.
    They complete in :func:`_maybe_complete_reassignment` once every TRS member is in the ISR."""
    batch = _Batch(ctx)
    for tp, target in sorted(targets.items()):
        a = ctx.assignments.get(tp[0])
        state = ctx.states.get(tp)
        if a is None or tp[1] not in a.partitions or state is None or tp[0] in ctx.topics_to_be_deleted:
            batch.d.reassign[tp] = ErrorCode.unknown_topic_or_partition.value
            continue
        current = a.partitions[tp[1]]
        adding = a.adding_replicas.get(tp[1], ())
        original = tuple(r for r in current if r not in adding)  # ORS, even while one is in flight
        if target is None:
            if tp not in ctx.reassignments:
                batch.d.reassign[tp] = ErrorCode.no_reassignment_in_progress.value
                continue
            target = original
        trs = tuple(target)
        if not trs or len(set(trs)) != len(trs):
            batch.d.reassign[tp] = ErrorCode.invalid_replica_assignment.value
            continue
        # Replicas an earlier reassignment added stay only while they lead or hold the whole ISR:
        # the leader moves, and they are removed, when this reassignment completes.
        origin = tuple(r for r in current if r not in adding or r == state.leader)
        if all(r in adding and r not in trs and r not in origin for r in state.isr):
            origin = tuple(r for r in current if r not in adding or r == state.leader or r in state.isr)
        rs = trs + tuple(r for r in origin if r not in trs)
        new_a = _with_partition(
            batch.ctx.assignments[tp[0]], tp[1], rs,
            tuple(r for r in trs if r not in origin), tuple(r for r in origin if r not in trs),
        )
        batch.set_assignment(tp[0], new_a)
        batch.ctx = replace(batch.ctx, reassignments={**batch.ctx.reassignments, tp: trs})
        batch.d.reassign[tp] = 0
        # replicas added by a reassignment this one replaces or cancels go away (Kafka's unneededReplicas)
        unneeded = [r for r in current if r not in rs]
        if trs != current:
            isr = tuple(r for r in state.isr if r not in unneeded) or (state.leader,)
            batch.set_state(tp, state.leader, isr)
            batch.leader_and_isr(rs, tp)
        for r in unneeded:
            batch.stop_replica(r, tp, delete=True)
        _maybe_complete_reassignment(batch, tp)
    if any(code == 0 for code in batch.d.reassign.values()):
        batch.d.reassignment_znode = dict(batch.ctx.reassignments)
    return batch.finish()


def _with_partition(
    a: TopicAssignment, p: int, replicas: tuple[int, ...], adding: tuple[int, ...], removing: tuple[int, ...]
) -> TopicAssignment:
    def put(m: Mapping[int, tuple[int, ...]], v: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
        out = {k: x for k, x in m.items() if k != p}
        if v:
            out[p] = v
        return out

    return TopicAssignment(put(a.partitions, replicas), put(a.adding_replicas, adding),
                           put(a.removing_replicas, removing), a.topic_id)


def _maybe_complete_reassignment(batch: _Batch, tp: TopicPartition) -> None:
    ctx = batch.ctx
    trs = ctx.reassignments.get(tp)
    state = ctx.states.get(tp)
    if trs is None or state is None or tp[0] in ctx.topics_to_be_deleted or not all(r in state.isr for r in trs):
        return
    live = _live_set(ctx)
    rs = ctx.replicas(tp)
    removed = [r for r in rs if r not in trs]
    isr = tuple(r for r in state.isr if r in trs)
    leader = state.leader
    if leader not in trs or leader not in live:
        elected = leader_for_reassign(trs, state.isr, live)
        if elected is None:
            return  # wait for a TRS member to come back
        leader = elected
    if removed or leader != state.leader or isr != state.isr:
        batch.set_state(tp, leader, isr)
    batch.set_assignment(tp[0], _with_partition(ctx.assignments[tp[0]], tp[1], trs, (), ()))
    batch.leader_and_isr(trs, tp)
    for r in removed:
        batch.lai.get(r, {}).pop(tp, None)  # started and finished in one event: only the stop
        batch.stop_replica(r, tp, delete=True)
    remaining = {k: v for k, v in batch.ctx.reassignments.items() if k != tp}
    batch.ctx = replace(batch.ctx, reassignments=remaining)
    batch.d.reassignment_znode = dict(remaining)
