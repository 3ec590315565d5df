"""``ZkConfigEntityStore``: dynamic config entities of a cluster, in ZooKeeper (Kafka's layout).

The ``ConfigEntityStore`` of a broker with ``zookeeper.connect`` (see config_store.py). Each
entity is one znode, as Kafka's ``AdminZkClient.changeEntityConfig`` writes it:

* ``/config/brokers/<id>`` (one broker) and ``/config/brokers/<default>`` (every broker),
  ``/config/groups/<group>``: ``{"version":1,"config":{"<key>":"<value>",...}}``;
* every write is announced by a persistent sequential znode
  ``/config/changes/config_change_<10 digits>`` = ``{"version":2,"entity_path":"<type>/<name>"}``.

Every broker keeps an in-memory copy of the entities of ``entity_types``, read at start. It
watches ``/config/changes`` (Kafka's ZkConfigManager / ZkNodeChangeNotificationListener): each
notification whose sequence number is above the last one processed names an entity, which is
read again; when its configs differ from the copy, the copy is replaced and the change
listeners run (in notification order, one at a time, on the event loop). Notifications of
other types (``topics/<t>``, handled by ``ZkMetadataStore``) are skipped. A notification
created between the start's read and the watch is processed twice at worst: reading an entity
again is harmless. After processing, notifications older than ``change_expiration_ms`` (Kafka's
15 minutes) are deleted, by every broker, as Kafka does: a broker that was away longer reads
every entity at its start anyway.

An empty config is written as ``{"version":1,"config":{}}`` (Kafka keeps the znode) and the
entity disappears from the copy.

``/config/users/<user>`` is shared: it holds the user's SCRAM credentials (``SCRAM-SHA-256``,
``SCRAM-SHA-512``) and the user's client quotas, written by ``ZkQuotaStore`` on any broker. A
change of some of an entity's keys (``alter_entity_config``, the SCRAM path) therefore never
writes from the copy, which may not have seen another broker's write yet: it reads the znode,
changes only its keys, and writes it back on condition that the znode's version is unchanged
(``BadVersion``, or a ``NodeExists`` for a znode created meanwhile, reads again). The other keys
keep their place and a new key goes last, and the map is written in Kafka's key order
(``quota_store.encode_entity_config``), as Kafka's ``AdminZkClient.changeConfigs`` writes it.

This module imports kazoo (through ``odradek.cluster.zk``): only a broker with
``zookeeper.connect`` imports it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from odradek.broker.config_store import BROKERS, GROUPS, EntityChangeListener
from odradek.broker.metadata_store import MetadataUnavailableError
from odradek.clock import Clock, SystemClock
from odradek.cluster import zk as zkc
from odradek.cluster import znodes
from odradek.security.quota_store import encode_entity_config

__all__ = ["CHANGE_EXPIRATION_MS", "ZkConfigEntityStore", "config_change_sequence"]

log = logging.getLogger("odradek.broker")

T = TypeVar("T")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""Kafka's ZkConfigManager changeExpirationMs: how long a notification is kept."""


def config_change_sequence(notification: str) -> int | None:
    """The sequence number of a ``config_change_<n>`` znode name (None for another name)."""
    if not notification.startswith(znodes.CONFIG_CHANGE_PREFIX):
        return None
    suffix = notification[len(znodes.CONFIG_CHANGE_PREFIX) :]
    return int(suffix) if suffix.isdigit() else None


def _decode_config(data: bytes | None) -> dict[str, str]:
    """The ``config`` map of an entity znode, in its order (empty for an empty znode, or one
    that is not Kafka's JSON)."""
    if not data:
        return {}
    try:
        config = json.loads(data).get("config") or {}
        return {str(k): str(v) for k, v in dict(config).items()}
    except (ValueError, TypeError, AttributeError):
        log.warning("a config znode is not Kafka's JSON (its keys are dropped): %r", data[:200])
        return {}


class ZkConfigEntityStore:
    """``ConfigEntityStore`` over ``/config/<type>/<name>``. See the module docstring."""

    def __init__(
        self,
        zk: zkc.KafkaZkClient,
        *,
        admin_timeout_ms: int = 30_000,
        entity_types: Iterable[str] = (BROKERS, GROUPS, "users", "client-metrics"),
        change_expiration_ms: int = CHANGE_EXPIRATION_MS,
        clock: Clock | None = None,
    ) -> None:
        self.zk = zk
        self.change_expiration_ms = change_expiration_ms
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.admin_timeout_ms = admin_timeout_ms
        self._types = frozenset(entity_types)
        self._entities: dict[str, dict[str, dict[str, str]]] = {t: {} for t in self._types}
        self._listeners: list[EntityChangeListener] = []
        self._last_sequence = -1
        """The newest notification processed (read and written by ``_process`` only)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Read every entity of the store's types, then watch ``/config/changes`` (the ZooKeeper
        client is started already)."""
        self._loop = asyncio.get_running_loop()

        def load() -> dict[str, dict[str, dict[str, str]]]:
            sequences = (config_change_sequence(c) for c in self.zk.get_config_change_names())
            self._last_sequence = max((s for s in sequences if s is not None), default=-1)
            return {
                t: {n: self.zk.get_entity_config(t, n) for n in self.zk.get_entity_names(t)}
                for t in self._types
            }

        loaded = await self._run(load)
        self._entities = {t: {n: c for n, c in by.items() if c} for t, by in loaded.items()}
        await self._run(lambda: self.zk.watch_children(znodes.CONFIG_CHANGES, self._on_changes))

    def close(self) -> None:
        """Stop processing notifications (the ZooKeeper client is closed by its owner)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()

    async def _run(self, fn: Callable[[], T]) -> T:
        """A blocking ZooKeeper call in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    # -- ConfigEntityStore -------------------------------------------------------------------

    def entities(self, entity_type: str) -> dict[str, dict[str, str]]:
        return {n: dict(c) for n, c in self._entities.get(entity_type, {}).items()}

    def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        return dict(self._entities.get(entity_type, {}).get(name, {}))

    def add_change_listener(self, listener: EntityChangeListener) -> None:
        self._listeners.append(listener)

    async def change_entity_config(
        self, entity_type: str, name: str, configs: Mapping[str, str]
    ) -> None:
        """Write the entity's znode and its notification, once the session is connected (a
        ZooKeeper restart is waited for, up to ``admin_timeout_ms``); ZooKeeper still away, or
        the connection lost during the write, raises ``MetadataUnavailableError``."""
        if entity_type not in self._types:
            raise ValueError(f"this store does not keep {entity_type!r} configs")
        new = {str(k): str(v) for k, v in configs.items()}
        timeout_s = self.admin_timeout_ms / 1000

        def write() -> None:
            if not self.zk.wait_writable(timeout_s):
                raise MetadataUnavailableError(
                    f"ZooKeeper is not reachable (waited {self.admin_timeout_ms} ms)"
                )
            try:
                self.zk.set_or_create_entity_config(entity_type, name, new)
            except (ConnectionLoss, SessionExpiredError, znodes.NotConnectedError) as exc:
                raise MetadataUnavailableError(
                    f"the ZooKeeper session was interrupted: {type(exc).__name__}"
                ) from exc

        await self._run(write)
        self._put(entity_type, name, new)

    async def alter_entity_config(
        self,
        entity_type: str,
        name: str,
        sets: Mapping[str, str],
        removes: Iterable[str] = (),
        check: Callable[[Mapping[str, str]], None] | None = None,
    ) -> dict[str, str]:
        """Set ``sets`` and remove ``removes`` in the entity's znode as it is in ZooKeeper now,
        keeping its other keys (module docstring: read, change, write conditionally on the
        version, again on a concurrent write); the entity's configs after the change. Errors as
        ``change_entity_config``. ``check`` is called (in a worker thread) with the configs
        read, before each write attempt: whatever it raises is raised, nothing written, so
        a precondition (a key that must exist) holds for the very version that is replaced."""
        if entity_type not in self._types:
            raise ValueError(f"this store does not keep {entity_type!r} configs")
        to_set = {str(k): str(v) for k, v in sets.items()}
        to_remove = [str(k) for k in removes]
        timeout_s = self.admin_timeout_ms / 1000

        def write() -> dict[str, str]:
            if not self.zk.wait_writable(timeout_s):
                raise MetadataUnavailableError(
                    f"ZooKeeper is not reachable (waited {self.admin_timeout_ms} ms)"
                )
            try:
                while True:
                    configs, version = self.read_entity_znode(entity_type, name)
                    if check is not None:
                        check(configs)
                    for key in to_remove:
                        configs.pop(key, None)
                    configs.update(to_set)  # Kafka's setProperty: a new key goes last
                    if self.write_entity_znode(entity_type, name, configs, version):
                        return configs
            except (ConnectionLoss, SessionExpiredError, znodes.NotConnectedError) as exc:
                raise MetadataUnavailableError(
                    f"the ZooKeeper session was interrupted: {type(exc).__name__}"
                ) from exc

        configs = await self._run(write)
        self._put(entity_type, name, configs)
        return dict(configs)

    def read_entity_znode(self, entity_type: str, name: str) -> tuple[dict[str, str], int | None]:
        """(configs in the znode's order, znode version) of ``/config/<type>/<name>`` as it is
        in ZooKeeper now; version None when the znode does not exist. Blocking."""
        try:
            data, stat = self.zk.zk.get(f"{znodes.CONFIG}/{entity_type}/{name}")
        except NoNodeError:
            return {}, None
        return _decode_config(data), int(stat.version)

    def write_entity_znode(
        self, entity_type: str, name: str, configs: Mapping[str, str], version: int | None
    ) -> bool:
        """Write ``configs`` (Kafka's key order) to ``/config/<type>/<name>`` if the znode is
        still at ``version`` (None: if it still does not exist) and announce the change; False,
        with nothing written, when another write came first. Blocking."""
        path = f"{znodes.CONFIG}/{entity_type}/{name}"
        data = encode_entity_config(configs)
        kz = self.zk.zk
        try:
            if version is None:
                kz.create(path, data, makepath=True)
            else:
                kz.set(path, data, version=version)
        except (BadVersionError, NodeExistsError):
            return False
        kz.create(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.path_json({"version": 2, "entity_path": f"{entity_type}/{name}"}),
            sequence=True,
        )
        return True

    def _put(self, entity_type: str, name: str, configs: dict[str, str]) -> bool:
        """Take ``configs`` into the copy; whether it changed."""
        by_name = self._entities.setdefault(entity_type, {})
        if by_name.get(name, {}) == configs:
            return False
        if configs:
            by_name[name] = dict(configs)
        else:
            by_name.pop(name, None)
        return True

    # -- change notifications ----------------------------------------------------------------

    def _on_changes(self, _children: list[str]) -> bool | None:
        # a kazoo thread: hand over to the event loop
        loop = self._loop
        if self._closed or loop is None:
            return False
        try:
            loop.call_soon_threadsafe(self._kick)
        except RuntimeError:  # the loop is closed
            return False
        return None

    def _kick(self) -> None:
        self._dirty = True
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._process())

    def _read_new_changes(self) -> list[tuple[str, str, dict[str, str]]]:
        """(type, name, configs) of each entity named by a new notification, in order."""
        new: list[tuple[int, str]] = []
        for child in self.zk.get_config_change_names():
            seq = config_change_sequence(child)
            if seq is not None and seq > self._last_sequence:
                new.append((seq, child))
        out: list[tuple[str, str, dict[str, str]]] = []
        for seq, child in sorted(new):
            entity_path = self.zk.get_config_change_entity_path(child)
            entity_type, _, name = (entity_path or "").partition("/")
            if entity_type in self._types and name:
                out.append((entity_type, name, self.zk.get_entity_config(entity_type, name)))
            self._last_sequence = seq
        if new:
            self.zk.purge_config_changes(self.clock.now_ms() - self.change_expiration_ms)
        return out

    async def _process(self) -> None:
        while self._dirty and not self._closed:
            self._dirty = False
            try:
                changes = await self._run(self._read_new_changes)
            except Exception:
                # the next notification (or the watch after a reconnect) tries again
                log.warning("could not read config changes from ZooKeeper", exc_info=True)
                return
            for entity_type, name, configs in changes:
                if self._closed or not self._put(entity_type, name, configs):
                    continue
                log.info(  # a user's values are SCRAM credentials: their keys only
                    "config entity %s/%s changed: %s",
                    entity_type,
                    name,
                    sorted(configs) if entity_type == "users" else configs,
                )
                for listener in list(self._listeners):
                    try:
                        await listener(entity_type, name)
                    except Exception:
                        log.exception("applying the change of %s/%s failed", entity_type, name)
