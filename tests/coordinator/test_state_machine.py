"""The classic group state machine: joins, syncs, heartbeats, leaves, timers, static members."""

from __future__ import annotations

import pytest

from odradek.coordinator.records import GroupMetadataRecord
from odradek.coordinator.state import (
    VALID_PREVIOUS_STATES,
    ClassicGroup,
    Errors,
    GroupState,
    IllegalStateTransition,
)

from .harness import Harness

S = GroupState


def test_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS_STATES[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.PREPARING_REBALANCE] == {
        S.EMPTY,
        S.STABLE,
        S.COMPLETING_REBALANCE,
    }
    assert VALID_PREVIOUS_STATES[S.DEAD] == set(S)
    g = ClassicGroup("g")
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.STABLE, 0)
    g.transition_to(S.PREPARING_REBALANCE, 0)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.PREPARING_REBALANCE, 0)


def test_two_step_join_and_first_generation() -> None:
    h = Harness(initial_rebalance_delay_ms=0)
    first = h.result(h.join())
    assert first.error is Errors.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("c-")
    assert h.m.groups["g"].state is S.EMPTY
    r = h.result(h.join(member_id=first.member_id))
    assert r.error is Errors.NONE
    assert r.generation_id == 1
    assert r.leader_id == r.member_id == first.member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert r.members == ((first.member_id, None, b"range-meta"),)
    assert h.m.groups["g"].state is S.COMPLETING_REBALANCE


def test_v3_join_gets_member_id_at_once() -> None:
    h = Harness(initial_rebalance_delay_ms=0)
    r = h.result(h.join(v4=False))
    assert r.error is Errors.NONE and r.member_id and r.generation_id == 1


def test_unknown_member_id_and_bad_session_timeout() -> None:
    h = Harness(min_session_timeout_ms=6000, max_session_timeout_ms=60_000)
    assert h.result(h.join(member_id="nobody", session=10_000)).error is Errors.UNKNOWN_MEMBER_ID
    assert h.result(h.join(session=100)).error is Errors.INVALID_SESSION_TIMEOUT
    assert h.result(h.join(session=100_000)).error is Errors.INVALID_SESSION_TIMEOUT
    assert h.result(h.join(group="")).error is Errors.INVALID_GROUP_ID


def test_initial_rebalance_delay_collects_members_and_is_extended() -> None:
    h = Harness(initial_rebalance_delay_ms=300)
    a = h.join_new(client_id="a", rebalance=1000)
    h.advance(200)
    b = h.join_new(client_id="b", rebalance=1000)
    assert not a.waiter.done and not b.waiter.done
    h.advance(100)  # first delay over, but a member arrived: extended by another delay
    assert not a.waiter.done
    h.advance(300)
    ra, rb = h.result(a), h.result(b)
    assert ra.error is rb.error is Errors.NONE
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader_id == ra.member_id  # the first member leads
    assert len(ra.members) == 2 and rb.members == ()


def test_initial_delay_is_bounded_by_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=300)
    a = h.join_new(client_id="a", rebalance=400)
    for i in range(5):
        h.advance(100)
        h.join_new(client_id=f"x{i}", rebalance=400)
        if a.waiter.done:
            break
    h.advance(300)
    assert a.waiter.done and h.result(a).error is Errors.NONE


def test_sync_delivers_assignments_after_the_leader_record_is_replayed() -> None:
    h = Harness()
    outs = [h.join_new(client_id=f"c{i}") for i in range(3)]
    h.advance(100)
    h.advance(100)
    res = [h.result(o) for o in outs]
    gen = res[0].generation_id
    leader = res[0].leader_id
    followers = [r.member_id for r in res if r.member_id != leader]
    parked = [h.sync(m, gen) for m in followers]
    assert not any(p.waiter.done for p in parked)
    n_log = len(h.log)
    lead = h.sync(leader, gen, [(r.member_id, r.member_id.encode()) for r in res])
    # exactly one GroupMetadata record with every assignment, replayed -> Stable
    (rec,) = h.log[n_log:]
    assert isinstance(rec, GroupMetadataRecord) and rec.value is not None
    assert {m.member_id: m.assignment for m in rec.value.members} == {
        r.member_id: r.member_id.encode() for r in res
    }
    assert h.m.groups["g"].state is S.STABLE
    assert h.result(lead).assignment == leader.encode()
    for mid, p in zip(followers, parked, strict=True):
        assert h.result(p).error is Errors.NONE
        assert h.result(p).assignment == mid.encode()
    # a late SyncGroup in Stable gets the assignment at once
    assert h.result(h.sync(followers[0], gen)).assignment == followers[0].encode()


def test_sync_errors() -> None:
    h = Harness()
    ids = h.stable_group(2)
    assert h.result(h.sync("nobody", 1)).error is Errors.UNKNOWN_MEMBER_ID
    assert h.result(h.sync(ids[0], 7)).error is Errors.ILLEGAL_GENERATION
    assert h.result(h.sync(ids[0], 1, group="other")).error is Errors.UNKNOWN_MEMBER_ID
    out = h.apply(h.m.sync_group("g", 1, ids[0], None, "consumer", "roundrobin", [], h.now))
    assert h.result(out).error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_heartbeat_errors_and_rebalance_signal() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.heartbeat(leader, 1) is Errors.NONE
    assert h.heartbeat("nobody", 1) is Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(leader, 2) is Errors.ILLEGAL_GENERATION
    assert h.heartbeat(leader, 1, group="nope") is Errors.UNKNOWN_MEMBER_ID
    # a third member joins -> the others learn it from their heartbeat
    h.join_new(client_id="c9")
    assert h.m.groups["g"].state is S.PREPARING_REBALANCE
    assert h.heartbeat(leader, 1) is Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat(follower, 1) is Errors.REBALANCE_IN_PROGRESS


def test_rebalance_completes_when_all_members_rejoin() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    newcomer = h.join_new(client_id="c9")
    rl = h.join(member_id=leader)
    assert not rl.waiter.done
    rf = h.join(member_id=follower)
    # all three joined: the join phase completes without waiting for a timer
    for o in (newcomer, rl, rf):
        assert h.result(o).error is Errors.NONE
        assert h.result(o).generation_id == 2
    assert h.result(rl).leader_id == leader
    assert len(h.result(rl).members) == 3


def test_session_timeout_removes_a_silent_member() -> None:
    h = Harness()
    leader, follower, other = h.stable_group(3, session=1000)
    for _ in range(3):
        h.advance(400)
        assert h.heartbeat(leader, 1) in (Errors.NONE, Errors.REBALANCE_IN_PROGRESS)
        assert h.heartbeat(follower, 1) in (Errors.NONE, Errors.REBALANCE_IN_PROGRESS)
    g = h.m.groups["g"]
    assert other not in g.members
    assert g.state is S.PREPARING_REBALANCE
    a, b = h.join(member_id=leader, session=1000), h.join(member_id=follower, session=1000)
    assert h.result(a).generation_id == h.result(b).generation_id == 2
    assert {m for m, _, _ in h.result(a).members} == {leader, follower}


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    leader, follower, other = h.stable_group(3, rebalance=2000, session=5000)
    h.join_new(client_id="new", rebalance=2000, session=5000)
    rl = h.join(member_id=leader, rebalance=2000, session=5000)
    h.heartbeat(follower, 1)  # alive, but never rejoins
    h.advance(1000)
    h.heartbeat(follower, 1)
    assert not rl.waiter.done
    h.advance(1000)
    r = h.result(rl)
    assert r.error is Errors.NONE and r.generation_id == 2
    assert {m for m, _, _ in r.members} == {leader, *(set(h.m.groups["g"].members) - {leader})}
    assert follower not in h.m.groups["g"].members and other not in h.m.groups["g"].members
    assert h.heartbeat(follower, 1) is Errors.UNKNOWN_MEMBER_ID


def test_leader_leaves_and_a_new_leader_is_chosen() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.leave([(leader, None)]) == [Errors.NONE]
    g = h.m.groups["g"]
    assert g.state is S.PREPARING_REBALANCE
    r = h.result(h.join(member_id=follower))
    assert r.error is Errors.NONE and r.leader_id == follower and r.generation_id == 2


def test_last_member_leaving_empties_the_group_and_persists_it() -> None:
    h = Harness()
    (only,) = h.stable_group(1)
    n = len(h.log)
    assert h.leave([(only, None)]) == [Errors.NONE]
    g = h.m.groups["g"]
    assert g.state is S.EMPTY and g.generation_id == 2 and not g.members
    (rec,) = h.log[n:]
    assert isinstance(rec, GroupMetadataRecord) and rec.value is not None
    assert rec.value.generation == 2 and rec.value.members == () and rec.value.protocol is None
    assert h.heartbeat(only, 2) is Errors.UNKNOWN_MEMBER_ID


def test_batched_leave() -> None:
    h = Harness()
    ids = h.stable_group(3, instance=None)
    errors = h.leave([(ids[1], None), ("ghost", None), (ids[2], None)])
    assert errors == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.NONE]
    assert list(h.m.groups["g"].members) == [ids[0]]
    assert h.leave([("x", None)], group="unknown") == [Errors.UNKNOWN_MEMBER_ID]


def test_leave_of_pending_member() -> None:
    h = Harness()
    pending = h.result(h.join()).member_id
    assert h.leave([(pending, None)]) == [Errors.NONE]
    assert pending not in h.m.groups["g"].pending_members


def test_pending_member_id_expires() -> None:
    h = Harness()
    pending = h.result(h.join(session=500)).member_id
    h.advance(600)
    assert h.result(h.join(member_id=pending, session=500)).error is Errors.UNKNOWN_MEMBER_ID


def test_protocol_selection_and_inconsistent_protocols() -> None:
    h = Harness()
    both = [("roundrobin", b"rr"), ("range", b"rg")]
    a = h.join_new(protocols=both, client_id="a")
    b = h.join_new(protocols=[("range", b"rg2"), ("roundrobin", b"rr2")], client_id="b")
    c = h.join_new(protocols=[("range", b"x")], client_id="c")
    assert h.result(h.join(protocols=[("sticky", b"")])).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.result(h.join(protocol_type="connect")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    h.advance(100)
    h.advance(100)
    # candidates = {range}; everyone votes range
    assert {h.result(o).protocol_name for o in (a, b, c)} == {"range"}
    assert dict((m, md) for m, _, md in h.result(a).members)[h.result(b).member_id] == b"rg2"


def test_vote_prefers_most_members_first_choice() -> None:
    h = Harness()
    outs = [
        h.join_new(protocols=[("roundrobin", b""), ("range", b"")], client_id="a"),
        h.join_new(protocols=[("roundrobin", b""), ("range", b"")], client_id="b"),
        h.join_new(protocols=[("range", b""), ("roundrobin", b"")], client_id="c"),
    ]
    h.advance(100)
    h.advance(100)
    assert {h.result(o).protocol_name for o in outs} == {"roundrobin"}


def test_empty_protocols_rejected_for_new_group() -> None:
    h = Harness()
    assert h.result(h.join(protocols=[])).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert "g" not in h.m.groups


def test_follower_rejoin_in_stable_without_change_does_not_rebalance() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    r = h.result(h.join(member_id=follower))
    assert r.error is Errors.NONE and r.generation_id == 1 and r.members == ()
    assert h.m.groups["g"].state is S.STABLE
    # the leader rejoining does start a rebalance (it may want to change the assignment)
    h.join(member_id=leader)
    assert h.m.groups["g"].state is S.PREPARING_REBALANCE


def test_changed_protocol_metadata_triggers_rebalance() -> None:
    h = Harness()
    _leader, follower = h.stable_group(2)
    h.join(member_id=follower, protocols=[("range", b"new-subscription")])
    assert h.m.groups["g"].state is S.PREPARING_REBALANCE


def test_completing_rebalance_retransmitted_join_is_answered_again() -> None:
    h = Harness(initial_rebalance_delay_ms=0)
    first = h.result(h.join_new())
    again = h.result(h.join(member_id=first.member_id))
    assert again.generation_id == first.generation_id and again.members == first.members
    assert h.m.groups["g"].state is S.COMPLETING_REBALANCE


def test_member_leaving_during_completing_rebalance_fails_parked_syncs() -> None:
    h = Harness()
    outs = [h.join_new(client_id=f"c{i}") for i in range(2)]
    h.advance(100)
    h.advance(100)
    res = [h.result(o) for o in outs]
    follower = next(r.member_id for r in res if r.member_id != r.leader_id)
    parked = h.sync(follower, 1)
    h.leave([(res[0].leader_id, None)])
    assert h.result(parked).error is Errors.REBALANCE_IN_PROGRESS
    assert h.m.groups["g"].state is S.PREPARING_REBALANCE


def test_sync_timeout_removes_members_that_never_sync() -> None:
    h = Harness()
    outs = [h.join_new(client_id=f"c{i}", rebalance=1000) for i in range(2)]
    h.advance(100)
    h.advance(100)
    res = [h.result(o) for o in outs]
    leader = res[0].leader_id
    follower = next(r.member_id for r in res if r.member_id != leader)
    h.sync(leader, 1, [(leader, b"a"), (follower, b"b")])
    assert h.m.groups["g"].state is S.STABLE
    h.heartbeat(follower, 1)
    h.heartbeat(leader, 1)
    h.advance(1001)
    g = h.m.groups["g"]
    assert follower not in g.members
    assert g.state is S.PREPARING_REBALANCE


# -- static membership --------------------------------------------------------------------


def test_static_member_rejoins_with_new_id_and_keeps_assignment_without_rebalance() -> None:
    h = Harness()
    ids = h.stable_group(3, instance=None)
    # turn the group into one with a static member: join a static member and rebalance
    h2 = Harness()
    outs = [h2.join(client_id=f"s{i}", instance=f"inst-{i}") for i in range(3)]
    h2.advance(100)
    h2.advance(100)
    res = [h2.result(o) for o in outs]
    assert all(r.error is Errors.NONE and r.generation_id == 1 for r in res)
    leader = res[0].leader_id
    h2.sync(leader, 1, [(r.member_id, f"asg-{i}".encode()) for i, r in enumerate(res)])
    g = h2.m.groups["g"]
    assert g.state is S.STABLE
    old_id = res[2].member_id
    # the member restarts: no member id, same instance id, same protocols
    n = len(h2.log)
    r = h2.result(h2.join(client_id="s2", instance="inst-2"))
    assert r.error is Errors.NONE
    assert r.member_id != old_id and r.generation_id == 1 and r.members == ()
    assert g.state is S.STABLE
    assert g.static_members["inst-2"] == r.member_id
    # the new member id is persisted
    (rec,) = h2.log[n:]
    assert isinstance(rec, GroupMetadataRecord) and rec.value is not None
    assert r.member_id in {m.member_id for m in rec.value.members}
    sync = h2.result(h2.sync(r.member_id, 1, instance="inst-2"))
    assert sync.error is Errors.NONE and sync.assignment == b"asg-2"
    # the old incarnation is fenced
    assert h2.heartbeat(old_id, 1, instance="inst-2") is Errors.FENCED_INSTANCE_ID
    assert h2.result(h2.sync(old_id, 1, instance="inst-2")).error is Errors.FENCED_INSTANCE_ID
    assert (
        h2.result(h2.join(member_id=old_id, instance="inst-2")).error is Errors.FENCED_INSTANCE_ID
    )
    assert h2.commit({("t", 0): 1}, generation=1, member_id=old_id, instance="inst-2") == [
        Errors.FENCED_INSTANCE_ID
    ]
    assert ids  # the dynamic group is untouched by all this
    assert h.m.groups["g"].state is S.STABLE


def test_static_member_rejoin_with_other_protocol_rebalances() -> None:
    h = Harness()
    outs = [
        h.join(client_id=f"s{i}", instance=f"i{i}", protocols=[("range", b""), ("rr", b"")])
        for i in range(2)
    ]
    h.advance(100)
    h.advance(100)
    res = [h.result(o) for o in outs]
    h.sync(res[0].leader_id, 1, [])
    assert h.m.groups["g"].state is S.STABLE
    # both members now only support rr -> next generation selects rr -> rebalance
    h.join(instance="i1", protocols=[("rr", b"")])
    h.join(member_id=res[0].member_id, instance="i0", protocols=[("rr", b"")])
    assert h.m.groups["g"].state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)


def test_static_member_leave_by_instance_id() -> None:
    h = Harness()
    outs = [h.join(client_id=f"s{i}", instance=f"i{i}") for i in range(2)]
    h.advance(100)
    h.advance(100)
    ids = [h.result(o).member_id for o in outs]
    assert h.leave([("", "i1")]) == [Errors.NONE]
    assert ids[1] not in h.m.groups["g"].members
    assert h.leave([("wrong-id", "i0")]) == [Errors.FENCED_INSTANCE_ID]
    assert h.leave([("", "nope")]) == [Errors.UNKNOWN_MEMBER_ID]


def test_static_member_session_expiry() -> None:
    h = Harness()
    outs = [h.join(client_id=f"s{i}", instance=f"i{i}", session=1000) for i in range(2)]
    h.advance(100)
    h.advance(100)
    ids = [h.result(o).member_id for o in outs]
    h.sync(h.result(outs[0]).leader_id, 1, [])
    for _ in range(4):
        h.advance(300)
        h.heartbeat(ids[0], 1, instance="i0")
    g = h.m.groups["g"]
    assert ids[1] not in g.members and "i1" not in g.static_members


def test_next_deadline_ignores_members_kept_alive_by_parked_requests() -> None:
    h = Harness()
    leader, follower = h.stable_group(2, session=1000, rebalance=60_000)
    g = h.m.groups["g"]
    assert g.next_deadline_ms() == min(m.heartbeat_deadline_ms for m in g.members.values())
    # the leader rejoins (parked until the follower rejoins or 60 s pass)
    h.join(member_id=leader, session=1000, rebalance=60_000)
    h.advance(900)
    assert h.heartbeat(follower, 1) is Errors.REBALANCE_IN_PROGRESS
    h.advance(900)
    # the leader's heartbeat deadline passed, but its parked join keeps it alive: not a timer
    assert g.members[leader].heartbeat_deadline_ms < h.now
    deadline = g.next_deadline_ms()
    assert deadline is not None and deadline >= h.now
    assert h.m.next_deadline_ms() == deadline


def test_kafka_python_leader_rejoin_sequence_matches_kafka() -> None:
    """kafka-python's leader rejoins with unchanged metadata when topic metadata changed (new
    partitions): as in Kafka's GroupCoordinator (Stable + JoinGroup from the leader ->
    updateMemberAndRebalance), the join is parked until the follower, told by its heartbeat,
    rejoins; both get generation 2 at once, the leader with every member's metadata; the
    SyncGroups deliver the leader's new assignment. (The kafka-python 3.0 member that never
    applies this answer is a client bug: tests/interop/test_groups_scenarios.py,
    _unstick_kafka_python.)"""
    h = Harness()
    leader, follower = h.stable_group(2)
    rl = h.join(member_id=leader)
    assert not rl.waiter.done and h.m.groups["g"].state is S.PREPARING_REBALANCE
    assert h.heartbeat(follower, 1) is Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat(leader, 1) is Errors.REBALANCE_IN_PROGRESS  # parked join keeps it alive
    rf = h.join(member_id=follower)
    jl, jf = h.result(rl), h.result(rf)
    assert (jl.error, jl.generation_id, jl.leader_id) == (Errors.NONE, 2, leader)
    assert (jf.error, jf.generation_id, jf.leader_id) == (Errors.NONE, 2, leader)
    assert sorted(m[0] for m in jl.members) == sorted([leader, follower]) and jf.members == ()
    assert h.m.groups["g"].state is S.COMPLETING_REBALANCE
    assert h.heartbeat(follower, 2) is Errors.NONE  # CompletingRebalance: heartbeats are fine
    sf = h.sync(follower, 2)
    assert not sf.waiter.done
    sl = h.sync(leader, 2, [(leader, b"p0p1"), (follower, b"p2p3")])
    assert h.result(sl).assignment == b"p0p1" and h.result(sf).assignment == b"p2p3"
    assert h.m.groups["g"].state is S.STABLE
    # a SyncGroup of the completed generation (a retry) gets the same assignment back
    assert h.result(h.sync(follower, 2)).assignment == b"p2p3"
    assert h.result(h.sync(follower, 1)).error is Errors.ILLEGAL_GENERATION


def test_single_member_leader_rejoin_is_answered_at_once() -> None:
    """The only member (the leader) rejoining while Stable: a new generation at once, no timer
    (group.initial.rebalance.delay.ms applies to an Empty group only, as in Kafka)."""
    h = Harness(initial_rebalance_delay_ms=100)
    (leader,) = h.stable_group(1)
    r = h.result(h.join(member_id=leader))
    assert r is not None and (r.error, r.generation_id, r.leader_id) == (Errors.NONE, 2, leader)
    assert [m[0] for m in r.members] == [leader]
    assert h.result(h.sync(leader, 2, [(leader, b"both")])).assignment == b"both"
    assert h.m.groups["g"].state is S.STABLE
