"""Consumer lag: in offsets, in seconds, and the time it will take to clear. Pure functions.

* offset lag = log end offset - committed offset, never below 0 (Kafka's and
  kafka_exporter's definition; the high watermark is the end a consumer can reach);
* lag in seconds = now - timestamp of the first record the group has not consumed (the record at
  the committed offset, or the oldest record still in the log when retention deleted it); 0 when
  caught up;
* time to clear: from two samples (t, committed, end) at least ``min_window_ms`` apart, the
  consume rate c = d(committed)/dt and the produce rate p = d(end)/dt; lag / (c - p) seconds
  when c > p, ``NOT_CLEARING`` (-1) when the group does not gain on the producers, 0 when caught
  up, None when there are not enough samples yet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "NOT_CLEARING",
    "LagHistory",
    "LagSample",
    "lag_seconds",
    "offset_lag",
    "time_to_clear",
]

NOT_CLEARING = -1.0
"""time_to_clear when the consumers do not gain on the producers."""


class LagSample(NamedTuple):
    """One observation of a group's partition: when (ms), committed offset, log end offset."""

    at_ms: int
    committed: int
    end: int

    @property
    def lag(self) -> int:
        return offset_lag(self.committed, self.end)


def offset_lag(committed: int, end: int) -> int:
    return max(end - committed, 0)


def lag_seconds(now_ms: int, first_unconsumed_timestamp_ms: int | None, lag: int) -> float | None:
    """0.0 when caught up; None when the lag is not 0 but the record's timestamp is unknown.
    A timestamp in the future (clock skew between producers and the broker) counts as 0."""
    if lag <= 0:
        return 0.0
    if first_unconsumed_timestamp_ms is None or first_unconsumed_timestamp_ms < 0:
        return None
    return max(now_ms - first_unconsumed_timestamp_ms, 0) / 1000.0


def time_to_clear(samples: Iterable[LagSample], min_window_ms: int = 1000) -> float | None:
    """Seconds until the lag reaches 0 at the current rates (see the module docstring).
    ``samples`` are oldest first; the first and the last are compared."""
    items = list(samples)
    if not items:
        return None
    last = items[-1]
    if last.lag == 0:
        return 0.0
    first = items[0]
    dt_ms = last.at_ms - first.at_ms
    if dt_ms < min_window_ms:
        return None
    consume = (last.committed - first.committed) * 1000.0 / dt_ms
    produce = (last.end - first.end) * 1000.0 / dt_ms
    gain = consume - produce
    if gain <= 0:
        return NOT_CLEARING
    return last.lag / gain


class LagHistory:
    """The last ``keep_ms`` of samples per (group, topic, partition), for charts and rates.
    ``record`` ignores a sample no newer than the last one kept for that key."""

    def __init__(self, keep_ms: int = 15 * 60_000, rate_window_ms: int = 60_000) -> None:
        self.keep_ms = keep_ms
        self.rate_window_ms = rate_window_ms
        self._series: dict[tuple[str, str, int], deque[LagSample]] = {}

    def record(self, group: str, topic: str, partition: int, sample: LagSample) -> None:
        key = (group, topic, partition)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque()
        elif series and series[-1].at_ms >= sample.at_ms:
            return
        series.append(sample)
        horizon = sample.at_ms - self.keep_ms
        while series and series[0].at_ms < horizon:
            series.popleft()

    def forget(self, keep: set[tuple[str, str, int]]) -> None:
        """Drop the series whose key is not in ``keep`` (deleted groups and topics)."""
        for key in [k for k in self._series if k not in keep]:
            del self._series[key]

    def series(self, group: str, topic: str, partition: int) -> list[LagSample]:
        return list(self._series.get((group, topic, partition), ()))

    def group_keys(self, group: str) -> list[tuple[str, int]]:
        return sorted((t, p) for g, t, p in self._series if g == group)

    def time_to_clear(self, group: str, topic: str, partition: int) -> float | None:
        series = self._series.get((group, topic, partition))
        if not series:
            return None
        horizon = series[-1].at_ms - self.rate_window_ms
        window = [s for s in series if s.at_ms >= horizon]
        return time_to_clear(window)
