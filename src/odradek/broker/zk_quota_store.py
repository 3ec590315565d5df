"""``ZkQuotaStore``: client quotas of a cluster, in ZooKeeper, in Kafka's layout.

The quota store of a broker with ``zookeeper.connect`` (the single broker's stores are in
``odradek.security.quota_store``). Entities are Kafka's config entities:

* ``/config/users/<user>``, ``/config/clients/<client-id>`` and
  ``/config/users/<user>/clients/<client-id>``, names sanitized (``quota_store.sanitize``),
  ``<default>`` for the default entity of either part;
* each holds ``{"version":1,"config":{"producer_byte_rate":"1024","request_percentage":"50.0"}}``
  (``quota_store.encode_entity_config``: Kafka's key order and value spelling);
* every write is announced by ``/config/changes/config_change_<10 digits>`` =
  ``{"version":2,"entity_path":"users/alice/clients/app"}``.

``/config/users/<user>`` also holds the user's SCRAM credentials (``SCRAM-SHA-256``,
``SCRAM-SHA-512``, written by ``ZkConfigEntityStore``): a quota write reads the znode, changes
only the quota keys it was asked to and writes it back conditionally on the znode's version
(retried on a concurrent write), so the other keys are never lost. An entity left with no key
keeps its znode with an empty config, as Kafka does.

Every broker reads every quota entity at start and watches ``/config/changes``: a notification
newer than the last one seen that names a ``users/...`` or ``clients/...`` entity makes it read
that znode again and take its quota keys (other keys are ignored), so an AlterClientQuotas sent
to any broker applies on every broker within ZooKeeper's watch latency (tens of
milliseconds here). Notifications are purged by ``ZkConfigEntityStore``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.broker.metadata_store import MetadataUnavailableError
from odradek.cluster import znodes
from odradek.security.quota_store import (
    QuotaOp,
    QuotaStore,
    config_value,
    desanitize,
    encode_entity_config,
    entity_path,
    open_quota_store,
    quota_windows,
    validate_change,
)
from odradek.security.quotas import DEFAULT, QUOTA_KEYS, ClientQuotaEntity

if TYPE_CHECKING:
    from odradek.cluster.zk import KafkaZkClient

__all__ = ["ZkQuotaStore", "open_broker_quota_store", "parse_entity_path"]

log = logging.getLogger("odradek.broker")
T = TypeVar("T")

USERS_PATH = f"{znodes.CONFIG}/users"
CLIENTS_PATH = f"{znodes.CONFIG}/clients"


def parse_entity_path(path: str) -> ClientQuotaEntity | None:
    """``users/alice/clients/app`` → ("alice", "app"); None for a path that names no quota
    entity (``topics/t``, ``brokers/1``)."""
    parts = path.split("/")

    def name(raw: str) -> str:
        return DEFAULT if raw == DEFAULT else desanitize(raw)

    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return name(parts[1]), None
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return None, name(parts[1])
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return name(parts[1]), name(parts[3])
    return None


def _decode(data: bytes | None) -> dict[str, str]:
    """A config znode's map, in its order (empty for an empty or foreign znode)."""
    if not data:
        return {}
    try:
        config = json.loads(data).get("config") or {}
        return {str(k): str(v) for k, v in dict(config).items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def _quotas(config: dict[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in config.items():
        if key in QUOTA_KEYS:
            try:
                out[key] = float(value)
            except ValueError:
                log.warning("quota %s=%r is not a number (ignored)", key, value)
    return out


class ZkQuotaStore(QuotaStore):
    """Quota configs in ZooKeeper (module docstring); ``start()`` loads them and watches."""

    def __init__(self, zk: KafkaZkClient, *windows: int, admin_timeout_ms: int = 30_000) -> None:
        super().__init__(*windows)
        self.zk = zk
        self.admin_timeout_ms = admin_timeout_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_sequence = -1
        self._closed = False
        self._watch: Any = None

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        loaded = await self._run(self._load)
        self.configs.clear()
        self.configs.update(loaded)
        self._watch = await self._run(
            lambda: self.zk.watch_children(znodes.CONFIG_CHANGES, self._on_changes)
        )

    def close(self) -> None:
        self._closed = True

    # -- reading ----------------------------------------------------------------------------

    def _read(self, entity: ClientQuotaEntity) -> dict[str, float]:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.zk.get(f"{znodes.CONFIG}/{entity_path(entity)}")
        except NoNodeError:
            return {}
        return _quotas(_decode(data))

    def _children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(self.zk.zk.get_children(path))
        except NoNodeError:
            return []

    def _load(self) -> dict[ClientQuotaEntity, dict[str, float]]:
        kz = self.zk.zk
        kz.ensure_path(znodes.CONFIG_CHANGES)
        sequences = [_sequence(c) for c in kz.get_children(znodes.CONFIG_CHANGES)]
        self._last_sequence = max(sequences, default=-1)
        paths = [f"users/{u}" for u in self._children(USERS_PATH)]
        for user in self._children(USERS_PATH):
            paths += [
                f"users/{user}/clients/{c}" for c in self._children(f"{USERS_PATH}/{user}/clients")
            ]
        paths += [f"clients/{c}" for c in self._children(CLIENTS_PATH)]
        out: dict[ClientQuotaEntity, dict[str, float]] = {}
        for path in paths:
            entity = parse_entity_path(path)
            if entity is None:
                continue
            values = self._read(entity)
            if values:
                out[entity] = values
        return out

    def _on_changes(self, children: list[str]) -> bool | None:
        """A kazoo worker thread: read the entities new notifications name, apply them on the
        event loop."""
        loop = self._loop
        if self._closed or loop is None:
            return False
        new = sorted(
            (s, c) for c in children if (s := _sequence(c)) > self._last_sequence and s >= 0
        )
        if not new:
            return None
        entities: list[ClientQuotaEntity] = []
        try:
            for _, child in new:
                path = self.zk.get_config_change_entity_path(child)
                entity = None if path is None else parse_entity_path(path)
                if entity is not None and entity not in entities:
                    entities.append(entity)
            updates = [(e, self._read(e)) for e in entities]
        except Exception:
            if self._closed:  # the client was closed under the read: the broker is stopping
                return False
            # not taken as seen: the next notification (or reconnection) reads these again
            log.warning("could not read client quota changes from ZooKeeper", exc_info=True)
            return None
        self._last_sequence = new[-1][0]
        if not updates:
            return None

        def apply() -> None:
            for entity, values in updates:
                if self.configs.get(entity, {}) != values:
                    log.info("client quotas of %s: %s", entity_path(entity), values)
                    self.put(entity, values)

        try:
            loop.call_soon_threadsafe(apply)
        except RuntimeError:  # the loop is closed
            return False
        return None

    # -- writing ----------------------------------------------------------------------------

    def _write(self, entity: ClientQuotaEntity, ops: Sequence[QuotaOp]) -> dict[str, float]:
        """Change the entity's znode (other keys kept, conditional on its version), announce
        it; the entity's quotas after the change."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        if not self.zk.wait_writable(self.admin_timeout_ms / 1000):
            raise MetadataUnavailableError(
                f"ZooKeeper is not reachable (waited {self.admin_timeout_ms} ms)"
            )
        kz = self.zk.zk
        path = f"{znodes.CONFIG}/{entity_path(entity)}"
        while True:
            try:
                data, stat = kz.get(path)
                version: int | None = stat.version
            except NoNodeError:
                data, version = b"", None
            config = _decode(data)
            for op in ops:  # Kafka: remove, or setProperty (a new key goes last)
                if op.remove:
                    config.pop(op.key, None)
                else:
                    config[op.key] = config_value(op.key, op.value)
            encoded = encode_entity_config(config)
            try:
                if version is None:
                    kz.create(path, encoded, makepath=True)
                else:
                    kz.set(path, encoded, version=version)
                break
            except (BadVersionError, NodeExistsError):
                continue  # written meanwhile (a SCRAM credential, another broker): again
        parent, note = znodes.CONFIG_CHANGES, entity_path(entity)
        kz.create(
            f"{parent}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.path_json({"version": 2, "entity_path": note}),
            sequence=True,
        )
        return _quotas(config)

    async def alter_entities(
        self, changes: Sequence[tuple[ClientQuotaEntity, Sequence[QuotaOp]]], validate_only: bool
    ) -> list[str | None]:
        results = [validate_change(entity, ops) for entity, ops in changes]
        if validate_only:
            return results
        for (entity, ops), error in zip(changes, results, strict=True):
            if error is not None:
                continue
            values = await self._run(lambda e=entity, o=ops: self._write(e, o))  # type: ignore[misc]
            self.put(entity, values)
        return results


def _sequence(child: str) -> int:
    prefix = znodes.CONFIG_CHANGE_PREFIX
    if child.startswith(prefix) and child[len(prefix) :].isdigit():
        return int(child[len(prefix) :])
    return -1


async def open_broker_quota_store(
    values: Any, data_dir: Path | None, zk: KafkaZkClient | None
) -> QuotaStore:
    """The broker's quota store: ZooKeeper with ``zk`` (started), else
    ``quota_store.open_quota_store`` (the data directory's file, or memory)."""
    if zk is None:
        return open_quota_store(values, data_dir)
    store = ZkQuotaStore(zk, *quota_windows(values))
    await store.start()
    return store
