"""Helpers shared by the API modules: building kio responses for the request's version.

kio generates one dataclass module per (API, version), and fields differ between versions.
``response_types(request)`` returns a namespace of the response module for the request's API key
and version, and ``make(cls, **fields)`` builds an entity, dropping the keyword arguments the
version does not have (so a handler writes every field once and works for all versions).
"""

from __future__ import annotations

import datetime
import re
import sys
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_response_schema

__all__ = [
    "NO_THROTTLE",
    "TOPIC_NAME_MAX",
    "make",
    "response_module",
    "response_types",
    "topic_name_error",
]

NO_THROTTLE = datetime.timedelta(0)
TOPIC_NAME_MAX = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    cls = load_response_schema(api_key, version)
    return sys.modules[cls.__module__]


def response_types(request: Any) -> ModuleType:
    """The kio response module matching ``request``'s API key and version."""
    return response_module(int(request.__api_key__), int(request.__version__))


@cache
def _fields(cls: type) -> frozenset[str]:
    return frozenset(getattr(cls, "__dataclass_fields__", ()))


def make(cls: type, **kwargs: Any) -> Any:
    """Build ``cls`` from the keyword arguments it knows; others are dropped."""
    known = _fields(cls)  # kio entities are dataclasses
    return cls(**{k: v for k, v in kwargs.items() if k in known})


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's rules), or None when it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > TOPIC_NAME_MAX:
        return f"topic name is longer than {TOPIC_NAME_MAX} characters"
    if not _LEGAL.match(name):
        return "topic name may contain only ASCII alphanumerics, '.', '_' and '-'"
    return None
