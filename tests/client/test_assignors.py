from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.aio._group import (
    assign_cooperative_sticky,
    assign_range,
    assign_roundrobin,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.client.types import TopicPartition as TP


def test_range_like_java() -> None:
    members = {"c0": (["t0", "t1"], []), "c1": (["t0", "t1"], [])}
    out = assign_range(members, {"t0": 3, "t1": 3})
    assert out == {"c0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)], "c1": [TP("t0", 2), TP("t1", 2)]}


def test_roundrobin_like_java() -> None:
    members = {"c0": (["t0", "t1"], []), "c1": (["t0", "t1"], [])}
    out = assign_roundrobin(members, {"t0": 3, "t1": 3})
    assert out == {"c0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)], "c1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}


def test_roundrobin_respects_subscriptions() -> None:
    members = {"a": (["t0"], []), "b": (["t0", "t1"], [])}
    out = assign_roundrobin(members, {"t0": 2, "t1": 2})
    assert TP("t1", 0) in out["b"] and TP("t1", 1) in out["b"]
    assert all(tp.topic == "t0" for tp in out["a"])


def test_cooperative_sticky_keeps_owned_and_withholds_moves() -> None:
    # c0 owned everything; c1 joins: c0 keeps half, the other half is withheld (revoked first)
    owned = [TP("t", p) for p in range(4)]
    out = assign_cooperative_sticky({"c0": (["t"], owned), "c1": (["t"], [])}, {"t": 4})
    assert len(out["c0"]) == 2 and set(out["c0"]) <= set(owned)
    assert out["c1"] == []  # handed over in the follow-up rebalance
    # next round: c0 owns its 2, the rest is free and goes to c1
    out2 = assign_cooperative_sticky({"c0": (["t"], out["c0"]), "c1": (["t"], [])}, {"t": 4})
    assert set(out2["c0"]) == set(out["c0"]) and len(out2["c1"]) == 2


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 5), st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 7), min_size=1))
def test_assignors_cover_each_partition_once(n_members: int, topics: dict[str, int]) -> None:
    members = {f"m{i}": (sorted(topics), []) for i in range(n_members)}
    all_tps = {TP(t, p) for t, n in topics.items() for p in range(n)}
    for fn in (assign_range, assign_roundrobin, assign_cooperative_sticky):
        out = fn(members, topics)
        got = [tp for tps in out.values() for tp in tps]
        assert sorted(got) == sorted(all_tps), fn.__name__
        sizes = [len(v) for v in out.values()]
        if fn is not assign_range:
            assert max(sizes) - min(sizes) <= 1


def test_consumer_protocol_roundtrip() -> None:
    owned = [TP("b", 1), TP("a", 0)]
    topics, got_owned, ud = decode_subscription(encode_subscription(["b", "a"], owned, b"x"))
    assert topics == ["a", "b"] and sorted(got_owned) == sorted(owned) and ud == b"x"
    assert sorted(decode_assignment(encode_assignment(owned))) == sorted(owned)
    assert decode_assignment(b"") == []


def test_consumer_protocol_bytes_match_java_layout() -> None:
    # ConsumerProtocolSubscription v0: version, topics, user_data (null)
    assert encode_subscription(["t"], version=0) == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    # ConsumerProtocolAssignment v1 for t-[0,2], null user data
    assert encode_assignment([TP("t", 0), TP("t", 2)]) == (
        b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x02" + b"\xff\xff\xff\xff"
    )
