"""odradek.testing: run a real odradek broker inside your tests.

* ``EmbeddedBroker`` — the broker on a background thread of the test process
  (``odradek.testing.embedded``).
* ``create_topic``, ``delete_topic``, ``list_topics``, ``read_all``, ``api_versions``,
  ``wait_until``, ``ConsumedRecord``, ``ResourceSnapshot`` — blocking helpers (``odradek.testing.helpers``).
* The pytest plugin (``odradek.testing.pytest_plugin``, loaded automatically through the
  ``pytest11`` entry point): fixtures ``odradek_broker``, ``odradek_broker_session``,
  ``odradek_bootstrap`` and the ``odradek_broker`` marker.

Names are imported lazily on first access: importing ``odradek.testing`` (which pytest does
for every run through the plugin) costs nothing, and neither the broker nor the process/Tansu
runners are imported until used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.testing.embedded import TEST_DEFAULTS, EmbeddedBroker
    from odradek.testing.helpers import (
        ConsumedRecord,
        KafkaProtocolError,
        ResourceSnapshot,
        api_versions,
        create_topic,
        delete_topic,
        list_topics,
        read_all,
        wait_until,
    )

__all__ = [
    "TEST_DEFAULTS",
    "ConsumedRecord",
    "EmbeddedBroker",
    "KafkaProtocolError",
    "ResourceSnapshot",
    "api_versions",
    "create_topic",
    "delete_topic",
    "list_topics",
    "read_all",
    "wait_until",
]

_LAZY = {
    "EmbeddedBroker": "odradek.testing.embedded",
    "TEST_DEFAULTS": "odradek.testing.embedded",
    "ConsumedRecord": "odradek.testing.helpers",
    "KafkaProtocolError": "odradek.testing.helpers",
    "ResourceSnapshot": "odradek.testing.helpers",
    "api_versions": "odradek.testing.helpers",
    "create_topic": "odradek.testing.helpers",
    "delete_topic": "odradek.testing.helpers",
    "list_topics": "odradek.testing.helpers",
    "read_all": "odradek.testing.helpers",
    "wait_until": "odradek.testing.helpers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'odradek.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
