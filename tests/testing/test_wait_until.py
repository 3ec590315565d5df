"""odradek.testing.helpers.wait_until: returns the condition's value, fails naming what it
awaited, and wakes on an event instead of sleeping out its interval."""

from __future__ import annotations

import threading
import time

import pytest

from odradek.testing.helpers import wait_until


def test_returns_the_first_true_value() -> None:
    answers = iter([0, None, [], {"ready": True}])
    assert wait_until(lambda: next(answers), timeout=5) == {"ready": True}


def test_timeout_names_what_was_awaited() -> None:
    with pytest.raises(AssertionError, match=r"timed out after 0.05 s waiting for the moon"):
        wait_until(lambda: False, 0.05, "the moon")


def test_timeout_without_a_name_shows_the_condition() -> None:
    items: list[int] = []
    with pytest.raises(AssertionError, match=r"waiting for len\(items\) == 3"):
        wait_until(lambda: len(items) == 3, timeout=0.05)


def test_asks_once_more_at_the_deadline() -> None:
    calls: list[float] = []

    def late() -> bool:
        calls.append(time.monotonic())
        return len(calls) >= 3

    assert wait_until(late, timeout=0.02, interval=0.05)
    assert len(calls) == 3


def test_an_event_ends_the_pause_at_once() -> None:
    changed = threading.Event()
    state: list[int] = []

    def change() -> None:
        state.append(1)
        changed.set()

    timer = threading.Timer(0.05, change)
    timer.start()
    try:
        t0 = time.monotonic()
        assert wait_until(lambda: state, timeout=10, interval=5.0, max_interval=5.0, event=changed)
        assert time.monotonic() - t0 < 2.0  # woken by the event, not after the 5 s pause
    finally:
        timer.cancel()
