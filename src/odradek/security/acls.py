"""ACLs as data, with Kafka's names and numeric codes (the wire's ``int8`` values).

An ``AclBinding`` is a ``ResourcePattern`` (resource type, name, LITERAL or PREFIXED) and an
``AccessControlEntry`` (principal ``"User:alice"``, host ``"*"`` or an address, operation,
ALLOW or DENY). An ``AclBindingFilter`` selects bindings as Kafka's does (DescribeAcls,
DeleteAcls): ``None`` fields and the ANY values match everything, and the pattern type MATCH
selects every pattern that would apply to the filter's resource name (the literal name, the
literal ``*`` and every prefix of the name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "InvalidAclError",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "from_pascal",
    "pascal_name",
    "validate_binding",
]

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
"""The one CLUSTER resource's name."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAclError(ValueError):
    """A binding that cannot be stored (Kafka's InvalidRequestException)."""


def pascal_name(value: IntEnum) -> str:
    """Kafka's ``SecurityUtils`` names: ``CLUSTER_ACTION`` -> ``ClusterAction``, ``TOPIC`` ->
    ``Topic`` (the names in ZooKeeper's ACL paths and JSON)."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def from_pascal(enum: type[IntEnum], name: str) -> IntEnum:
    """The member named ``name`` in Pascal case or upper case (``ClusterAction``, ``CLUSTER_ACTION``)."""
    upper = re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() if not name.isupper() else name
    return enum[upper]


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    """``"<type>:<name>"``; ``"User:*"`` matches every user."""
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        """Kafka's ``AccessControlEntryFilter.matches``: exact values, None/ANY for all."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation == AclOperation.ANY or self.operation == entry.operation)
            and (
                self.permission_type == AclPermissionType.ANY
                or self.permission_type == entry.permission_type
            )
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


_PRINCIPAL = re.compile(r"^[^:]+:.+$", re.DOTALL)


def validate_binding(binding: AclBinding) -> None:
    """Raise ``InvalidAclError`` for what Kafka refuses to create: UNKNOWN/ANY/MATCH values,
    an empty name, a principal not of the form ``Type:name``, a CLUSTER resource not named
    ``kafka-cluster``."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAclError(f"invalid resource type {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAclError(f"invalid pattern type {p.pattern_type.name}")
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAclError(f"invalid operation {e.operation.name}")
    if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAclError(f"invalid permission type {e.permission_type.name}")
    if not p.name:
        raise InvalidAclError("resource name must not be empty")
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise InvalidAclError(f"the cluster resource is named {CLUSTER_NAME!r}")
    if not _PRINCIPAL.match(e.principal):
        raise InvalidAclError(f"principal {e.principal!r} is not of the form Type:name")
    if not e.host:
        raise InvalidAclError("host must not be empty")
