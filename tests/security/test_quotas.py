"""Quota precedence and the windowed rate, against Kafka's rules read directly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.quotas import (
    DEFAULT,
    Rate,
    precedence,
    quota_tags,
    resolve_quota,
    throttle_time_ms,
)

USERS = st.sampled_from([None, DEFAULT, "alice", "bob"])
CLIENTS = st.sampled_from([None, DEFAULT, "app", "cli"])
ENTITIES = st.tuples(USERS, CLIENTS).filter(lambda e: e != (None, None))


def test_precedence_is_kafkas_eight_levels() -> None:
    assert precedence("alice", "app") == [
        ("alice", "app"),
        ("alice", DEFAULT),
        ("alice", None),
        (DEFAULT, "app"),
        (DEFAULT, DEFAULT),
        (DEFAULT, None),
        (None, "app"),
        (None, DEFAULT),
    ]


@settings(max_examples=300, deadline=None)
@given(
    configs=st.dictionaries(ENTITIES, st.integers(1, 10**6), max_size=8),
    user=st.sampled_from(["alice", "bob"]),
    client=st.sampled_from(["app", "cli"]),
)
def test_the_most_specific_entity_that_applies_wins(
    configs: dict[tuple[str | None, str | None], int], user: str, client: str
) -> None:
    def applies(entity: tuple[str | None, str | None]) -> bool:
        u, c = entity
        return u in (None, DEFAULT, user) and c in (None, DEFAULT, client)

    def specificity(entity: tuple[str | None, str | None]) -> tuple[int, int]:
        # a named user beats <default> beats none; then the same for the client id
        rank = {None: 0, DEFAULT: 1}
        u, c = entity
        user_rank = 2 if u == user else rank[u]
        client_rank = 2 if c == client else rank[c]
        # Kafka orders user-level entities before client-only ones; None user ranks last
        return (user_rank if u is not None else -1, client_rank)

    stored = {e: {"producer_byte_rate": v} for e, v in configs.items()}
    got = resolve_quota(stored, user, client, "producer_byte_rate")
    candidates = [e for e in configs if applies(e)]
    if not candidates:
        assert got is None
        return
    best = max(candidates, key=specificity)
    assert got == (float(configs[best]), best)


def test_tags_share_a_user_quota_across_clients() -> None:
    assert quota_tags(("alice", None), "alice", "app") == ("alice", "")
    assert quota_tags(("alice", DEFAULT), "alice", "app") == ("alice", "app")
    assert quota_tags((None, DEFAULT), "alice", "app") == ("", "app")


def test_rate_and_throttle() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(10_000, 0)
    # one burst at t=0 spread over the minimum 10 windows: 1000 B/s
    assert rate.rate(0) == 1000.0
    assert throttle_time_ms(rate, 1000.0, 0) == 0
    assert throttle_time_ms(rate, 500.0, 0) == 10_000  # (1000-500)/500 * 10 s, capped at 11 s
    rate.record(10_000, 500)
    # 20,000 B over 0.5 s counted as 10.5 s: 1904.8 B/s; (1904.8 - 1000) / 1000 * 10.5 s
    assert rate.window_size_ms(500) == 10_500
    assert throttle_time_ms(rate, 1000.0, 500) == 9_500
    # samples older than the window are forgotten
    assert rate.rate(30_000) == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 10_000)), max_size=40))
def test_rate_is_never_negative_and_throttle_bounded(events: list[tuple[int, int]]) -> None:
    rate = Rate()
    now = 0
    for step, value in events:
        now += step
        rate.record(value, now)
        assert rate.rate(now) >= 0
        assert 0 <= throttle_time_ms(rate, 1000.0, now) <= 11_000


# -- KIP-599's token bucket, KIP-124's request time, Kafka's spellings ------------------------


def test_token_bucket_starts_full_and_refills_at_the_quota() -> None:
    from odradek.security.quotas import TokenBucket

    bucket = TokenBucket(samples=2, window_ms=1000)  # burst = 2 s * quota
    assert bucket.throttle_time_ms(5.0, 0) == 0
    bucket.record(5.0, 10.0, 0)  # the burst: exactly empty
    assert bucket.throttle_time_ms(5.0, 0) == 0
    bucket.record(5.0, 5.0, 0)  # -5 tokens: one second to refill at 5/s
    assert bucket.throttle_time_ms(5.0, 0) == 1000
    assert bucket.throttle_time_ms(5.0, 600) == 400
    assert bucket.throttle_time_ms(5.0, 1000) == 0
    assert bucket.throttle_time_ms(5.0, 60_000) == 0
    bucket.record(5.0, 25.0, 60_000)  # refilled to the burst only (10), not beyond
    assert bucket.throttle_time_ms(5.0, 60_000) == 3000


def test_strict_mutation_quota_refuses_once_exceeded_and_permissive_never_does() -> None:
    from odradek.clock import ManualClock
    from odradek.security.quota_store import QuotaStore

    clock = ManualClock()
    store = QuotaStore(mutation_samples=2, mutation_window_ms=1000)
    store.configs[(None, "admin")] = {"controller_mutation_rate": 2.0}  # burst 4
    assert store.mutation_quota("ANONYMOUS", "other", True, clock) is None
    strict = store.mutation_quota("ANONYMOUS", "admin", True, clock)
    assert strict is not None
    assert strict.record(6)  # accepted: the bucket was not below zero (4 - 6 = -2)
    assert strict.throttle_time_ms() == 0  # Kafka: a strict quota throttles only on refusal
    assert not strict.record(1)  # refused: 1 s to refill
    assert strict.throttle_time_ms() == 1000
    clock.advance(400)
    assert strict.throttle_time_ms() == 600
    # the bucket is shared by the client's requests; an old version's is permissive
    permissive = store.mutation_quota("ANONYMOUS", "admin", False, clock)
    assert permissive is not None
    assert permissive.record(1) and permissive.record(1)
    assert permissive.throttle_time_ms() == round((1.2 + 2) / 2 * 1000)
    clock.advance(5000)
    again = store.mutation_quota("ANONYMOUS", "admin", True, clock)
    assert again is not None and again.record(1) and again.throttle_time_ms() == 0


def test_request_time_is_a_percentage_of_one_thread_and_throttles_at_most_a_window() -> None:
    from odradek.clock import ManualClock
    from odradek.security.quota_store import QuotaStore

    clock = ManualClock()
    store = QuotaStore(samples=2, window_ms=1000)
    store.configs[("alice", None)] = {"request_percentage": 10.0}
    assert store.record_request_time("bob", "x", 1.0, clock) == 0  # no quota for bob
    # 50 ms of handler time over the (at least) one-second window: 5 % of a thread
    assert store.record_request_time("alice", "x", 0.05, clock) == 0
    # 200 ms more: 25 % against 10 %, throttled (25 - 10) / 10 * 1 s, bounded by one window
    assert store.record_request_time("alice", "y", 0.2, clock) == 1000
    clock.advance(3000)  # both samples expired
    assert store.record_request_time("alice", "x", 0.001, clock) == 0


def test_java_double_spelling() -> None:
    from odradek.security.quotas import java_double

    cases = {50: "50.0", 0.5: "0.5", 12.5: "12.5", 1e7: "1.0E7", 1.5e7: "1.5E7",
             1e-4: "1.0E-4", 0.001: "0.001", 9999999.0: "9999999.0", 2e20: "2.0E20"}  # fmt: skip
    for value, text in cases.items():
        assert java_double(value) == text


def test_quota_entities_from_change_notifications() -> None:
    from odradek.broker.zk_quota_store import parse_entity_path

    assert parse_entity_path("users/alice") == ("alice", None)
    assert parse_entity_path("users/%3Cdefault%3E/clients/<default>") == ("<default>", DEFAULT)
    assert parse_entity_path("users/<default>/clients/a%20b") == (DEFAULT, "a b")
    assert parse_entity_path("clients/app") == (None, "app")
    assert parse_entity_path("topics/t") is None
    assert parse_entity_path("brokers/<default>") is None


def test_throttle_time_set_in_kio_and_hand_encoded_responses() -> None:
    import datetime
    import struct

    from kio.schema.create_topics.v7.response import CreateTopicsResponse
    from kio.static.primitive import i32Timedelta

    from odradek.broker.api import EncodedResponse
    from odradek.broker.request_quota import is_exempt, with_throttle_time
    from odradek.protocol.produce_response import encode_produce_response

    kio = CreateTopicsResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)), topics=())
    assert with_throttle_time(19, 7, kio, 250).throttle_time == datetime.timedelta(milliseconds=250)
    for version in (7, 9):
        body = encode_produce_response(version, [("t", [(0, 0, 5, -1, 0, (), None)])])
        patched = with_throttle_time(0, version, EncodedResponse((body,), len(body)), 300)
        again = encode_produce_response(
            version, [("t", [(0, 0, 5, -1, 0, (), None)])], throttle_time_ms=300
        )
        assert patched.parts[0] == again
    # a larger throttle already there (a byte-rate quota) stays
    body = struct.pack(">i", 900) + b"rest"
    kept = with_throttle_time(1, 11, EncodedResponse((body,), len(body)), 300)
    assert kept.parts[0] == body
    assert is_exempt(4, None) and not is_exempt(3, None)
