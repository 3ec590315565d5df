"""Invariants of the controller's decisions over random event sequences (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.cluster.znodes import NO_LEADER, TopicAssignment
from odradek.controller.context import ControllerContext
from odradek.controller.decisions import (
    AlterPartitionItem,
    Decision,
    ElectionType,
    on_alter_partition,
    on_auto_leader_rebalance,
    on_broker_change,
    on_controlled_shutdown,
    on_controller_failover,
    on_elect_leaders,
    on_partition_reassignment,
    on_replicas_offline,
    on_topic_change,
    on_topic_deletion,
)
from odradek.protocol.inter_broker import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

from .helpers import broker, context

BROKERS = [1, 2, 3, 4]


def check(before: ControllerContext, after: ControllerContext, d: Decision, *, leader_asked: bool,
          unclean_ok: bool) -> None:
    # writes are conditional on the versions the controller knows, and fenced by its epoch
    for tp, w in d.update_states.items():
        old = before.states[tp]
        assert w.zk_version == old.zk_version
        assert tp not in after.states or after.states[tp].zk_version == old.zk_version + 1
        changed = (w.leader, w.isr) != (old.leader, old.isr)
        if leader_asked:
            assert w.leader_epoch == old.leader_epoch
        else:
            assert w.leader_epoch == old.leader_epoch + 1  # every controller change bumps the epoch
        if changed and w.leader != NO_LEADER and w.leader != old.leader and not unclean_ok:
            assert w.leader in old.isr, "clean elections only pick from the ISR"
        assert w.controller_epoch == before.epoch
    for tp, s in after.states.items():
        replicas = after.replicas(tp)
        assert s.isr, "the ISR is never empty"
        assert len(set(s.isr)) == len(s.isr)
        assert set(s.isr) <= set(replicas)
        if s.leader != NO_LEADER:
            assert s.leader in s.isr and s.leader in replicas
            # (a topic queued for deletion keeps its last state until it is gone, as in Kafka)
            assert s.leader in after.live_brokers or tp[0] in after.topics_to_be_deleted, "leaders are live"
    for b, req in d.requests:
        assert b in after.live_brokers, "requests go to live brokers only"
        assert req.controller_epoch == after.epoch and req.controller_id == after.controller_id
        assert req.broker_epoch == after.live_brokers[b].epoch
        if isinstance(req, LeaderAndIsrRequest):
            for ps in req.partition_states:
                s = after.states[(ps.topic_name, ps.partition_index)]
                assert (ps.leader, ps.leader_epoch, ps.isr, ps.partition_epoch) == (
                    s.leader, s.leader_epoch, s.isr, s.zk_version)
                assert b in ps.replicas
        elif isinstance(req, UpdateMetadataRequest):
            assert {x.id for x in req.live_brokers} == set(after.live_brokers)
        else:
            assert isinstance(req, StopReplicaRequest)


def unclean_allowed(ctx: ControllerContext) -> bool:
    return ctx.config.unclean_leader_election_enable


events = st.lists(
    st.tuples(
        st.sampled_from(["down", "up", "bounce", "alter", "shutdown", "preferred", "unclean", "reassign",
                         "rebalance", "delete", "create", "failover", "dirfail"]),
        st.sampled_from(BROKERS),
        st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True),
        st.integers(0, 3),
    ),
    min_size=3,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(events=events, unclean=st.booleans())
def test_invariants_over_random_events(events, unclean) -> None:  # type: ignore[no-untyped-def]
    ctx = context(BROKERS, unclean=unclean)
    ctx, _ = on_topic_change(ctx, {"t": TopicAssignment({0: (1, 2, 3), 1: (2, 3, 4), 2: (3, 4)}),
                                   "u": TopicAssignment({0: (4, 1)})})
    next_epoch = 1000
    next_topic = 0
    for kind, b, replicas, n in events:
        before = ctx
        leader_asked = False
        unclean_ok = unclean_allowed(ctx)
        if kind == "down":
            ctx, d = on_broker_change(ctx, {i: x for i, x in ctx.live_brokers.items() if i != b})
        elif kind in ("up", "bounce"):
            if kind == "up" and b in ctx.live_brokers:
                continue
            next_epoch += 1
            ctx, d = on_broker_change(ctx, {**ctx.live_brokers, b: broker(b, epoch=next_epoch)})
        elif kind == "alter":
            tps = sorted(ctx.states)
            if not tps:
                continue
            tp = tps[n % len(tps)]
            s = ctx.states[tp]
            if s.leader == NO_LEADER:
                continue
            new_isr = tuple(dict.fromkeys([s.leader, *[r for r in replicas if r in ctx.replicas(tp)]]))
            leader_asked = True
            ctx, d = on_alter_partition(ctx, s.leader, ctx.broker_epoch(s.leader),
                                        [AlterPartitionItem(tp[0], tp[1], s.leader_epoch, new_isr, s.zk_version)])
            # completing a reassignment moves the leader / bumps the epoch: a controller change
            if d.set_assignments:
                continue
        elif kind == "shutdown":
            ctx, d = on_controlled_shutdown(ctx, b, ctx.broker_epoch(b))
        elif kind in ("preferred", "unclean"):
            et = ElectionType.PREFERRED if kind == "preferred" else ElectionType.UNCLEAN
            unclean_ok = unclean_ok or kind == "unclean"
            ctx, d = on_elect_leaders(ctx, et, sorted(ctx.states))
        elif kind == "reassign":
            tps = sorted(ctx.states)
            if not tps:
                continue
            ctx, d = on_partition_reassignment(ctx, {tps[n % len(tps)]: replicas})
        elif kind == "rebalance":
            ctx, d = on_auto_leader_rebalance(ctx)
        elif kind == "delete":
            topics = sorted(ctx.assignments)
            if not topics:
                continue
            ctx, d = on_topic_deletion(ctx, [topics[n % len(topics)]])
        elif kind == "dirfail":  # some of b's replicas are on a dir that failed
            on_b = [tp for tp in sorted(ctx.states) if b in ctx.replicas(tp)]
            failed = on_b[n % 2::2] if on_b else []
            ctx, d = on_replicas_offline(ctx, b, failed)
            for tp in failed:
                s = ctx.states[tp]
                if tp[0] not in ctx.topics_to_be_deleted and b in before.live_brokers:
                    assert s.leader != b, "a replica on a failed dir does not lead"
                    assert b not in s.isr or s.isr == (b,), "it leaves the ISR unless it is the last"
                    assert b in ctx.offline_replicas(tp)
        elif kind == "create":
            next_topic += 1
            ctx, d = on_topic_change(ctx, {f"n{next_topic}": TopicAssignment({0: tuple(replicas)})})
        else:
            ctx = replace(ctx, epoch=ctx.epoch + 1, epoch_zk_version=ctx.epoch_zk_version + 1,
                          shutting_down_broker_ids=frozenset())
            before = ctx
            ctx, d = on_controller_failover(ctx)
        check(before, ctx, d, leader_asked=leader_asked, unclean_ok=unclean_ok)
