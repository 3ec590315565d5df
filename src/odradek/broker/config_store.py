"""Where dynamic configs live: Kafka's config entities, ``/config/<type>/<name>``.

Kafka keeps dynamic broker configs in ZooKeeper at ``/config/brokers/<broker id>`` (one broker)
and ``/config/brokers/<default>`` (every broker), and group configs (KIP-848) as GROUP config
resources. ``ConfigEntityStore`` is that seam: the broker reads every entity of a type at
start and writes one entity's whole config map at a time. ``LocalConfigEntityStore`` keeps
them for a single broker in ``<first log dir>/odradek-config-entities.json``::

    {"version": 1,
     "entities": {"brokers": {"<default>": {"log.retention.ms": "60000"}, "0": {...}},
                  "groups": {"my-group": {"consumer.session.timeout.ms": "50000"}}}}

written with ``write_atomic`` (temporary file, fsync, rename, directory fsync): a crash leaves
the old or the new state. Without a data dir (storage.engine=memory) the entities live in
memory only. In cluster mode (``zookeeper.connect``) ``ZkConfigEntityStore``
(zk_config_store.py) implements the same Protocol over Kafka's znodes ``/config/<type>/<name>``
and tells its change listeners about the changes other brokers make.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Protocol

from odradek.storage.checkpoint import write_atomic

__all__ = [
    "BROKERS",
    "DEFAULT_ENTITY",
    "FILE_NAME",
    "GROUPS",
    "ConfigEntityStore",
    "EntityChangeListener",
    "LocalConfigEntityStore",
]

BROKERS = "brokers"
GROUPS = "groups"
DEFAULT_ENTITY = "<default>"
"""The entity name of the cluster-wide broker defaults (Kafka's ZooKeeper spelling)."""

FILE_NAME = "odradek-config-entities.json"

EntityChangeListener = Callable[[str, str], Awaitable[None]]
"""``listener(entity_type, name)``: that entity's configs may have changed in the store."""


class ConfigEntityStore(Protocol):
    """Dynamic config entities by type (``brokers``, ``groups``) and name."""

    def entities(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of ``entity_type`` with its configs (a copy)."""
        ...

    def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """One entity's configs (empty when it has none; a copy)."""
        ...

    async def change_entity_config(
        self, entity_type: str, name: str, configs: Mapping[str, str]
    ) -> None:
        """Replace one entity's configs (an empty map removes the entity), durably."""
        ...

    async def alter_entity_config(
        self,
        entity_type: str,
        name: str,
        sets: Mapping[str, str],
        removes: Iterable[str] = (),
        check: Callable[[Mapping[str, str]], None] | None = None,
    ) -> dict[str, str]:
        """Set ``sets`` and remove ``removes`` in the entity as it is stored now (other keys
        kept, even those written a moment ago by another broker), durably; its new configs.
        ``check(configs)`` sees the entity as stored now (never a copy that may lag another
        broker's write) right before the write that replaces exactly that version; what it
        raises is raised, with nothing written."""
        ...

    def add_change_listener(self, listener: EntityChangeListener) -> None:
        """Call ``listener`` (on the event loop) after an entity was changed by someone else
        (another broker of the cluster); the store already answers with the new configs."""
        ...


class LocalConfigEntityStore:
    """``ConfigEntityStore`` of a single broker: one JSON file in the data dir (see the
    module docstring), or memory when ``data_dir`` is None."""

    def __init__(self, data_dir: Path | None) -> None:
        self._path = None if data_dir is None else Path(data_dir) / FILE_NAME
        self._entities: dict[str, dict[str, dict[str, str]]] = {}
        if self._path is not None and self._path.exists():
            try:
                data = json.loads(self._path.read_text(encoding="utf-8"))
                for entity_type, by_name in dict(data.get("entities", {})).items():
                    self._entities[str(entity_type)] = {
                        str(name): {str(k): str(v) for k, v in dict(configs).items()}
                        for name, configs in dict(by_name).items()
                    }
            except (ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"{self._path}: not a config entities file ({exc})") from None

    @property
    def path(self) -> Path | None:
        return self._path

    def add_change_listener(self, listener: EntityChangeListener) -> None:
        """Nothing else writes this broker's file: listeners are never called."""

    def entities(self, entity_type: str) -> dict[str, dict[str, str]]:
        return {n: dict(c) for n, c in self._entities.get(entity_type, {}).items()}

    def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        return dict(self._entities.get(entity_type, {}).get(name, {}))

    async def change_entity_config(
        self, entity_type: str, name: str, configs: Mapping[str, str]
    ) -> None:
        self.write_entity_config(entity_type, name, configs)

    async def alter_entity_config(
        self,
        entity_type: str,
        name: str,
        sets: Mapping[str, str],
        removes: Iterable[str] = (),
        check: Callable[[Mapping[str, str]], None] | None = None,
    ) -> dict[str, str]:
        configs = self.entity_config(entity_type, name)  # nothing else writes the file
        if check is not None:
            check(configs)
        for key in removes:
            configs.pop(key, None)
        configs.update(sets)
        self.write_entity_config(entity_type, name, configs)
        return configs

    def write_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """``change_entity_config`` without the coroutine (it never suspends here)."""
        entities = {t: {n: dict(c) for n, c in by.items()} for t, by in self._entities.items()}
        by_name = entities.setdefault(entity_type, {})
        if configs:
            by_name[name] = {str(k): str(v) for k, v in configs.items()}
        else:
            by_name.pop(name, None)
            if not by_name:
                del entities[entity_type]
        if self._path is not None:
            payload = json.dumps({"version": 1, "entities": entities}, indent=1, sort_keys=True)
            # owner only: the users entities hold SCRAM credentials
            write_atomic(self._path, payload.encode("utf-8"), mode=0o600)
        self._entities = entities
