"""Where client quota configs are kept, and how DescribeClientQuotas filters them.

An entity is ``(user, client_id)`` as in ``odradek.security.quotas``: each part a name,
``DEFAULT`` (``<default>``, the protocol's null name) or None (not part of the entity). Each
entity holds quota values by key (``QUOTA_KEYS``); an entity left with no value is dropped.

Formats:

* ZooKeeper (Kafka's layout, for a cluster): ``/config/users/<user>``,
  ``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>`` (``<default>``
  for a default name), each ``{"version":1,"config":{"producer_byte_rate":"1024",...}}`` (values
  as strings); a change is announced by ``/config/changes/config_change_<10 digits>`` =
  ``{"version":2,"entity_path":"users/alice"}``. ``entity_path``, ``encode_config`` and
  ``change_notification`` give those; this module's stores do not use ZooKeeper yet.
* The file store (a single broker): ``<data dir>/quotas.json`` =
  ``{"version":1,"quotas":[{"user":"alice","client-id":null,"config":{"producer_byte_rate":1024.0}}]}``
  (null: no such part; ``<default>`` as written), rewritten whole (temporary file, fsync,
  rename) on every change. A broker without a data directory keeps its quotas in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from odradek.security.quotas import (
    DEFAULT,
    QUOTA_KEYS,
    ClientQuotaEntity,
    Rate,
    quota_tags,
    resolve_quota,
    throttle_time_ms,
)

if TYPE_CHECKING:
    from odradek.clock import Clock

__all__ = [
    "CLIENT_ID",
    "MATCH_ANY",
    "MATCH_DEFAULT",
    "MATCH_EXACT",
    "USER",
    "ClientQuotaManager",
    "FileQuotaStore",
    "QuotaFilterComponent",
    "QuotaOp",
    "QuotaStore",
    "change_notification",
    "encode_config",
    "entity_path",
    "open_quota_store",
]

USER = "user"
CLIENT_ID = "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
"""DescribeClientQuotas' match types: a name, the default name, any specified name."""


@dataclass(frozen=True)
class QuotaOp:
    """One change to an entity: set ``key`` to ``value``, or remove it."""

    key: str
    value: float
    remove: bool


@dataclass(frozen=True)
class QuotaFilterComponent:
    """One component of a DescribeClientQuotas filter (``match`` a name for MATCH_EXACT)."""

    entity_type: str
    match_type: int
    match: str | None = None


def entity_path(entity: ClientQuotaEntity) -> str:
    """The entity's path under ``/config`` (``users/alice/clients/<default>``); names are
    URL-encoded as Kafka's ``Sanitizer`` does."""
    user, client = entity
    parts: list[str] = []
    if user is not None:
        parts += ["users", user if user == DEFAULT else quote(user, safe="")]
    if client is not None:
        parts += ["clients", client if client == DEFAULT else quote(client, safe="")]
    return "/".join(parts)


def encode_config(values: Mapping[str, float]) -> bytes:
    """An entity znode's data (Kafka writes quota values as strings)."""
    config = {k: _number(v) for k, v in sorted(values.items())}
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()


def change_notification(entity: ClientQuotaEntity) -> tuple[str, bytes]:
    """(parent path, data) of the sequential znode announcing a change of ``entity``."""
    data = {"version": 2, "entity_path": entity_path(entity)}
    return "/config/changes", json.dumps(data, separators=(",", ":")).encode()


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def validate_entity(entity: ClientQuotaEntity) -> str | None:
    """Why the entity is refused (None: valid)."""
    user, client = entity
    if user is None and client is None:
        return "Invalid empty client quota entity"
    for name in (user, client):
        if name is not None and name == "":
            return "Empty entity name"
    return None


def validate_op(op: QuotaOp) -> str | None:
    """Why the change is refused (None: valid): Kafka's checks of key and value."""
    if op.key not in QUOTA_KEYS:
        return f"Invalid configuration key {op.key}"
    if op.remove:
        return None
    if op.value <= 0:
        return f"Invalid quota value {op.value} for {op.key}: it must be positive"
    if op.key in ("producer_byte_rate", "consumer_byte_rate") and not float(op.value).is_integer():
        return f"Invalid value {op.value} for {op.key}: it must be a whole number"
    return None


def _matches(name: str | None, c: QuotaFilterComponent) -> bool:
    if name is None:
        return False
    if c.match_type == MATCH_EXACT:
        return name == c.match
    if c.match_type == MATCH_DEFAULT:
        return name == DEFAULT
    return True


class ClientQuotaManager:
    """The rates clients go at, and their throttle times (Kafka's ``ClientQuotaManager``).
    Pure: time handed in. ``record`` adds a request's value (bytes, or percent of a thread's
    time) to the rate of the entity whose quota applies (``quota_tags``: one rate per
    user, per client id, or per both) and answers the throttle time (0: within the quota or
    no quota). A quota changed by AlterClientQuotas applies to the next request."""

    def __init__(
        self,
        configs: Mapping[ClientQuotaEntity, Mapping[str, float]],
        samples: int = 11,
        window_ms: int = 1000,
    ) -> None:
        self.configs = configs
        self.samples, self.window_ms = samples, window_ms
        self._rates: dict[tuple[str, str, str], Rate] = {}

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        if not self.configs:
            return 0
        found = resolve_quota(self.configs, user, client_id, key)
        if found is None:
            return 0
        quota, entity = found
        tags = quota_tags(entity, user, client_id)
        rate = self._rates.get((key, *tags))
        if rate is None:
            rate = self._rates[(key, *tags)] = Rate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        return throttle_time_ms(rate, quota, now_ms)


class QuotaStore:
    """Quota configs in memory (a broker without a data directory); subclasses persist.
    ``configs`` is the mapping ``resolve_quota`` reads; ``manager`` measures and throttles."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.configs: dict[ClientQuotaEntity, dict[str, float]] = {}
        self.manager = ClientQuotaManager(self.configs, samples, window_ms)

    def record(
        self,
        key: str,
        user: str,
        client_id: str | None,
        value: float,
        clock: Clock,
        mute: Callable[[int], None] | None,
        *,
        unrecord_if_throttled: bool = False,
    ) -> int:
        """Add a request's ``value`` to the client's rate for quota ``key``, ``mute`` its
        connection for the throttle time, and answer it (0: within the quota, or no quota).
        With ``unrecord_if_throttled`` a throttled request's value is taken back (Kafka's
        Fetch: a throttled consumer is answered without records, so they do not count)."""
        if not self.configs:  # no quota at all: nothing to measure
            return 0
        manager, client = self.manager, client_id or ""
        now_ms = clock.now_ms()
        ms = manager.record(key, user, client, value, now_ms)
        if ms > 0:
            if unrecord_if_throttled:
                manager.record(key, user, client, -value, now_ms)
            if mute is not None:
                mute(ms)
        return ms

    def _persist(self) -> None:
        """Write the configs (nothing here)."""

    def alter(
        self, changes: Sequence[tuple[ClientQuotaEntity, Sequence[QuotaOp]]], validate_only: bool
    ) -> list[str | None]:
        """Apply each entity's ops (all of an entity's or none); per entity None or why it
        was refused."""
        results: list[str | None] = []
        changed = False
        for entity, ops in changes:
            error = validate_entity(entity) or next(
                (e for e in map(validate_op, ops) if e is not None), None
            )
            if error is None and len({op.key for op in ops}) != len(ops):
                error = "Duplicate quota key in one entity's changes"
            results.append(error)
            if error is not None or validate_only:
                continue
            values = dict(self.configs.get(entity, {}))
            for op in ops:
                if op.remove:
                    values.pop(op.key, None)
                else:
                    values[op.key] = float(op.value)
            if values:
                self.configs[entity] = values
            else:
                self.configs.pop(entity, None)
            changed = True
        if changed:
            self._persist()
        return results

    def describe(
        self, components: Sequence[QuotaFilterComponent], strict: bool
    ) -> list[tuple[ClientQuotaEntity, dict[str, float]]]:
        """The entities the filter matches (Kafka's rules): every component must match the
        entity's part of its type; with ``strict`` the entity has no other part."""
        out = []
        for entity, values in sorted(self.configs.items(), key=lambda kv: repr(kv[0])):
            parts = {USER: entity[0], CLIENT_ID: entity[1]}
            if not all(_matches(parts.get(c.entity_type), c) for c in components):
                continue
            if strict:
                named = {t for t, n in parts.items() if n is not None}
                if named != {c.entity_type for c in components}:
                    continue
            out.append((entity, dict(values)))
        return out

    def close(self) -> None:
        pass


class FileQuotaStore(QuotaStore):
    """Quota configs in ``<data dir>/quotas.json`` (module docstring)."""

    FILE = "quotas.json"

    def __init__(self, data_dir: Path, samples: int = 11, window_ms: int = 1000) -> None:
        super().__init__(samples, window_ms)
        self.path = data_dir / self.FILE
        if self.path.exists():
            obj = json.loads(self.path.read_text())
            for q in obj.get("quotas") or []:
                entity = (q.get("user"), q.get("client-id"))
                self.configs[entity] = {str(k): float(v) for k, v in q["config"].items()}

    def _persist(self) -> None:
        quotas = [
            {"user": u, "client-id": c, "config": values}
            for (u, c), values in sorted(self.configs.items(), key=lambda kv: repr(kv[0]))
        ]
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "quotas": quotas}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def open_quota_store(values: Any, data_dir: Path | None) -> QuotaStore:
    """The broker's quota store: the file in its data directory, else memory; ``values`` is
    the broker config (``get(key)``: ``quota.window.num``, ``quota.window.size.seconds``)."""
    samples = int(values.get("quota.window.num") or 11)
    window_ms = int(values.get("quota.window.size.seconds") or 1) * 1000
    if data_dir is None:
        return QuotaStore(samples, window_ms)
    return FileQuotaStore(data_dir, samples, window_ms)
