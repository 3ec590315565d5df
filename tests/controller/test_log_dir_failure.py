"""The controller's decisions on a failed log dir (Kafka's onBrokerLogDirFailure and
onReplicasBecomeOffline in ZooKeeper mode)."""

from __future__ import annotations

import pytest

from odradek.controller.decisions import (
    AlterPartitionItem,
    ElectionType,
    on_alter_partition,
    on_broker_change,
    on_broker_log_dir_failure,
    on_elect_leaders,
    on_replicas_offline,
)
from odradek.protocol.errors import ErrorCode

from .helpers import broker, context, leader_and_isr_to, update_metadata_to, with_topic

T0 = ("t", 0)
T1 = ("t", 1)


def cluster():  # type: ignore[no-untyped-def]
    ctx = context([1, 2, 3])
    return with_topic(ctx, "t", {0: (2, 1, 3), 1: (1, 2, 3), 2: (3, 1)})


def test_log_dir_event_sends_the_broker_a_leader_and_isr_for_every_replica_it_holds() -> None:
    ctx = cluster()
    ctx2, d = on_broker_log_dir_failure(ctx, [2, 7])
    assert ctx2 == ctx and d.writes() == 0
    lai = leader_and_isr_to(d)
    assert sorted(lai) == [2]
    assert sorted((s.topic_name, s.partition_index) for s in lai[2].partition_states) == [T0, T1]


# (partition, broker whose dir failed) -> (leader, isr) afterwards
@pytest.mark.parametrize(
    ("tp", "failed", "leader", "isr"),
    [
        (T0, 2, 1, (1, 3)),  # the leader's dir: the next live ISR member leads
        (T1, 2, 1, (1, 3)),  # a follower's dir: it leaves the ISR, same leader
        (T0, 3, 2, (2, 1)),
        (T1, 1, 2, (2, 3)),
    ],
)
def test_offline_replica_leaves_the_isr_and_loses_leadership(tp, failed, leader, isr) -> None:  # type: ignore[no-untyped-def]
    ctx = cluster()
    before = ctx.states[tp]
    ctx2, d = on_replicas_offline(ctx, failed, [tp])
    after = ctx2.states[tp]
    assert (after.leader, after.isr) == (leader, isr)
    assert after.leader_epoch == before.leader_epoch + 1
    assert d.update_states[tp].zk_version == before.zk_version
    assert ctx2.offline_replicas(tp) == (failed,)
    assert sorted(lai_b for lai_b in leader_and_isr_to(d)) == sorted(ctx.replicas(tp))
    um = update_metadata_to(d)
    assert sorted(um) == [1, 2, 3]
    st = next(s for s in um[1].partition_states if (s.topic_name, s.partition_index) == tp)
    assert st.offline_replicas == (failed,) and st.leader == leader


def test_repeated_answers_decide_nothing_and_unrelated_partitions_stay() -> None:
    ctx = cluster()
    ctx2, _ = on_replicas_offline(ctx, 2, [T0])
    ctx3, d = on_replicas_offline(ctx2, 2, [T0])
    assert ctx3 is ctx2 and d.writes() == 0 and d.requests == []
    assert ctx2.states[T1] == ctx.states[T1] and ctx2.offline_replicas(T1) == ()
    _, d = on_replicas_offline(ctx, 2, [("t", 2)])  # not a replica of that partition
    assert d.requests == []


def test_last_isr_member_offline_leaves_the_partition_leaderless_with_a_nonempty_isr() -> None:
    ctx = with_topic(context([1, 2]), "u", {0: (2,)})
    ctx2, _ = on_replicas_offline(ctx, 2, [("u", 0)])
    s = ctx2.states[("u", 0)]
    assert s.leader == -1 and s.isr == (2,)
    assert not ctx2.is_online(("u", 0))


def test_offline_replica_is_not_elected_again_until_its_broker_restarts() -> None:
    ctx = cluster()
    ctx2, _ = on_replicas_offline(ctx, 2, [T0])
    # the preferred replica (2) is ineligible: out of the ISR and on an offline dir
    _, d = on_elect_leaders(ctx2, ElectionType.PREFERRED, [T0])
    assert d.update_states == {}
    # nor taken back into the ISR (Kafka: INELIGIBLE_REPLICA), nor elected unclean
    s = ctx2.states[T0]
    _, d = on_alter_partition(
        ctx2,
        s.leader,
        ctx2.broker_epoch(s.leader),
        [AlterPartitionItem("t", 0, s.leader_epoch, (*s.isr, 2), s.zk_version)],
    )
    assert d.alter_partition[T0].error_code == ErrorCode.ineligible_replica.value
    # the new leader's dir failing too leaves 3, never 2
    ctx3, _ = on_replicas_offline(ctx2, 1, [T0])
    assert ctx3.states[T0].leader == 3
    # a restart (new broker epoch) brings its replicas back
    live = {1: ctx3.live_brokers[1], 2: broker(2, epoch=999), 3: ctx3.live_brokers[3]}
    ctx4, _ = on_broker_change(ctx3, live)
    assert 2 not in ctx4.offline_dir_replicas and ctx4.offline_replicas(T0) == (1,)


def test_unclean_election_skips_a_replica_on_a_failed_dir() -> None:
    ctx = with_topic(context([1, 2, 3], unclean=True), "u", {0: (1, 2)})
    ctx, _ = on_replicas_offline(ctx, 2, [("u", 0)])
    ctx, _ = on_broker_change(ctx, {b: ctx.live_brokers[b] for b in (2, 3)})  # 1 dies
    assert ctx.states[("u", 0)].leader == -1  # 2 is live but its replica is offline
    _, d = on_elect_leaders(ctx, ElectionType.UNCLEAN, [("u", 0)])
    assert d.elect_leaders[("u", 0)] == ErrorCode.eligible_leaders_not_available.value
