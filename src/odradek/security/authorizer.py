"""The authorizer: Kafka's ACL semantics over an index of bindings, with a decision cache.

Decision (Kafka's AclAuthorizer and StandardAuthorizer agree on it):

1. a principal in ``super.users`` may do everything;
2. the ACLs that apply to a resource are those on its literal name, on the literal ``*`` of its
   type, and the PREFIXED ones whose prefix starts its name;
3. none apply: allowed iff ``allow.everyone.if.no.acl.found``;
4. an ACL matches a request when its principal is the request's or ``User:*``, its host the
   client's or ``*``, its operation the asked one or ALL;
5. a matching DENY refuses, whatever ALLOWs there are;
6. otherwise a matching ALLOW admits; an ALLOW of READ, WRITE, DELETE or ALTER also admits
   DESCRIBE, and one of ALTER_CONFIGS admits DESCRIBE_CONFIGS (never for DENY).

The index maps ``(resource type, name)`` to the entries of the LITERAL pattern and of the
PREFIXED pattern with that name, so a decision costs one look-up per prefix length of the
name. Decisions are cached by (principal, host, operation, resource type, name); every change
to the ACLs drops the cache. The authorizer does no I/O: a store (``acl_store``) loads it and
applies changes to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from odradek.security.acls import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.principal import KafkaPrincipal

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "AclAuthorizer",
    "AuthorizerConfig",
    "implied_operations",
]

AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
)
"""The values of ``authorizer.class.name`` that turn the authorizer on ("" leaves it off)."""

_DESCRIBE_IMPLIED_BY = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.ALL,
    }
)
_DESCRIBE_CONFIGS_IMPLIED_BY = frozenset(
    {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.ALL}
)
_CACHE_MAX = 100_000


def implied_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The ALLOWed operations that admit ``operation`` (ALL admits everything)."""
    if operation == AclOperation.DESCRIBE:
        return _DESCRIBE_IMPLIED_BY
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return _DESCRIBE_CONFIGS_IMPLIED_BY
    return frozenset({operation, AclOperation.ALL})


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    """``authorizer.class.name``, ``super.users`` and ``allow.everyone.if.no.acl.found``."""

    class_name: str = ""
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.class_name)

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> AuthorizerConfig:
        """From broker config values; raises ValueError for an unknown authorizer class."""
        name = str(values.get("authorizer.class.name") or "").strip()
        if name and name not in AUTHORIZER_CLASS_NAMES:
            known = ", ".join(sorted(AUTHORIZER_CLASS_NAMES))
            raise ValueError(f"authorizer.class.name {name!r} is not supported (one of: {known})")
        supers = str(values.get("super.users") or "")
        allow = values.get("allow.everyone.if.no.acl.found", False)
        if isinstance(allow, str):
            allow = allow.strip().lower() == "true"
        return cls(
            class_name=name,
            super_users=frozenset(u.strip() for u in supers.split(";") if u.strip()),
            allow_everyone_if_no_acl_found=bool(allow),
        )


@dataclass(slots=True)
class _Entries:
    literal: set[AccessControlEntry] = field(default_factory=set)
    prefixed: set[AccessControlEntry] = field(default_factory=set)


class AclAuthorizer:
    """The ACLs and the decisions on them. Not thread-safe: the broker's event loop owns it."""

    def __init__(self, config: AuthorizerConfig | None = None) -> None:
        self.config = config or AuthorizerConfig(
            class_name="kafka.security.authorizer.AclAuthorizer"
        )
        self._index: dict[tuple[ResourceType, str], _Entries] = {}
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self.generation = 0
        """Bumped on every change to the ACLs."""

    # -- changes --------------------------------------------------------------------------

    def _changed(self) -> None:
        self.generation += 1
        self._cache.clear()

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        slot = self._index.get((pattern.resource_type, pattern.name))
        if slot is None:
            return frozenset()
        if pattern.pattern_type == PatternType.PREFIXED:
            return frozenset(slot.prefixed)
        return frozenset(slot.literal)

    def set_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the entries of one pattern (how a store applies a change it read)."""
        key = (pattern.resource_type, pattern.name)
        slot = self._index.setdefault(key, _Entries())
        new = set(entries)
        if pattern.pattern_type == PatternType.PREFIXED:
            slot.prefixed = new
        else:
            slot.literal = new
        if not slot.literal and not slot.prefixed:
            del self._index[key]
        self._changed()

    def add(self, binding: AclBinding) -> None:
        self.set_entries(binding.pattern, self.entries(binding.pattern) | {binding.entry})

    def remove(self, binding: AclBinding) -> None:
        self.set_entries(binding.pattern, self.entries(binding.pattern) - {binding.entry})

    def clear(self) -> None:
        self._index.clear()
        self._changed()

    def bindings(self) -> list[AclBinding]:
        out: list[AclBinding] = []
        for (rtype, name), slot in self._index.items():
            for kind, entries in (
                (PatternType.LITERAL, slot.literal),
                (PatternType.PREFIXED, slot.prefixed),
            ):
                pattern = ResourcePattern(rtype, name, kind)
                out.extend(AclBinding(pattern, e) for e in entries)
        return out

    def patterns(self) -> list[ResourcePattern]:
        out = []
        for (rtype, name), slot in self._index.items():
            if slot.literal:
                out.append(ResourcePattern(rtype, name, PatternType.LITERAL))
            if slot.prefixed:
                out.append(ResourcePattern(rtype, name, PatternType.PREFIXED))
        return out

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if acl_filter.matches(b)]

    def __len__(self) -> int:
        return sum(len(s.literal) + len(s.prefixed) for s in self._index.values())

    # -- decisions ------------------------------------------------------------------------

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.config.super_users

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the resource?"""
        who = str(principal)
        key = (who, host, int(operation), int(resource_type), name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        decision = who in self.config.super_users or self._decide(
            who, host, operation, resource_type, name
        )
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        index = self._index
        found: list[AccessControlEntry] = []
        slot = index.get((resource_type, name))
        if slot is not None:
            found.extend(slot.literal)
        if name != WILDCARD_RESOURCE:
            wild = index.get((resource_type, WILDCARD_RESOURCE))
            if wild is not None:
                found.extend(wild.literal)
        for end in range(1, len(name) + 1):
            slot = index.get((resource_type, name[:end]))
            if slot is not None and slot.prefixed:
                found.extend(slot.prefixed)
        return found

    def _decide(
        self,
        who: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        acls = self._matching(resource_type, name)
        if not acls:
            return self.config.allow_everyone_if_no_acl_found
        allow_ops = implied_operations(operation)
        allowed = False
        for e in acls:
            if e.principal != who and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.host != host and e.host != WILDCARD_HOST:
                continue
            if e.permission_type == AclPermissionType.DENY:
                if e.operation == operation or e.operation == AclOperation.ALL:
                    return False
            elif e.permission_type == AclPermissionType.ALLOW and e.operation in allow_ops:
                allowed = True
        return allowed

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """May the principal do ``operation`` on some resource of the type (Kafka's
        ``authorizeByResourceType``, e.g. WRITE on any topic for an idempotent producer)?

        True when an ALLOW matches and no DENY covers it: a literal DENY on ``*`` covers all, a
        literal DENY covers the literal ALLOW of its name, a PREFIXED DENY every ALLOW whose
        name it starts.
        """
        who = str(principal)
        if who in self.config.super_users:
            return True
        ops = implied_operations(operation)

        def applies(e: AccessControlEntry) -> bool:
            return (e.principal in (who, WILDCARD_PRINCIPAL)) and (e.host in (host, WILDCARD_HOST))

        denies: list[tuple[PatternType, str]] = []
        allows: list[tuple[PatternType, str]] = []
        for (rtype, name), slot in self._index.items():
            if rtype != resource_type:
                continue
            for kind, entries in (
                (PatternType.LITERAL, slot.literal),
                (PatternType.PREFIXED, slot.prefixed),
            ):
                for e in entries:
                    if not applies(e):
                        continue
                    if e.permission_type == AclPermissionType.DENY and e.operation in (
                        operation,
                        AclOperation.ALL,
                    ):
                        denies.append((kind, name))
                    elif e.permission_type == AclPermissionType.ALLOW and e.operation in ops:
                        allows.append((kind, name))
        if (PatternType.LITERAL, WILDCARD_RESOURCE) in denies:
            return False
        for kind, name in allows:
            covered = any(
                (dkind == PatternType.PREFIXED and name.startswith(dname))
                or (dkind == kind == PatternType.LITERAL and dname == name)
                for dkind, dname in denies
            )
            if not covered:
                return True
        if not self._index_has_type(resource_type):
            return self.config.allow_everyone_if_no_acl_found
        return False

    def _index_has_type(self, resource_type: ResourceType) -> bool:
        return any(rtype == resource_type for rtype, _ in self._index)
