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

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT",
    "QUOTA_KEYS",
    "ClientQuotaEntity",
    "Rate",
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


def throttle_time_ms(rate: Rate, quota: float, now_ms: int) -> int:
    """How long a client measured by ``rate`` is throttled for ``quota`` (0 within it)."""
    observed = rate.rate(now_ms)
    if quota <= 0:
        return rate.samples * rate.window_ms
    if observed <= quota:
        return 0
    wait = round((observed - quota) / quota * rate.window_size_ms(now_ms))
    return min(wait, rate.samples * rate.window_ms)
