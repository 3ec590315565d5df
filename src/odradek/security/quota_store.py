"""Where client quota configs are kept, and how DescribeClientQuotas filters them.

An entity is ``(user, client_id)`` as in ``odradek.security.quotas``: each part a name,
``DEFAULT`` (``<default>``, the protocol's null name) or None (not part of the entity). Each
entity holds quota values by key (``QUOTA_KEYS``); an entity left with no value is dropped.

Formats:

* ZooKeeper (Kafka's layout, for a cluster): ``/config/users/<user>``,
  ``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>`` (``<default>``
  for a default name, other names ``sanitize``-d), each
  ``{"version":1,"config":{"request_percentage":"50.0","producer_byte_rate":"1024"}}``: values
  as strings (``config_value``: LONG keys whole, DOUBLE keys as Java's ``Double.toString``),
  keys in the order Java's ``Properties`` iterates them (``java_properties_order``), so that
  the bytes are Kafka's; a change is announced by ``/config/changes/config_change_<10 digits>``
  = ``{"version":2,"entity_path":"users/alice"}``. ``entity_path``,
  ``encode_entity_config`` and ``change_notification`` give those;
  ``odradek.broker.zk_quota_store`` reads and writes them.
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
from urllib.parse import quote, unquote

from odradek.security.quotas import (
    DEFAULT,
    LONG_KEYS,
    QUOTA_KEYS,
    ClientQuotaEntity,
    Rate,
    TokenBucket,
    java_double,
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
    "ControllerMutationQuota",
    "FileQuotaStore",
    "QuotaFilterComponent",
    "QuotaOp",
    "QuotaStore",
    "apply_ops",
    "change_notification",
    "config_value",
    "desanitize",
    "encode_config",
    "encode_entity_config",
    "entity_path",
    "java_properties_order",
    "open_quota_store",
    "quota_windows",
    "sanitize",
    "validate_change",
    "validate_entity",
    "validate_op",
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


def sanitize(name: str) -> str:
    """A name as Kafka's ``Sanitizer.sanitize`` writes it in a znode path: URL-encoded (UTF-8)
    with only ``A-Za-z0-9._-`` kept (``*`` is ``%2A``, a space ``%20``, ``~`` ``%7E``)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """The inverse of ``sanitize`` (Kafka's ``Sanitizer.desanitize``)."""
    return unquote(name)


def entity_path(entity: ClientQuotaEntity) -> str:
    """The entity's path under ``/config`` (``users/alice/clients/<default>``); names are
    sanitized as Kafka's ``Sanitizer`` does (``sanitize``)."""
    user, client = entity
    parts: list[str] = []
    if user is not None:
        parts += ["users", user if user == DEFAULT else sanitize(user)]
    if client is not None:
        parts += ["clients", client if client == DEFAULT else sanitize(client)]
    return "/".join(parts)


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_properties_order(keys: Sequence[str]) -> list[str]:
    """``keys`` (in the order they were put) in the order Java's ``Properties`` iterates them,
    which is how Kafka's ``ConfigEntityZNode.encode`` writes a config map: a
    ``ConcurrentHashMap`` of 16 bins (32 from 12 keys on), by bin, then in insertion order."""
    table = 16
    while len(keys) >= table * 3 // 4:
        table *= 2

    def bin_of(key: str) -> int:
        h = _java_string_hash(key)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (table - 1)

    return sorted(keys, key=bin_of)  # stable: insertion order within a bin


def config_value(key: str, value: float) -> str:
    """A quota value as Kafka writes it: a LONG key as a whole number, a DOUBLE key as Java's
    ``Double.toString`` (``request_percentage`` 50 → ``50.0``)."""
    if key in LONG_KEYS:
        return str(int(value + 1e-6))
    return java_double(value)


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """An entity znode's data, byte for byte as Kafka writes it: ``{"version":1,"config":{..}}``,
    compact, the keys in ``java_properties_order`` of ``config``'s order."""
    ordered = {k: config[k] for k in java_properties_order(list(config))}
    return json.dumps({"version": 1, "config": ordered}, separators=(",", ":")).encode()


def encode_config(values: Mapping[str, float]) -> bytes:
    """An entity znode's data holding only quotas (``encode_entity_config`` of the values as
    Kafka writes them, put in sorted order)."""
    return encode_entity_config({k: config_value(k, v) for k, v in sorted(values.items())})


def change_notification(entity: ClientQuotaEntity) -> tuple[str, bytes]:
    """(parent path, data) of the sequential znode announcing a change of ``entity``."""
    data = {"version": 2, "entity_path": entity_path(entity)}
    return "/config/changes", json.dumps(data, separators=(",", ":")).encode()


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


def validate_change(entity: ClientQuotaEntity, ops: Sequence[QuotaOp]) -> str | None:
    """Why an entity's changes are refused (None: valid)."""
    error = validate_entity(entity) or next(
        (e for e in map(validate_op, ops) if e is not None), None
    )
    if error is None and len({op.key for op in ops}) != len(ops):
        error = "Duplicate quota key in one entity's changes"
    return error


def apply_ops(values: Mapping[str, float], ops: Sequence[QuotaOp]) -> dict[str, float]:
    """``values`` with ``ops`` applied."""
    out = dict(values)
    for op in ops:
        if op.remove:
            out.pop(op.key, None)
        else:
            out[op.key] = float(op.value)
    return out


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
        mutation_samples: int = 11,
        mutation_window_ms: int = 1000,
    ) -> None:
        self.configs = configs
        self.samples, self.window_ms = samples, window_ms
        self.mutation_samples, self.mutation_window_ms = mutation_samples, mutation_window_ms
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def record(
        self,
        key: str,
        user: str,
        client_id: str,
        value: float,
        now_ms: int,
        max_throttle_ms: int | None = None,
    ) -> int:
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
        return throttle_time_ms(rate, quota, now_ms, max_throttle_ms)

    def mutation_quota(
        self, user: str, client_id: str, strict: bool, now_ms: Callable[[], int]
    ) -> ControllerMutationQuota | None:
        """The ``controller_mutation_rate`` quota of one request (None: no quota applies)."""
        if not self.configs:
            return None
        found = resolve_quota(self.configs, user, client_id, "controller_mutation_rate")
        if found is None:
            return None
        quota, entity = found
        tags = quota_tags(entity, user, client_id)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(
                self.mutation_samples, self.mutation_window_ms
            )
        return ControllerMutationQuota(bucket, quota, strict, now_ms)


class ControllerMutationQuota:
    """One CreateTopics/CreatePartitions/DeleteTopics request's ``controller_mutation_rate``
    (Kafka's Strict- and PermissiveControllerMutationQuota). ``strict`` (CreateTopics v6+,
    CreatePartitions v3+, DeleteTopics v5+): a topic is refused (``record`` answers False:
    THROTTLING_QUOTA_EXCEEDED) while the bucket is below zero, else its partitions are taken
    even if that empties the bucket; permissive (older versions): every topic is taken. Either
    way ``throttle_time_ms`` is the time until the bucket is back at zero, counted from the
    last recording (the response's throttle_time_ms and the connection's mute)."""

    def __init__(
        self, bucket: TokenBucket, quota: float, strict: bool, now_ms: Callable[[], int]
    ) -> None:
        self.bucket, self.quota, self.strict, self._now = bucket, quota, strict, now_ms
        self._throttle_ms = 0
        self._recorded_ms = 0

    def record(self, partitions: float) -> bool:
        now = self._now()
        if self.strict:
            wait = self.bucket.throttle_time_ms(self.quota, now)
            if wait > 0:
                self._throttle_ms, self._recorded_ms = wait, now
                return False
            self.bucket.record(self.quota, partitions, now)
            return True
        self.bucket.record(self.quota, partitions, now)
        wait = self.bucket.throttle_time_ms(self.quota, now)
        if wait > 0:
            self._throttle_ms, self._recorded_ms = wait, now
        return True

    def throttle_time_ms(self) -> int:
        return max(0, self._throttle_ms - (self._now() - self._recorded_ms))


class QuotaStore:
    """Quota configs in memory (a broker without a data directory); subclasses persist.
    ``configs`` is the mapping ``resolve_quota`` reads; ``manager`` measures and throttles."""

    def __init__(
        self,
        samples: int = 11,
        window_ms: int = 1000,
        mutation_samples: int = 11,
        mutation_window_ms: int = 1000,
    ) -> None:
        self.configs: dict[ClientQuotaEntity, dict[str, float]] = {}
        self.manager = ClientQuotaManager(
            self.configs, samples, window_ms, mutation_samples, mutation_window_ms
        )

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

    def record_request_time(
        self,
        user: str,
        client_id: str | None,
        seconds: float,
        clock: Clock,
    ) -> int:
        """Add a request's handler time to the client's ``request_percentage`` rate (as
        percent-seconds, KIP-124) and answer the throttle time, at most one quota window
        (Kafka's ``ClientRequestQuotaManager``); the caller mutes the connection."""
        if not self.configs:
            return 0
        return self.manager.record(
            "request_percentage",
            user,
            client_id or "",
            seconds * 100.0,
            clock.now_ms(),
            max_throttle_ms=self.manager.window_ms,
        )

    def mutation_quota(
        self, user: str, client_id: str | None, strict: bool, clock: Clock
    ) -> ControllerMutationQuota | None:
        """The ``controller_mutation_rate`` quota of one CreateTopics, CreatePartitions or
        DeleteTopics request (None: none applies)."""
        return self.manager.mutation_quota(user, client_id or "", strict, clock.now_ms)

    async def alter_entities(
        self, changes: Sequence[tuple[ClientQuotaEntity, Sequence[QuotaOp]]], validate_only: bool
    ) -> list[str | None]:
        """``alter`` as AlterClientQuotas calls it (a store in ZooKeeper writes there)."""
        return self.alter(changes, validate_only)

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
            error = validate_change(entity, ops)
            results.append(error)
            if error is not None or validate_only:
                continue
            self.put(entity, apply_ops(self.configs.get(entity, {}), ops))
            changed = True
        if changed:
            self._persist()
        return results

    def put(self, entity: ClientQuotaEntity, values: Mapping[str, float]) -> None:
        """Replace an entity's quotas (none: the entity is dropped)."""
        if values:
            self.configs[entity] = dict(values)
        else:
            self.configs.pop(entity, None)

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

    def __init__(self, data_dir: Path, *windows: int) -> None:
        super().__init__(*windows)
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


def quota_windows(values: Any) -> tuple[int, int, int, int]:
    """(samples, window ms) of the rates and of ``controller_mutation_rate``'s bucket from the
    broker config (``get(key)``: ``quota.window.num``, ``quota.window.size.seconds``,
    ``controller.quota.window.num``, ``controller.quota.window.size.seconds``)."""

    def get(key: str, default: int) -> int:
        value = values.get(key)
        return default if value is None else int(value)

    return (
        get("quota.window.num", 11),
        get("quota.window.size.seconds", 1) * 1000,
        get("controller.quota.window.num", 11),
        get("controller.quota.window.size.seconds", 1) * 1000,
    )


def open_quota_store(values: Any, data_dir: Path | None) -> QuotaStore:
    """The broker's quota store: the file in its data directory, else memory; ``values`` is
    the broker config (``quota_windows``)."""
    windows = quota_windows(values)
    if data_dir is None:
        return QuotaStore(*windows)
    return FileQuotaStore(data_dir, *windows)
