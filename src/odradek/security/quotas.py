"""Client quotas (KIP-13, KIP-124, KIP-55): which quota applies to a request, how fast a client
goes, and how long it is throttled. Pure: no I/O, time handed in (milliseconds).

Quota keys: ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes per second),
``request_percentage`` (percent of one network/IO thread's time), ``controller_mutation_rate``.

Entities (Kafka's ``/config/users/<user>/clients/<client-id>`` and friends) are pairs
``(user, client_id)`` where either may be a name, ``DEFAULT`` (``<default>``) or None (not
part of the entity). For one request and one key, the quota is the first of these eight that
sets the key (Kafka's precedence, docs/design.html "Quotas"):

1. (user, client-id)  2. (user, <default>)  3. (user, None)
4. (<default>, client-id)  5. (<default>, <default>)  6. (<default>, None)
7. (None, client-id)  8. (None, <default>)

The rate is then measured per the entity that matched, with names where the entity has
names: a quota on ``users/alice`` is shared by all of alice's clients; one on
``users/alice/clients/<default>`` applies to each of her client ids apart (Kafka's metric
tags). ``quota_tags`` gives those (user, client-id) tags.

``Rate`` is Kafka's windowed rate: ``quota.window.num`` samples (11) of
``quota.window.size.seconds`` (1) each; the rate is the total of the live samples over the
time they span, counted as at least ``samples - 1`` whole windows (so a burst right after a
quiet period is not divided by a tiny time). A client over its quota is throttled for
``(rate - quota) / quota * window`` milliseconds (Kafka's ``QuotaUtils.throttleTime``), at
most the whole window span.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

__all__ = [
    "DEFAULT",
    "DOUBLE_KEYS",
    "LONG_KEYS",
    "QUOTA_KEYS",
    "ClientQuotaEntity",
    "Rate",
    "TokenBucket",
    "java_double",
    "precedence",
    "quota_tags",
    "resolve_quota",
    "throttle_time_ms",
]

DEFAULT = "<default>"
"""The default entity name, as Kafka writes it in ZooKeeper and the protocol's null name."""

QUOTA_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)

LONG_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate"})
"""Kafka's LONG quota keys (whole numbers, written as such)."""
DOUBLE_KEYS = frozenset({"request_percentage", "controller_mutation_rate"})
"""Kafka's DOUBLE quota keys (written as Java's ``Double.toString``)."""

ClientQuotaEntity = tuple[str | None, str | None]
"""(user, client id): a name, DEFAULT, or None when the entity has no such part."""


def precedence(user: str, client_id: str) -> list[ClientQuotaEntity]:
    """The eight entities that may give a quota to ``user``'s client ``client_id``, most
    specific first."""
    return [
        (user, client_id),
        (user, DEFAULT),
        (user, None),
        (DEFAULT, client_id),
        (DEFAULT, DEFAULT),
        (DEFAULT, None),
        (None, client_id),
        (None, DEFAULT),
    ]


def resolve_quota(
    configs: Mapping[ClientQuotaEntity, Mapping[str, float]],
    user: str,
    client_id: str,
    key: str,
) -> tuple[float, ClientQuotaEntity] | None:
    """The quota ``key`` for the request, and the entity that set it (None: no quota)."""
    for entity in precedence(user, client_id):
        values = configs.get(entity)
        if values is not None and key in values:
            return float(values[key]), entity
    return None


def quota_tags(entity: ClientQuotaEntity, user: str, client_id: str) -> tuple[str, str]:
    """The (user, client-id) the rate is measured under for a quota set on ``entity``: the
    request's names where the entity has a name or <default>, "" where it has no part."""
    u, c = entity
    return ("" if u is None else user, "" if c is None else client_id)


@dataclass
class Rate:
    """A windowed rate (per second) of what is ``record``-ed (module docstring)."""

    samples: int = 11
    window_ms: int = 1000
    _starts: list[int] = field(default_factory=list)
    _totals: list[float] = field(default_factory=list)

    def _purge(self, now_ms: int) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._starts and self._starts[0] + self.window_ms <= horizon:
            self._starts.pop(0)
            self._totals.pop(0)

    def record(self, value: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._starts or now_ms >= self._starts[-1] + self.window_ms:
            self._starts.append(now_ms)
            self._totals.append(0.0)
            if len(self._starts) > self.samples:
                self._starts.pop(0)
                self._totals.pop(0)
        self._totals[-1] += value

    def window_size_ms(self, now_ms: int) -> int:
        """The time the live samples span, at least ``samples - 1`` whole windows."""
        self._purge(now_ms)
        oldest = self._starts[0] if self._starts else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        self._purge(now_ms)
        return sum(self._totals) * 1000.0 / self.window_size_ms(now_ms)


def throttle_time_ms(rate: Rate, quota: float, now_ms: int, max_ms: int | None = None) -> int:
    """How long a client measured by ``rate`` is throttled for ``quota`` (0 within it), at
    most ``max_ms`` (default: the whole window span)."""
    bound = rate.samples * rate.window_ms if max_ms is None else max_ms
    observed = rate.rate(now_ms)
    if quota <= 0:
        return bound
    if observed <= quota:
        return 0
    wait = round((observed - quota) / quota * rate.window_size_ms(now_ms))
    return min(wait, bound)


@dataclass
class TokenBucket:
    """Kafka's ``TokenBucket`` for ``controller_mutation_rate`` (module docstring). ``quota``
    is re-read on every call, so an altered quota applies at once."""

    samples: int = 11
    window_ms: int = 1000
    tokens: float | None = None
    """None: not used yet (full)."""
    last_ms: int = 0

    def _refill(self, quota: float, now_ms: int) -> float:
        burst = self.samples * self.window_ms / 1000 * quota
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return burst

    def record(self, quota: float, value: float, now_ms: int) -> None:
        burst = self._refill(quota, now_ms)
        assert self.tokens is not None
        self.tokens = min(burst, self.tokens - value)

    def throttle_time_ms(self, quota: float, now_ms: int) -> int:
        """0 while the bucket holds tokens, else the time to refill it to zero."""
        self._refill(quota, now_ms)
        assert self.tokens is not None
        if self.tokens >= 0:
            return 0
        if quota <= 0:
            return self.samples * self.window_ms
        return round(-self.tokens / quota * 1000)


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (``50.0``, ``0.5``, ``1.0E7``,
    ``1.0E-4``): how Kafka stores a DOUBLE quota in ZooKeeper. Finite values only."""
    v = float(value)
    if v == 0:
        return "-0.0" if math.copysign(1.0, v) < 0 else "0.0"
    sign = "-" if v < 0 else ""
    # the shortest digits that read back as the value (Python's repr, as Java's since 19)
    digits_t, exponent = Decimal(repr(abs(v))).normalize().as_tuple()[1:]
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t))
    point = len(digits) + exponent  # the decimal point's place in ``digits``
    if 1e-3 <= abs(v) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
