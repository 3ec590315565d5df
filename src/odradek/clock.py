"""Injected time: storage and coordinator code take a ``Clock`` instead of calling ``time``."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time in milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (timeouts, intervals); never goes back."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when a test advances it."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._monotonic = 0.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time never goes back")
        self._now_ms += ms
        self._monotonic += ms / 1000.0
