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
from typing import Any

from kio.index import load_response_schema

from odradek.protocol.messages import make_entity as make
from odradek.storage.manager import TOPIC_NAME_MAX, topic_name_error

__all__ = [
    "NO_THROTTLE",
    "TOPIC_NAME_MAX",
    "make",
    "response_module",
    "response_types",
    "topic_name_error",
]

NO_THROTTLE = datetime.timedelta(0)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    cls = load_response_schema(api_key, version)
    return sys.modules[cls.__module__]


def response_types(request: Any) -> ModuleType:
    """The kio response module matching ``request``'s API key and version."""
    return response_module(int(request.__api_key__), int(request.__version__))
