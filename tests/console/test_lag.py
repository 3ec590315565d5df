"""Lag in offsets and seconds, time to clear, LagHistory (pure code, time injected)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.metrics.lag import (
    NOT_CLEARING,
    LagHistory,
    LagSample,
    lag_seconds,
    offset_lag,
    time_to_clear,
)


def test_offset_lag_never_negative() -> None:
    assert offset_lag(40, 100) == 60
    assert offset_lag(100, 100) == 0
    assert offset_lag(120, 100) == 0


def test_lag_seconds() -> None:
    assert lag_seconds(10_000, 4_000, 60) == 6.0
    assert lag_seconds(10_000, 4_000, 0) == 0.0  # caught up
    assert lag_seconds(10_000, None, 5) is None  # unknown timestamp
    assert lag_seconds(10_000, 12_000, 5) == 0.0  # producer clock ahead


def test_time_to_clear_cases() -> None:
    # consumes 20/s, produces 10/s, lag 100 -> 10 s
    assert time_to_clear([LagSample(0, 0, 100), LagSample(1000, 20, 110)]) == 90 / 10
    # consumers not gaining
    assert time_to_clear([LagSample(0, 0, 100), LagSample(1000, 10, 110)]) == NOT_CLEARING
    # caught up
    assert time_to_clear([LagSample(0, 100, 100)]) == 0.0
    # not enough history
    assert time_to_clear([LagSample(0, 0, 100)]) is None
    assert time_to_clear([]) is None
    assert time_to_clear([LagSample(0, 0, 100), LagSample(500, 20, 100)]) is None


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**4),
    st.integers(0, 10**4),
    st.integers(1000, 10**6),
)
def test_time_to_clear_is_consistent(c0: int, lag0: int, dc: int, de: int, dt: int) -> None:
    first = LagSample(0, c0, c0 + lag0)
    last = LagSample(dt, c0 + dc, c0 + lag0 + de)
    result = time_to_clear([first, last])
    if last.lag == 0:
        assert result == 0.0
    elif dc <= de:
        assert result == NOT_CLEARING
    else:
        assert result is not None and result > 0
        # at the measured rates the lag reaches 0 after `result` seconds
        gain_per_s = (dc - de) * 1000 / dt
        assert abs(result * gain_per_s - last.lag) < 1e-6 * max(1, last.lag)


def test_history_keeps_a_window_and_forgets() -> None:
    h = LagHistory(keep_ms=10_000, rate_window_ms=5_000)
    for i in range(20):
        h.record("g", "t", 0, LagSample(i * 1000, i * 10, 200 + i * 5))
    series = h.series("g", "t", 0)
    assert series[0].at_ms == 9_000 and series[-1].at_ms == 19_000
    h.record("g", "t", 0, LagSample(19_000, 0, 0))  # not newer: ignored
    assert h.series("g", "t", 0)[-1].committed == 190
    # rate over the last 5 s: consume 10/s, produce 5/s, lag 200 + 95 - 190 = 105 -> 21 s
    assert h.time_to_clear("g", "t", 0) == 105 / 5
    assert h.group_keys("g") == [("t", 0)]
    h.forget(set())
    assert h.series("g", "t", 0) == [] and h.time_to_clear("g", "t", 0) is None
