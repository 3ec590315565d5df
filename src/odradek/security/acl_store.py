"""Where the ACLs are kept: ZooKeeper in Kafka's layout (a cluster), or a file in the data
directory (a single broker). Either store loads the authorizer at start and applies every
change to it; handlers change ACLs only through the store.

ZooKeeper layout (Kafka's ``ZkAclStore``, ``AclEntry``):

* a LITERAL pattern's entries in ``/kafka-acl/<ResourceType>/<name>``, a PREFIXED one's in
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, ``<ResourceType>`` in Pascal case
  (``Topic``, ``TransactionalId``), each holding
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"},...]}`` (compact JSON, keys in the order Java's HashMap
  writes them); a pattern left with no entry has its znode deleted;
* each change is announced by a persistent sequential znode: ``/kafka-acl-changes/acl_changes_<10
  digits>`` = ``TOPIC:<name>`` (a LITERAL pattern: the resource type's enum name, a colon, the
  name) or ``/kafka-acl-extended-changes/acl_changes_<10 digits>`` =
  ``{"version":1,"resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}``.

Every broker watches both change paths; a notification names a pattern whose znode it reads
again and whose entries it replaces in its authorizer (within ZooKeeper's watch latency, well
under a second). Writes are conditional on the znode's version and retried, so that two
brokers adding ACLs to one resource at once both land.

The file store keeps ``<data dir>/acls.json``:
``{"version":1,"acls":[{"resourceType":"TOPIC","name":..,"patternType":"LITERAL",
"principal":..,"host":..,"operation":"READ","permissionType":"ALLOW"},...]}``, rewritten whole
(write to a temporary file, fsync, rename) on every change. A broker without a data directory
keeps its ACLs in memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from odradek.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_pascal,
    pascal_name,
    validate_binding,
)
from odradek.security.authorizer import AclAuthorizer, AuthorizerConfig

if TYPE_CHECKING:
    from odradek.cluster.zk import KafkaZkClient

__all__ = [
    "ACL_CHANGE_PREFIX",
    "EXTENDED_ACL_CHANGES",
    "EXTENDED_ACL_ROOT",
    "LITERAL_ACL_CHANGES",
    "LITERAL_ACL_ROOT",
    "AclStore",
    "FileAclStore",
    "MemoryAclStore",
    "ZkAclStore",
    "acl_path",
    "change_notification",
    "decode_acls",
    "encode_acls",
    "open_acl_store",
]

log = logging.getLogger("odradek.security")
T = TypeVar("T")

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
_TYPES = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]


# -- ZooKeeper formats (pure) ------------------------------------------------------------


def acl_path(pattern: ResourcePattern) -> str:
    """The znode of a pattern's entries."""
    kind = pascal_name(pattern.resource_type)
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_ACL_ROOT}/{kind}/{pattern.name}"
    return f"{EXTENDED_ACL_ROOT}/{pattern.pattern_type.name.lower()}/{kind}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """Kafka's ``AclEntry.toJsonCompatibleMap`` as Jackson writes it (sorted for stability)."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": pascal_name(e.permission_type),
            "operation": pascal_name(e.operation),
            "host": e.host,
        }
        for e in sorted(
            entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type)
        )
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> set[AccessControlEntry]:
    """The entries of an ACL znode (Pascal-case or upper-case names, as Kafka reads them)."""
    obj = json.loads(data)
    return {
        AccessControlEntry(
            principal=str(a["principal"]),
            host=str(a["host"]),
            operation=AclOperation(from_pascal(AclOperation, str(a["operation"]))),
            permission_type=AclPermissionType(
                from_pascal(AclPermissionType, str(a["permissionType"]))
            ),
        )
        for a in obj.get("acls") or []
    }


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(parent path, data) of the notification announcing a change of ``pattern``."""
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_CHANGES, f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_ACL_CHANGES, json.dumps(event, separators=(",", ":")).encode()


def parse_notification(parent: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if parent == LITERAL_ACL_CHANGES:
        rtype, _, name = text.partition(":")
        return ResourcePattern(ResourceType(from_pascal(ResourceType, rtype)), name)
    event = json.loads(text)
    return ResourcePattern(
        ResourceType(from_pascal(ResourceType, event["resourceType"])),
        str(event["name"]),
        PatternType(from_pascal(PatternType, event["patternType"])),
    )


# -- the stores ----------------------------------------------------------------------------


class AclStore(Protocol):
    """The broker's ACLs: its ``authorizer`` decides, ``create``/``delete`` change them."""

    authorizer: AclAuthorizer

    async def create(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Add each binding; per binding None or the error (``InvalidAclError``...)."""
        ...

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter the bindings removed."""
        ...

    def close(self) -> None: ...


class MemoryAclStore:
    """ACLs in memory only (a broker without a data directory); subclasses persist."""

    def __init__(self, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer

    def _persist(self, changed: set[ResourcePattern]) -> None:
        """Write the patterns changed (nothing here)."""

    async def create(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        results: list[Exception | None] = []
        changed: set[ResourcePattern] = set()
        for b in bindings:
            try:
                validate_binding(b)
            except ValueError as exc:
                results.append(exc)
                continue
            self.authorizer.add(b)
            changed.add(b.pattern)
            results.append(None)
        if changed:
            self._persist(changed)
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        out: list[list[AclBinding]] = []
        changed: set[ResourcePattern] = set()
        for f in filters:
            removed = self.authorizer.describe(f)
            for b in removed:
                self.authorizer.remove(b)
                changed.add(b.pattern)
            out.append(removed)
        if changed:
            self._persist(changed)
        return out

    def close(self) -> None:
        pass


class FileAclStore(MemoryAclStore):
    """ACLs in ``<data dir>/acls.json`` (module docstring)."""

    FILE = "acls.json"

    def __init__(self, authorizer: AclAuthorizer, data_dir: Path) -> None:
        super().__init__(authorizer)
        self.path = data_dir / self.FILE
        if self.path.exists():
            obj = json.loads(self.path.read_text())
            for a in obj.get("acls") or []:
                authorizer.add(
                    AclBinding(
                        ResourcePattern(
                            ResourceType[a["resourceType"]],
                            a["name"],
                            PatternType[a["patternType"]],
                        ),
                        AccessControlEntry(
                            a["principal"],
                            a["host"],
                            AclOperation[a["operation"]],
                            AclPermissionType[a["permissionType"]],
                        ),
                    )
                )

    def _persist(self, changed: set[ResourcePattern]) -> None:
        acls = [
            {
                "resourceType": b.pattern.resource_type.name,
                "name": b.pattern.name,
                "patternType": b.pattern.pattern_type.name,
                "principal": b.entry.principal,
                "host": b.entry.host,
                "operation": b.entry.operation.name,
                "permissionType": b.entry.permission_type.name,
            }
            for b in self.authorizer.bindings()
        ]
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "acls": acls}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class ZkAclStore:
    """ACLs in ZooKeeper (module docstring). ``start()`` loads them and sets the watches."""

    def __init__(self, authorizer: AclAuthorizer, zk: KafkaZkClient) -> None:
        self.authorizer = authorizer
        self.zk = zk
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seen: dict[str, int] = {LITERAL_ACL_CHANGES: -1, EXTENDED_ACL_CHANGES: -1}
        self._closed = False
        self._watches: list[Any] = []

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, fn)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        loaded = await self._run(self._load)
        self.authorizer.clear()
        for pattern, entries in loaded.items():
            self.authorizer.set_entries(pattern, entries)
        for parent in (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES):
            self._watches.append(
                await self._run(
                    lambda parent=parent: self.zk.watch_children(  # type: ignore[misc]
                        parent, lambda children: self._on_changes(parent, children)
                    )
                )
            )

    def _load(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        kz = self.zk.zk
        for path in (LITERAL_ACL_ROOT, LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES):
            kz.ensure_path(path)
        for parent in self._seen:
            self._seen[parent] = max((_sequence(c) for c in kz.get_children(parent)), default=-1)
        out: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for rtype in _TYPES:
                parent = acl_path(ResourcePattern(rtype, "", pattern_type)).rstrip("/")
                if kz.exists(parent) is None:
                    continue
                for name in kz.get_children(parent):
                    pattern = ResourcePattern(rtype, name, pattern_type)
                    entries = self._read(pattern)
                    if entries:
                        out[pattern] = entries
        return out

    def _read(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.zk.get(acl_path(pattern))
        except NoNodeError:
            return set()
        try:
            return decode_acls(data)
        except (ValueError, KeyError, TypeError):
            log.warning("%s does not hold ACLs (ignored): %r", acl_path(pattern), data[:200])
            return set()

    # -- changes --------------------------------------------------------------------------

    def _update(
        self,
        pattern: ResourcePattern,
        change: Callable[[set[AccessControlEntry]], set[AccessControlEntry]],
    ) -> set[AccessControlEntry]:
        """Apply ``change`` to the znode's entries (conditional write, retried); the result."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        kz = self.zk.zk
        path = acl_path(pattern)
        while True:
            try:
                data, stat = kz.get(path)
                current, version = decode_acls(data), stat.version
            except NoNodeError:
                current, version = set(), -1
            new = change(set(current))
            if new == current:
                return new
            try:
                if not new:
                    kz.delete(path, version=version)
                elif version < 0:
                    kz.create(path, encode_acls(new), makepath=True)
                else:
                    kz.set(path, encode_acls(new), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            parent, note = change_notification(pattern)
            kz.create(f"{parent}/{ACL_CHANGE_PREFIX}", note, sequence=True, makepath=True)
            return new

    async def create(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        results: list[Exception | None] = []
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            try:
                validate_binding(b)
            except ValueError as exc:
                results.append(exc)
                continue
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
            results.append(None)

        def write() -> dict[ResourcePattern, set[AccessControlEntry]]:
            return {p: self._update(p, _adding(add)) for p, add in by_pattern.items()}

        try:
            written = await self._run(write)
        except Exception as exc:
            return [r if r is not None else exc for r in results]
        for pattern, entries in written.items():
            self.authorizer.set_entries(pattern, entries)
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        matched = [self.authorizer.describe(f) for f in filters]
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for removed in matched:
            for b in removed:
                by_pattern.setdefault(b.pattern, set()).add(b.entry)

        def write() -> dict[ResourcePattern, set[AccessControlEntry]]:
            return {p: self._update(p, _removing(rm)) for p, rm in by_pattern.items()}

        written = await self._run(write)
        for pattern, entries in written.items():
            self.authorizer.set_entries(pattern, entries)
        return matched

    def _on_changes(self, parent: str, children: list[str]) -> bool | None:
        loop = self._loop
        if self._closed or loop is None:
            return False
        new = sorted(s for s in map(_sequence, children) if s > self._seen[parent])
        if not new:
            return None
        self._seen[parent] = new[-1]
        patterns: list[ResourcePattern] = []
        for child in children:
            if _sequence(child) in new:
                try:
                    data, _ = self.zk.zk.get(f"{parent}/{child}")
                    patterns.append(parse_notification(parent, data))
                except Exception:
                    log.warning("unreadable ACL change %s/%s", parent, child, exc_info=True)
        updates = [(p, self._read(p)) for p in dict.fromkeys(patterns)]

        def apply() -> None:
            for pattern, entries in updates:
                self.authorizer.set_entries(pattern, entries)

        try:
            loop.call_soon_threadsafe(apply)
        except RuntimeError:
            return False
        return None

    def close(self) -> None:
        self._closed = True


def _adding(
    add: set[AccessControlEntry],
) -> Callable[[set[AccessControlEntry]], set[AccessControlEntry]]:
    return lambda current: current | add


def _removing(
    remove: set[AccessControlEntry],
) -> Callable[[set[AccessControlEntry]], set[AccessControlEntry]]:
    return lambda current: current - remove


def _sequence(child: str) -> int:
    suffix = child[len(ACL_CHANGE_PREFIX) :] if child.startswith(ACL_CHANGE_PREFIX) else ""
    return int(suffix) if suffix.isdigit() else -1


async def open_acl_store(
    values: Any, data_dir: Path | None, zk: KafkaZkClient | None
) -> AclStore | None:
    """The broker's ACL store for its config (None when ``authorizer.class.name`` is empty: no
    authorizer, everything allowed): ZooKeeper with ``zk``, else the data directory's file,
    else memory. ``values`` is the broker config (``get(key)``)."""
    config = AuthorizerConfig.from_values(
        {
            k: values.get(k)
            for k in ("authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found")
        }
    )
    if not config.enabled:
        return None
    authorizer = AclAuthorizer(config)
    if zk is not None:
        store = ZkAclStore(authorizer, zk)
        await store.start()
        return store
    if data_dir is not None:
        return FileAclStore(authorizer, data_dir)
    return MemoryAclStore(authorizer)
