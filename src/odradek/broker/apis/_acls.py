"""Conversions between the ACL APIs' wire fields (int8 codes, nullable strings) and
``odradek.security.acls`` values. A code outside Kafka's enums reads as UNKNOWN, which the
handlers answer with INVALID_REQUEST, as Kafka does."""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from odradek.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

__all__ = ["binding_of", "filter_of", "unknown_in_filter"]

E = TypeVar("E", bound=IntEnum)


def _enum(cls: type[E], code: int) -> E:
    try:
        return cls(int(code))
    except ValueError:
        return cls(0)  # UNKNOWN


def binding_of(c: Any) -> AclBinding:
    """An ``AclCreation`` (CreateAcls) as a binding (pattern type LITERAL below v1)."""
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, c.resource_type),
            c.resource_name,
            _enum(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)),
        ),
        AccessControlEntry(
            c.principal,
            c.host,
            _enum(AclOperation, c.operation),
            _enum(AclPermissionType, c.permission_type),
        ),
    )


def filter_of(f: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAclsFilter as a binding filter."""
    return AclBindingFilter(
        ResourcePatternFilter(
            _enum(ResourceType, f.resource_type_filter),
            f.resource_name_filter,
            _enum(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
        ),
        AccessControlEntryFilter(
            f.principal_filter,
            f.host_filter,
            _enum(AclOperation, f.operation),
            _enum(AclPermissionType, f.permission_type),
        ),
    )


def unknown_in_filter(f: AclBindingFilter) -> bool:
    """A filter with an UNKNOWN value matches nothing and is refused (INVALID_REQUEST)."""
    return 0 in (
        f.pattern.resource_type,
        f.pattern.pattern_type,
        f.entry.operation,
        f.entry.permission_type,
    )
