"""The controller's decisions on examples taken from Kafka's behaviour (ZooKeeper mode)."""

from __future__ import annotations

from dataclasses import replace

from odradek.cluster.znodes import LeaderAndIsr, TopicAssignment
from odradek.controller.decisions import (
    LEADER_DURING_DELETE,
    AlterPartitionItem,
    ElectionType,
    on_alter_partition,
    on_auto_leader_rebalance,
    on_broker_change,
    on_controlled_shutdown,
    on_controller_failover,
    on_elect_leaders,
    on_partition_reassignment,
    on_topic_change,
    on_topic_deletion,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import TYPE_FULL, TYPE_UNKNOWN

from .helpers import (
    broker,
    context,
    leader_and_isr_to,
    stop_replica_to,
    update_metadata_to,
    with_topic,
)

T0 = ("t", 0)


def live(ctx, *ids, bounced=()):  # type: ignore[no-untyped-def]
    return {b: (broker(b, epoch=999 + b) if b in bounced else ctx.live_brokers.get(b, broker(b))) for b in ids}


def test_new_topic_leader_is_first_live_replica_and_isr_all_live() -> None:
    ctx = context([1, 2, 3])
    ctx2, d = on_topic_change(ctx, {"t": TopicAssignment({0: (2, 3, 1), 1: (3, 1, 2)})})
    assert d.create_states[T0] == LeaderAndIsr(2, 0, (2, 3, 1), 5, -1)
    assert ctx2.states[T0] == LeaderAndIsr(2, 0, (2, 3, 1), 5, 0)
    lai = leader_and_isr_to(d)
    assert sorted(lai) == [1, 2, 3]
    st = next(s for s in lai[1].partition_states if s.partition_index == 0)
    assert st.is_new and st.leader == 2 and st.partition_epoch == 0 and st.replicas == (2, 3, 1)
    assert lai[1].broker_epoch == 101 and lai[1].controller_epoch == 5 and lai[1].controller_id == 1
    assert {ll.broker_id for ll in lai[1].live_leaders} == {2, 3}
    assert sorted(update_metadata_to(d)) == [1, 2, 3]


def test_new_partition_with_a_dead_replica_leaves_it_out_of_the_isr() -> None:
    ctx = context([1, 2])
    ctx2, d = on_topic_change(ctx, {"t": TopicAssignment({0: (3, 2, 1)})})
    assert ctx2.states[T0].leader == 2 and ctx2.states[T0].isr == (2, 1)
    ctx3, d = on_topic_change(context([]), {"t": TopicAssignment({0: (3,)})})
    assert d.create_states == {} and T0 not in ctx3.states  # stays NewPartition


def test_leader_failure_elects_next_in_assignment_order_from_the_isr() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3]})
    ctx2, d = on_broker_change(ctx, live(ctx, 2, 3))
    write = d.update_states[T0]
    assert (write.leader, write.leader_epoch, write.isr, write.zk_version) == (2, 1, (2, 3), 0)
    assert ctx2.states[T0].zk_version == 1
    assert sorted(leader_and_isr_to(d)) == [2, 3]  # never to the dead broker
    assert 1 not in update_metadata_to(d)


def test_follower_failure_shrinks_isr_with_epoch_bump() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3]})
    ctx2, _d = on_broker_change(ctx, live(ctx, 1, 2))
    assert ctx2.states[T0] == LeaderAndIsr(1, 1, (1, 2), 5, 1)


def test_isr_never_empty_and_last_leader_returns() -> None:
    ctx = with_topic(context([1, 2]), "t", {0: [1, 2]})
    ctx, _ = on_broker_change(ctx, live(ctx, 1))  # ISR [1]
    assert ctx.states[T0].isr == (1,)
    ctx, d = on_broker_change(ctx, live(ctx))  # the last ISR member dies
    assert ctx.states[T0].leader == -1 and ctx.states[T0].isr == (1,)
    assert ctx.states[T0].leader_epoch == 2
    ctx, d = on_broker_change(ctx, live(ctx, 2))  # 2 is back, but not in the ISR: stays offline
    assert ctx.states[T0].leader == -1 and d.update_states == {}
    ctx, d = on_broker_change(ctx, live(ctx, 1, 2))  # the last leader is back: clean election
    assert ctx.states[T0] == LeaderAndIsr(1, 3, (1,), 5, 3)


def test_unclean_election_only_when_enabled() -> None:
    for unclean, topic_cfg, expected in [
        (False, {}, -1),
        (True, {}, 2),
        (False, {"unclean.leader.election.enable": "true"}, 2),
        (True, {"unclean.leader.election.enable": "false"}, -1),
    ]:
        ctx = with_topic(context([1, 2], unclean=unclean), "t", {0: [1, 2]}, topic_cfg)
        ctx, _ = on_broker_change(ctx, live(ctx, 1))
        ctx, _ = on_broker_change(ctx, live(ctx))
        ctx, _ = on_broker_change(ctx, live(ctx, 2))
        assert ctx.states[T0].leader == expected, (unclean, topic_cfg)
        if expected == 2:
            assert ctx.states[T0].isr == (2,)


def test_bounced_broker_loses_leadership_and_gets_full_metadata() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3], 1: [2, 3, 1]})
    ctx2, d = on_broker_change(ctx, live(ctx, 1, 2, 3, bounced=(1,)))
    assert ctx2.states[T0].leader == 2 and ctx2.states[T0].isr == (2, 3)
    assert ctx2.states[("t", 1)].isr == (2, 3)
    assert ctx2.live_brokers[1].epoch == 1000
    um = update_metadata_to(d)
    assert um[1].broker_epoch == 1000 and len(um[1].partition_states) == 2
    # the bounced broker's image is replaced (type FULL); the others' is updated
    assert um[1].type == TYPE_FULL and um[2].type == um[3].type == TYPE_UNKNOWN
    lai = leader_and_isr_to(d)
    assert {s.partition_index for s in lai[1].partition_states} == {0, 1} and lai[1].broker_epoch == 1000


def test_controller_failover_elects_offline_and_tells_everyone() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3]})
    ctx = replace(ctx, live_brokers=live(ctx, 2, 3), epoch=6)
    ctx2, d = on_controller_failover(ctx)
    assert ctx2.states[T0] == LeaderAndIsr(2, 1, (2, 3), 6, 1)
    assert sorted(leader_and_isr_to(d)) == [2, 3]
    assert all(r.controller_epoch == 6 for _, r in d.requests)
    assert {b: r.type for b, r in update_metadata_to(d).items()} == {2: TYPE_FULL, 3: TYPE_FULL}


def test_controller_failover_takes_dead_followers_out_of_the_isr() -> None:
    # broker 3 died together with the previous controller: no broker-change event will say so
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3]})
    ctx = replace(ctx, live_brokers=live(ctx, 1, 2), epoch=6)
    ctx2, d = on_controller_failover(ctx)
    assert ctx2.states[T0] == LeaderAndIsr(1, 1, (1, 2), 6, 1)
    assert d.update_states[T0].isr == (1, 2)
    assert sorted(leader_and_isr_to(d)) == [1, 2]


def test_alter_partition_validation_and_write() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3]})
    item = AlterPartitionItem("t", 0, leader_epoch=0, new_isr=(1, 2), partition_epoch=0)
    _, d = on_alter_partition(ctx, 1, 7, [item])
    assert d.error_code == ErrorCode.stale_broker_epoch.value
    _, d = on_alter_partition(ctx, 2, 102, [item])
    assert d.alter_partition[T0].error_code == ErrorCode.not_leader_or_follower.value
    _, d = on_alter_partition(ctx, 1, 101, [replace(item, leader_epoch=1)])
    assert d.alter_partition[T0].error_code == ErrorCode.fenced_leader_epoch.value
    _, d = on_alter_partition(ctx, 1, 101, [replace(item, partition_epoch=3)])
    assert d.alter_partition[T0].error_code == ErrorCode.invalid_update_version.value
    _, d = on_alter_partition(ctx, 1, 101, [replace(item, new_isr=(1, 2, 9))])
    assert d.alter_partition[T0].error_code == ErrorCode.ineligible_replica.value
    ctx2, d = on_alter_partition(ctx, 1, 101, [item])
    res = d.alter_partition[T0]
    assert (res.error_code, res.leader, res.leader_epoch, res.isr, res.partition_epoch) == (0, 1, 0, (1, 2), 1)
    assert d.update_states[T0] == LeaderAndIsr(1, 0, (1, 2), 5, 0)  # same leader epoch, conditional on v0
    assert sorted(update_metadata_to(d)) == [1, 2, 3] and leader_and_isr_to(d) == {}
    # expand again
    ctx3, d = on_alter_partition(ctx2, 1, 101, [replace(item, new_isr=(1, 2, 3), partition_epoch=1)])
    assert ctx3.states[T0] == LeaderAndIsr(1, 0, (1, 2, 3), 5, 2)


def test_controlled_shutdown_moves_leadership_and_leaves_isrs() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3], 1: [2, 1, 3], 2: [1]})
    ctx2, d = on_controlled_shutdown(ctx, 1, 101)
    assert d.error_code == 0 and d.remaining_partitions == ()
    assert ctx2.states[T0] == LeaderAndIsr(2, 1, (2, 3), 5, 1)
    assert ctx2.states[("t", 1)] == LeaderAndIsr(2, 1, (2, 3), 5, 1)
    assert ctx2.states[("t", 2)].leader == 1  # replication factor 1: stays, not "remaining"
    stops = stop_replica_to(d)[1].partition_states
    assert {(s.partition_index, s.delete_partition) for s in stops} == {(0, False), (1, False)}
    assert 1 in ctx2.shutting_down_broker_ids
    # A partition whose ISR is only the shutting-down leader cannot move: it remains.
    ctx = with_topic(context([1, 2]), "u", {0: [1, 2]})
    ctx, _ = on_alter_partition(ctx, 1, 101, [AlterPartitionItem("u", 0, 0, (1,), 0)])
    _, d = on_controlled_shutdown(ctx, 1, 101)
    assert d.remaining_partitions == (("u", 0),)
    _, d = on_controlled_shutdown(ctx, 1, 5)
    assert d.error_code == ErrorCode.stale_broker_epoch.value
    _, d = on_controlled_shutdown(ctx, 9, 5)
    assert d.error_code == ErrorCode.broker_not_available.value


def test_preferred_and_unclean_elect_leaders() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2, 3]})
    _, d = on_elect_leaders(ctx, ElectionType.PREFERRED, [T0, ("x", 0)])
    assert d.elect_leaders == {T0: ErrorCode.election_not_needed.value,
                               ("x", 0): ErrorCode.unknown_topic_or_partition.value}
    ctx, _ = on_broker_change(ctx, live(ctx, 2, 3))
    _, d = on_elect_leaders(ctx, ElectionType.PREFERRED, [T0])
    assert d.elect_leaders[T0] == ErrorCode.preferred_leader_not_available.value
    ctx, _ = on_broker_change(ctx, live(ctx, 1, 2, 3))
    assert ctx.states[T0].leader == 2
    # 1 is back but must rejoin the ISR first
    _, d = on_elect_leaders(ctx, ElectionType.PREFERRED, [T0])
    assert d.elect_leaders[T0] == ErrorCode.preferred_leader_not_available.value
    s = ctx.states[T0]
    ctx, _ = on_alter_partition(ctx, 2, 102, [AlterPartitionItem("t", 0, s.leader_epoch, (2, 3, 1), s.zk_version)])
    ctx, d = on_elect_leaders(ctx, ElectionType.PREFERRED, [T0])
    assert d.elect_leaders[T0] == 0 and ctx.states[T0].leader == 1
    assert ctx.states[T0].leader_epoch == s.leader_epoch + 1
    # unclean: only where no live leader
    _, d = on_elect_leaders(ctx, ElectionType.UNCLEAN, [T0])
    assert d.elect_leaders[T0] == ErrorCode.election_not_needed.value
    c2 = with_topic(context([1, 2]), "u", {0: [1, 2]})
    c2, _ = on_broker_change(c2, live(c2, 1))
    c2, _ = on_broker_change(c2, live(c2))
    c2, _ = on_broker_change(c2, live(c2, 2))
    c2, d = on_elect_leaders(c2, ElectionType.UNCLEAN, [("u", 0)])
    assert d.elect_leaders[("u", 0)] == 0 and c2.states[("u", 0)].leader == 2


def test_auto_leader_rebalance_moves_leadership_back() -> None:
    ctx = with_topic(context([1, 2]), "t", {0: [1, 2], 1: [2, 1]})
    ctx, _ = on_broker_change(ctx, live(ctx, 2))
    ctx, _ = on_broker_change(ctx, live(ctx, 1, 2))
    s = ctx.states[T0]
    ctx, _ = on_alter_partition(ctx, 2, 102, [AlterPartitionItem("t", 0, s.leader_epoch, (2, 1), s.zk_version)])
    assert ctx.states[T0].leader == 2
    ctx, d = on_auto_leader_rebalance(ctx)
    assert ctx.states[T0].leader == 1 and d.elect_leaders == {T0: 0}
    _, d = on_auto_leader_rebalance(ctx)
    assert d.writes() == 0


def test_reassignment_phases() -> None:
    ctx = with_topic(context([1, 2, 3, 4, 5]), "t", {0: [1, 2, 3]})
    ctx, d = on_partition_reassignment(ctx, {T0: [4, 5, 1]})
    assert d.reassign == {T0: 0}
    a = ctx.assignments["t"]
    assert a.partitions[0] == (4, 5, 1, 2, 3) and a.adding_replicas[0] == (4, 5) and a.removing_replicas[0] == (2, 3)
    assert d.set_assignments["t"] == a and d.reassignment_znode == {T0: (4, 5, 1)}
    assert ctx.states[T0].leader_epoch == 1 and set(leader_and_isr_to(d)) == {1, 2, 3, 4, 5}
    st = leader_and_isr_to(d)[4].partition_states[0]
    assert st.adding_replicas == (4, 5) and st.removing_replicas == (2, 3)
    # 4 catches up: not done yet
    s = ctx.states[T0]
    ctx, d = on_alter_partition(ctx, 1, 101, [AlterPartitionItem("t", 0, 1, (1, 2, 3, 4), s.zk_version)])
    assert T0 in ctx.reassignments and stop_replica_to(d) == {}
    # 5 catches up: leader moves to 4 (1 is in TRS and live: it stays leader), removed replicas stop
    s = ctx.states[T0]
    ctx, d = on_alter_partition(ctx, 1, 101, [AlterPartitionItem("t", 0, 1, (1, 2, 3, 4, 5), s.zk_version)])
    assert ctx.assignments["t"].partitions[0] == (4, 5, 1) and ctx.assignments["t"].adding_replicas == {}
    assert ctx.states[T0].leader == 1 and ctx.states[T0].isr == (1, 4, 5) and ctx.states[T0].leader_epoch == 2
    stops = stop_replica_to(d)
    assert sorted(stops) == [2, 3] and all(p.delete_partition for r in stops.values() for p in r.partition_states)
    assert d.reassignment_znode == {} and ctx.reassignments == {}
    # leader outside the target moves
    ctx, d = on_partition_reassignment(ctx, {T0: [2, 3]})
    s = ctx.states[T0]
    ctx, d = on_alter_partition(ctx, 1, 101, [AlterPartitionItem("t", 0, s.leader_epoch, (1, 4, 5, 2, 3),
                                                                  s.zk_version)])
    assert ctx.states[T0].leader == 2 and ctx.states[T0].isr == (2, 3)
    assert ctx.assignments["t"].partitions[0] == (2, 3)


def test_topic_deletion_stops_and_deletes_replicas_or_waits_for_dead_brokers() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2], 1: [2, 3]})
    ctx2, d = on_topic_deletion(ctx, ["t"])
    assert d.delete_topics == ["t"] and "t" not in ctx2.assignments and ctx2.states == {}
    stops = stop_replica_to(d)
    assert sorted(stops) == [1, 2, 3]
    assert all(p.delete_partition and p.leader_epoch == -2 for r in stops.values() for p in r.partition_states)
    um = update_metadata_to(d)[1]
    assert {s.leader for s in um.partition_states} == {LEADER_DURING_DELETE}
    # with broker 3 dead the topic waits
    ctx, _ = on_broker_change(ctx, live(ctx, 1, 2))
    ctx, d = on_topic_deletion(ctx, ["t"])
    assert d.delete_topics == [] and ctx.topics_to_be_deleted == {"t"}
    ctx, d = on_broker_change(ctx, live(ctx, 1, 2, 3))
    assert d.delete_topics == ["t"] and ctx.topics_to_be_deleted == frozenset()


def test_cancelled_reassignment_stops_the_added_replicas() -> None:
    ctx = with_topic(context([1, 2, 3]), "t", {0: [1, 2]})
    ctx, _ = on_partition_reassignment(ctx, {T0: [3, 1]})
    s = ctx.states[T0]
    ctx, _ = on_alter_partition(ctx, 1, 101, [AlterPartitionItem("t", 0, s.leader_epoch, (1, 2), s.zk_version)])
    ctx, d = on_partition_reassignment(ctx, {T0: None})
    assert d.reassign == {T0: 0} and ctx.reassignments == {}
    assert ctx.assignments["t"].partitions[0] == (1, 2) and ctx.assignments["t"].adding_replicas == {}
    stops = stop_replica_to(d)
    assert list(stops) == [3] and stops[3].partition_states[0].delete_partition
    _, d = on_partition_reassignment(ctx, {T0: None})
    assert d.reassign == {T0: ErrorCode.no_reassignment_in_progress.value}
