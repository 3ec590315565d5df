"""Helpers shared by the API modules: building kio responses for the request's version.

kio generates one dataclass module per (API, version), and fields differ between versions.
``response_types(request)`` returns a namespace of the response module for the request's API key
and version, and ``make(cls, **fields)`` (``protocol.messages.make_entity``) builds an entity,
dropping the keyword arguments the version does not have (so a handler writes every field once
and works for all versions). Topic-name rules are storage's (``storage.manager``).
"""

from __future__ import annotations

import datetime
import sys
from functools import cache
from types import ModuleType
from typing import Protocol

from kio.index import load_response_schema

from odradek.protocol.messages import make_entity as make
from odradek.storage.manager import TOPIC_NAME_MAX, topic_name_error

__all__ = [
    "AUTHORIZED_OPERATIONS_NOT_REQUESTED",
    "CLUSTER_OPERATIONS",
    "NO_THROTTLE",
    "TOPIC_NAME_MAX",
    "TOPIC_OPERATIONS",
    "KioEntity",
    "make",
    "response_module",
    "response_types",
    "topic_name_error",
]

NO_THROTTLE = datetime.timedelta(0)

AUTHORIZED_OPERATIONS_NOT_REQUESTED = -(2**31)
"""INT32_MIN: what Kafka answers when authorized operations were not asked for."""


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# Kafka's AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12. With no
# authorizer configured Kafka allows every operation defined for a resource type
# (AclEntry.supportedOperations) and answers that set as a bit field.
TOPIC_OPERATIONS = _bits(3, 4, 5, 6, 7, 8, 10, 11)
CLUSTER_OPERATIONS = _bits(5, 7, 8, 9, 10, 11, 12)


class KioEntity(Protocol):
    """A kio request or response: its API key and version are class attributes."""

    @property
    def __api_key__(self) -> int: ...

    @property
    def __version__(self) -> int: ...


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    cls = load_response_schema(api_key, version)
    return sys.modules[cls.__module__]


def response_types(request: KioEntity) -> ModuleType:
    """The kio response module matching ``request``'s API key and version."""
    return response_module(int(request.__api_key__), int(request.__version__))
