"""KIP-345 static membership and what KIP-429 (cooperative rebalancing) needs from the broker,
on GroupMetadataManager alone (records replayed by the harness, time explicit)."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.records import GroupMetadataRecord, OffsetCommitRecord
from odradek.coordinator.state import Errors, GroupState, JoinResult

from .harness import Harness

S = GroupState


def static_group(h: Harness, n: int, **kw: Any) -> list[JoinResult]:
    """n static members (instance ids i0..), generation 1, synced: join results (member order)."""
    outs = [h.join(client_id=f"s{i}", instance=f"i{i}", **kw) for i in range(n)]
    for _ in range(10):
        if all(o.waiter is not None and o.waiter.done for o in outs):
            break
        h.advance(50)
    res = [h.result(o) for o in outs]
    assert all(r is not None and r.error is Errors.NONE and r.generation_id == 1 for r in res)
    leader = res[0].leader_id
    h.sync(leader, 1, [(r.member_id, f"asg-{i}".encode()) for i, r in enumerate(res)])
    for r in res:
        if r.member_id != leader:
            assert h.result(h.sync(r.member_id, 1)).error is Errors.NONE
    assert h.m.groups["g"].state is S.STABLE
    return res


def test_static_member_that_does_not_rejoin_is_kept_until_its_session_times_out() -> None:
    h = Harness()
    res = static_group(h, 2, session=6000, rebalance=20_000)
    ids = [r.member_id for r in res]
    g = h.m.groups["g"]
    # a new dynamic member joins: rebalance; only member 0 rejoins, member 1 is down
    newcomer = h.join_new(client_id="d")
    h.join(member_id=ids[0], instance="i0", session=6000, rebalance=20_000)
    assert g.state is S.PREPARING_REBALANCE
    # member 1 heartbeats within its session, not yet rejoining: the rebalance waits for it
    h.advance(3000)
    assert h.heartbeat(ids[1], 1, instance="i1") is Errors.REBALANCE_IN_PROGRESS
    h.advance(5000)  # member 1's session (6 s from its last heartbeat) is still running
    assert g.state is S.PREPARING_REBALANCE and ids[1] in g.members
    # member 1 goes silent: its session expires, it is removed, the join completes without it
    h.advance(1100)
    assert ids[1] not in g.members and "i1" not in g.static_members
    assert g.state is S.COMPLETING_REBALANCE and g.generation_id == 2
    assert h.result(newcomer).error is Errors.NONE


def test_rebalance_timeout_keeps_static_members_in_the_next_generation() -> None:
    h = Harness()
    res = static_group(h, 2, session=60_000, rebalance=5000)
    ids = [r.member_id for r in res]
    g = h.m.groups["g"]
    rejoin = h.join(member_id=ids[0], instance="i0", session=60_000, rebalance=5000)
    assert g.state is S.PREPARING_REBALANCE
    h.advance(5000)  # rebalance timeout: member 1 did not rejoin but is static: kept
    assert g.state is S.COMPLETING_REBALANCE and g.generation_id == 2
    assert set(g.members) == set(ids) and g.static_members["i1"] == ids[1]
    r = h.result(rejoin)
    assert r.error is Errors.NONE and r.leader_id == ids[0]
    # the leader gets every member, the one that did not rejoin included, with its metadata
    assert {(mid, iid) for mid, iid, _ in r.members} == {(ids[0], "i0"), (ids[1], "i1")}
    # a dynamic member that did not rejoin would have been dropped (Kafka's onCompleteJoin)
    d = Harness()
    dyn = d.stable_group(2, session=60_000, rebalance=5000)
    d.join(member_id=dyn[0], session=60_000, rebalance=5000)
    d.advance(5000)
    assert set(d.m.groups["g"].members) == {dyn[0]}


def test_static_leader_that_does_not_rejoin_hands_leadership_to_a_rejoined_member() -> None:
    h = Harness()
    res = static_group(h, 2, session=60_000, rebalance=5000)
    leader, follower = res[0].member_id, res[1].member_id
    g = h.m.groups["g"]
    assert g.leader_id == leader
    # the follower's subscription changed: rebalance; the leader (down) never rejoins
    out = h.join(
        member_id=follower,
        instance="i1",
        session=60_000,
        rebalance=5000,
        protocols=[("range", b"other-topics")],
    )
    assert g.state is S.PREPARING_REBALANCE
    h.advance(5000)
    r = h.result(out)
    assert r.error is Errors.NONE and r.leader_id == follower == g.leader_id
    assert len(r.members) == 2 and leader in g.members


def test_join_is_postponed_while_no_member_has_rejoined() -> None:
    h2 = Harness()
    res = static_group(h2, 2, session=20_000, rebalance=5000)
    g2 = h2.m.groups["g"]
    # force a rebalance with a new pending member that then goes away
    pending = h2.result(h2.join(client_id="x"))
    assert pending.error is Errors.MEMBER_ID_REQUIRED
    out = h2.join(member_id=pending.member_id, client_id="x", session=20_000, rebalance=5000)
    assert g2.state is S.PREPARING_REBALANCE
    assert h2.leave([(pending.member_id, None)]) == [Errors.NONE]
    assert h2.result(out).error is Errors.UNKNOWN_MEMBER_ID
    h2.advance(5000)  # rebalance timeout: nobody rejoined, only static members: wait again
    assert g2.state is S.PREPARING_REBALANCE and g2.generation_id == 1
    # the static members rejoin within their sessions and the generation completes
    outs = [
        h2.join(member_id=r.member_id, instance=f"i{i}", session=20_000, rebalance=5000)
        for i, r in enumerate(res)
    ]
    assert g2.state is S.COMPLETING_REBALANCE and g2.generation_id == 2
    assert all(h2.result(o).error is Errors.NONE for o in outs)


def _restart_static_leader(v9: bool) -> tuple[Harness, list[JoinResult], JoinResult]:
    h = Harness()
    res = static_group(h, 3)
    assert res[0].leader_id == res[0].member_id
    n = len(h.log)
    r = h.result(h.join(client_id="s0", instance="i0", v9=v9))  # the leader restarts
    assert r.error is Errors.NONE and r.member_id != res[0].member_id
    assert r.generation_id == 1 and h.m.groups["g"].state is S.STABLE
    (rec,) = h.log[n:]  # the new member id is persisted, nothing else happens
    assert isinstance(rec, GroupMetadataRecord) and rec.value is not None
    assert rec.value.leader == r.member_id
    return h, res, r


def test_static_leader_restart_before_join_v9_syncs_as_follower_without_rebalance() -> None:
    h, res, r = _restart_static_leader(v9=False)
    # JoinGroup < v9: the old member id is named leader and no members are sent, so the
    # restarted leader does not assign; it syncs and gets its assignment back
    assert r.leader_id == res[0].member_id and r.members == () and not r.skip_assignment
    sync = h.result(h.sync(r.member_id, 1, instance="i0"))
    assert sync.error is Errors.NONE and sync.assignment == b"asg-0"
    g = h.m.groups["g"]
    assert g.state is S.STABLE and g.generation_id == 1 and g.leader_id == r.member_id
    # the old incarnation is fenced everywhere
    old = res[0].member_id
    assert h.heartbeat(old, 1, instance="i0") is Errors.FENCED_INSTANCE_ID
    assert h.result(h.sync(old, 1, instance="i0")).error is Errors.FENCED_INSTANCE_ID
    assert h.commit({("t", 0): 5}, generation=1, member_id=old, instance="i0") == [
        Errors.FENCED_INSTANCE_ID
    ]
    assert h.leave([(old, "i0")]) == [Errors.FENCED_INSTANCE_ID]
    # followers keep heartbeating in the same generation: no rebalance was triggered
    assert h.heartbeat(res[1].member_id, 1, instance="i1") is Errors.NONE


def test_static_leader_restart_with_join_v9_skips_assignment() -> None:
    h, _res, r = _restart_static_leader(v9=True)
    assert r.leader_id == r.member_id and r.skip_assignment
    assert {iid for _, iid, _ in r.members} == {"i0", "i1", "i2"}
    assert h.result(h.sync(r.member_id, 1, instance="i0")).assignment == b"asg-0"


def test_static_follower_restart_while_the_old_incarnation_is_parked_fences_it() -> None:
    h = Harness()
    res = static_group(h, 2, rebalance=5000)
    old = res[1].member_id
    parked = h.join(member_id=res[0].member_id, instance="i0", rebalance=5000)
    old_join = h.join(member_id=old, instance="i1", rebalance=5000)
    # both rejoined: generation 2; now the follower's old process is still waiting on sync
    assert h.m.groups["g"].state is S.COMPLETING_REBALANCE
    old_sync = h.sync(old, 2, instance="i1")
    assert old_sync.waiter is not None and not old_sync.waiter.done
    fresh = h.join(client_id="s1", instance="i1", rebalance=5000)  # the restarted process
    assert h.result(old_sync).error is Errors.FENCED_INSTANCE_ID
    assert h.m.groups["g"].state is S.PREPARING_REBALANCE  # CompletingRebalance -> rebalance
    assert h.result(parked).error is Errors.NONE and h.result(old_join).error is Errors.NONE
    h.join(member_id=res[0].member_id, instance="i0", rebalance=5000)
    r = h.result(fresh)
    assert r.error is Errors.NONE and r.generation_id == 3 and r.member_id != old


def test_instance_id_the_group_does_not_know_is_unknown_member() -> None:
    h = Harness()
    res = static_group(h, 1)
    mid = res[0].member_id
    assert h.heartbeat(mid, 1, instance="other") is Errors.UNKNOWN_MEMBER_ID
    assert h.result(h.sync(mid, 1, instance="other")).error is Errors.UNKNOWN_MEMBER_ID
    assert h.result(h.join(member_id=mid, instance="other")).error is Errors.UNKNOWN_MEMBER_ID
    assert h.commit({("t", 0): 1}, generation=1, member_id=mid, instance="other") == [
        Errors.UNKNOWN_MEMBER_ID
    ]


def test_leave_group_by_instance_id_alone_removes_the_static_member() -> None:
    h = Harness()
    res = static_group(h, 2)
    g = h.m.groups["g"]
    assert h.leave([("", "i1"), ("", "i9")]) == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID]
    assert res[1].member_id not in g.members and g.state is S.PREPARING_REBALANCE


def test_new_member_waiting_in_a_long_rebalance_outlives_its_session_timeout() -> None:
    """A parked first JoinGroup is bounded by the new-member join timeout (5 min in Kafka),
    not by the session timeout: the member cannot heartbeat before it has joined."""
    h = Harness()
    res = static_group(h, 1, session=60_000, rebalance=60_000)
    newcomer = h.join_new(client_id="d", session=6000, rebalance=60_000)
    g = h.m.groups["g"]
    assert g.state is S.PREPARING_REBALANCE
    h.advance(10_000)  # longer than the newcomer's session timeout, the old member still away
    assert g.state is S.PREPARING_REBALANCE and len(g.members) == 2
    h.join(member_id=res[0].member_id, instance="i0", session=60_000, rebalance=60_000)
    r = h.result(newcomer)
    assert r.error is Errors.NONE and r.generation_id == 2


def test_cooperative_members_keep_partitions_through_two_rebalances() -> None:
    """KIP-429 from the broker: the protocol is opaque, but each rebalance must hand the leader
    every member's latest subscription (with its owned partitions), keep the members and the
    generation moving, and accept commits of the current generation while rebalancing."""
    coop = "cooperative-sticky"
    h = Harness()
    a = h.join_new(client_id="a", protocols=[(coop, b"owned:none")])
    h.advance(100)
    ra = h.result(a)
    assert ra.generation_id == 1
    h.sync(ra.member_id, 1, [(ra.member_id, b"a:p0,p1")])
    # b joins: first rebalance; a keeps consuming and commits while the rebalance runs
    b = h.join_new(client_id="b", protocols=[(coop, b"owned:none")])
    assert h.heartbeat(ra.member_id, 1) is Errors.REBALANCE_IN_PROGRESS
    assert h.commit({("t", 0): 10}, generation=1, member_id=ra.member_id) == [Errors.NONE]
    a2 = h.join(member_id=ra.member_id, protocols=[(coop, b"owned:p0,p1")])
    r = h.result(a2)
    assert r.generation_id == 2 and r.leader_id == ra.member_id
    meta = {mid: m for mid, _, m in r.members}
    assert meta[ra.member_id] == b"owned:p0,p1"  # the leader sees what a owns
    rb = h.result(b)
    # the assignor revokes p1 from a first: a keeps p0, b gets nothing yet
    h.sync(ra.member_id, 2, [(ra.member_id, b"a:p0"), (rb.member_id, b"")])
    assert h.result(h.sync(rb.member_id, 2)).assignment == b""
    # second rebalance (a revoked p1): both rejoin with what they own now
    a3 = h.join(member_id=ra.member_id, protocols=[(coop, b"owned:p0")])
    b3 = h.join(member_id=rb.member_id, protocols=[(coop, b"owned:none")])
    r3 = h.result(a3)
    assert r3.generation_id == 3 and h.result(b3).generation_id == 3
    assert {mid: m for mid, _, m in r3.members}[ra.member_id] == b"owned:p0"
    h.sync(ra.member_id, 3, [(ra.member_id, b"a:p0"), (rb.member_id, b"b:p1")])
    assert h.result(h.sync(rb.member_id, 3)).assignment == b"b:p1"
    g = h.m.groups["g"]
    assert g.state is S.STABLE and g.offsets[("t", 0)].offset == 10
    assert h.heartbeat(ra.member_id, 3) is Errors.NONE


def test_delete_groups_sees_a_static_session_that_ran_out_before_the_timer_fired() -> None:
    """KIP-345 members send no LeaveGroup on close: the group empties when the session expires.
    A DeleteGroups handled after that deadline, before the timer task has woken, deletes the
    group (Kafka's heartbeat timer fires within a millisecond of the deadline)."""
    h = Harness()
    (res,) = static_group(h, 1, session=6000)
    g = h.m.groups["g"]
    assert h.commit({("t", 0): 100}, generation=1, member_id=res.member_id, instance="i0") == [
        Errors.NONE
    ]  # the commit on close
    closed = h.now
    h.now = closed + 6000 - 1  # the clock moves; no tick yet
    out = h.apply(h.m.delete_groups(["g"], h.now))
    assert out.response == [Errors.NON_EMPTY_GROUP] and out.records == []
    h.now = closed + 6000
    out = h.apply(h.m.delete_groups(["g"], h.now))
    assert out.response == [Errors.NONE]
    # the expiry's records (the group Empty, generation 2) precede the tombstones
    assert [type(r) for r in out.records] == [
        GroupMetadataRecord,
        OffsetCommitRecord,
        GroupMetadataRecord,
    ]
    assert out.records[0].value is not None and out.records[-1].value is None
    assert g.state is S.DEAD or "g" not in h.m.groups
