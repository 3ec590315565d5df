"""Offsets (commit/fetch/delete/expiry), DeleteGroups, ListGroups, DescribeGroups, and replay:
state rebuilt from the records alone equals the live state."""

from __future__ import annotations

from odradek.coordinator.group_manager import GroupMetadataManager
from odradek.coordinator.records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    decode_record,
    encode_record,
)
from odradek.coordinator.state import Errors, GroupConfig, GroupState, parse_assignment

from .harness import Harness

S = GroupState


def _subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


def test_commit_is_pure_until_replayed() -> None:
    h = Harness()
    out = h.m.commit_offsets("g", -1, "", None, [], h.now)
    assert out.records == [] and out.response == []
    from odradek.coordinator.group_manager import OffsetCommitEntry

    out = h.m.commit_offsets("g", -1, "", None, [OffsetCommitEntry("t", 0, 5, 2, "m")], h.now)
    assert out.response == [Errors.NONE]
    assert "g" not in h.m.groups  # nothing changed yet
    (rec,) = out.records
    assert isinstance(rec, OffsetCommitRecord)
    h.apply(out)
    om = h.m.groups["g"].offsets[("t", 0)]
    assert (om.offset, om.leader_epoch, om.metadata, om.commit_timestamp_ms) == (5, 2, "m", h.now)


def test_simple_group_commit_and_fetch() -> None:
    h = Harness()
    assert (
        h.commit({("t", 0): 10, ("t", 1): 20, ("u", 0): 5}, metadata="hello") == [Errors.NONE] * 3
    )
    g = h.m.groups["g"]
    assert g.state is S.EMPTY and g.protocol_type is None
    fetched = h.m.fetch_offsets("g", [("t", [0, 1, 2])])
    assert [(p, om.offset if om else -1) for p, om in fetched[0][1]] == [(0, 10), (1, 20), (2, -1)]
    everything = h.m.fetch_offsets("g", None)
    assert [(t, [p for p, _ in parts]) for t, parts in everything] == [("t", [0, 1]), ("u", [0])]
    assert h.m.fetch_offsets("unknown", None) == []
    assert h.m.fetch_offsets("unknown", [("t", [0])]) == [("t", [(0, None)])]


def test_commit_metadata_too_large() -> None:
    h = Harness()
    errors = h.commit({("t", 0): 1}, metadata="x" * 4097)
    assert errors == [Errors.OFFSET_METADATA_TOO_LARGE]
    assert h.commit({("t", 0): 1}, metadata="x" * 4096) == [Errors.NONE]


def test_member_commits_validated_against_generation() -> None:
    h = Harness()
    leader, follower = h.stable_group(2)
    assert h.commit({("t", 0): 1}, generation=1, member_id=leader) == [Errors.NONE]
    assert h.commit({("t", 0): 1}, generation=2, member_id=leader) == [Errors.ILLEGAL_GENERATION]
    assert h.commit({("t", 0): 1}, generation=1, member_id="x") == [Errors.UNKNOWN_MEMBER_ID]
    assert h.commit({("t", 0): 1}) == [Errors.UNKNOWN_MEMBER_ID]  # generation -1, group not empty
    assert h.commit({("t", 0): 1}, group="fresh", generation=3, member_id="m") == [
        Errors.ILLEGAL_GENERATION
    ]
    # commits are allowed while preparing a rebalance (consumers commit before revoking) ...
    h.join_new(client_id="new")
    assert h.m.groups["g"].state is S.PREPARING_REBALANCE
    assert h.commit({("t", 1): 7}, generation=1, member_id=follower) == [Errors.NONE]
    # ... but not between the join and the sync of the new generation
    a = h.join(member_id=leader)
    h.join(member_id=follower)
    assert h.result(a).generation_id == 2
    assert h.m.groups["g"].state is S.COMPLETING_REBALANCE
    assert h.commit({("t", 1): 8}, generation=2, member_id=follower) == [
        Errors.REBALANCE_IN_PROGRESS
    ]


def test_offset_delete() -> None:
    h = Harness()
    h.commit({("t", 0): 1, ("t", 1): 2, ("other", 0): 3})
    out = h.apply(h.m.delete_offsets("g", [("t", 0), ("t", 9)]))
    assert out.response == (Errors.NONE, [Errors.NONE, Errors.NONE])
    assert set(h.m.groups["g"].offsets) == {("t", 1), ("other", 0)}
    assert h.m.delete_offsets("nope", [("t", 0)]).response == (Errors.GROUP_ID_NOT_FOUND, [])


def test_offset_delete_refuses_subscribed_topics_of_active_group() -> None:
    h = Harness()
    ids = h.stable_group(2, protocols=[("range", _subscription("t"))])
    h.commit({("t", 0): 1, ("other", 0): 3}, generation=1, member_id=ids[0])
    out = h.apply(h.m.delete_offsets("g", [("t", 0), ("other", 0)]))
    assert out.response == (Errors.NONE, [Errors.GROUP_SUBSCRIBED_TO_TOPIC, Errors.NONE])
    assert set(h.m.groups["g"].offsets) == {("t", 0)}


def test_delete_groups() -> None:
    h = Harness()
    h.stable_group(1, group="busy")
    h.commit({("t", 0): 1}, group="idle")
    out = h.apply(h.m.delete_groups(["idle", "busy", "ghost"], h.now))
    assert out.response == [Errors.NONE, Errors.NON_EMPTY_GROUP, Errors.GROUP_ID_NOT_FOUND]
    assert [type(r) for r in out.records] == [OffsetCommitRecord, GroupMetadataRecord]
    assert "idle" not in h.m.groups
    assert h.apply(h.m.delete_groups(["idle"], h.now)).response == [Errors.GROUP_ID_NOT_FOUND]


def test_offsets_retention_for_empty_groups() -> None:
    minute = 60_000
    h = Harness(offsets_retention_ms=10 * minute)
    h.commit({("t", 0): 1}, group="simple")
    (only,) = h.stable_group(1, group="consumer")
    h.commit({("t", 0): 1}, group="consumer", generation=1, member_id=only)
    h.now += 5 * minute
    h.leave([(only, None)], group="consumer")  # becomes Empty now
    h.now += 6 * minute
    for r in h.m.expire_offsets(h.now):
        h.log.append(r)
        h.m.replay(r)
    # the simple group's offset is 11 minutes old -> expired, group deleted
    assert "simple" not in h.m.groups
    # the consumer group became Empty 6 minutes ago -> kept
    assert h.m.groups["consumer"].offsets
    h.now += 5 * minute
    for r in h.m.expire_offsets(h.now):
        h.m.replay(r)
    assert "consumer" not in h.m.groups


def test_active_groups_keep_their_offsets() -> None:
    h = Harness(offsets_retention_ms=1000)
    (only,) = h.stable_group(1, session=60_000)
    h.commit({("t", 0): 1}, generation=1, member_id=only)
    h.now += 5000
    assert h.m.expire_offsets(h.now) == []


def test_list_and_describe() -> None:
    h = Harness()
    ids = h.stable_group(2, group="a")
    h.commit({("t", 0): 1}, group="b")
    assert sorted(h.m.list_groups()) == [
        ("a", "consumer", "Stable", "classic"),
        ("b", "", "Empty", "classic"),
    ]
    assert h.m.list_groups(["stable"]) == [("a", "consumer", "Stable", "classic")]
    assert h.m.list_groups(["Empty"]) == [("b", "", "Empty", "classic")]
    assert h.m.list_groups(types_filter=["consumer"]) == []
    d = h.m.describe_group("a")
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in d.members] == ids
    assert d.members[0].assignment == f"assign-{ids[0]}".encode()
    assert d.members[0].client_host == "/127.0.0.1"
    ghost = h.m.describe_group("ghost")
    assert ghost.state == "Dead" and ghost.members == ()
    # no metadata/assignment outside Stable
    h.join_new(group="a", client_id="x")
    d = h.m.describe_group("a")
    assert (
        d.state == "PreparingRebalance"
        and d.protocol_data == ""
        and all(m.assignment == b"" for m in d.members)
    )


def test_replay_of_the_log_rebuilds_the_same_state() -> None:
    h = Harness()
    ids = h.stable_group(3, group="a")
    h.commit({("t", 0): 11, ("t", 1): 12}, group="a", generation=1, member_id=ids[1])
    h.commit({("t", 0): 5}, group="b", metadata="m")
    h.commit({("t", 0): 6}, group="b")
    h.commit({("x", 0): 1}, group="c")
    h.apply(h.m.delete_groups(["c"], h.now))
    (solo,) = h.stable_group(1, group="d")
    h.leave([(solo, None)], group="d")
    # through the wire format and back
    records = []
    for r in h.log:
        key, value = encode_record(r)
        records.append(decode_record(key, value))
    fresh = GroupMetadataManager(GroupConfig())
    for r in records:
        fresh.replay(r, loading=True)
    fresh.finish_loading(fresh.groups, h.now)
    assert set(fresh.groups) == {"a", "b", "d"}
    a, live = fresh.groups["a"], h.m.groups["a"]
    assert a.state is S.STABLE and a.generation_id == live.generation_id == 1
    assert a.leader_id == live.leader_id and a.protocol_name == "range"
    assert {m: x.assignment for m, x in a.members.items()} == {
        m: x.assignment for m, x in live.members.items()
    }
    assert a.offsets == live.offsets
    assert fresh.groups["b"].offsets[("t", 0)].offset == 6
    d = fresh.groups["d"]
    assert d.state is S.EMPTY and d.generation_id == 2 and not d.members
    # loaded members keep heartbeating with their generation; silent ones expire
    now = h.now
    assert fresh.heartbeat("a", 1, ids[0], None, now) is Errors.NONE
    fresh.tick(now + 5_000)
    assert fresh.groups["a"].state is S.STABLE
    records = fresh.tick(now + 20_000)  # every member silent for a session: the group empties
    assert fresh.groups["a"].state is S.EMPTY and fresh.groups["a"].generation_id == 2
    assert [type(r) for r in records] == [GroupMetadataRecord]


def test_parse_assignment() -> None:
    raw = (
        b"\x00\x00"
        + (1).to_bytes(4, "big")
        + b"\x00\x01t"
        + (2).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
        + (3).to_bytes(4, "big")
        + b"\xff\xff\xff\xff"
    )
    assert parse_assignment(raw) == [("t", [0, 3])]
