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
