"""Asyncio clients: ``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin`` (same methods as the
synchronous facades in ``odradek.client``, as coroutines).

The names are imported from their modules on first use (PEP 562), as in ``odradek.client``:
an admin client does not load the producer."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .admin import AsyncAdmin, NewTopic
    from .consumer import AsyncConsumer, ConsumerRebalanceListener
    from .producer import AsyncProducer

_LAZY: dict[str, str] = {
    "AsyncAdmin": ".admin",
    "NewTopic": ".admin",
    "AsyncConsumer": ".consumer",
    "ConsumerRebalanceListener": ".consumer",
    "AsyncProducer": ".producer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = ["AsyncAdmin", "AsyncConsumer", "AsyncProducer", "ConsumerRebalanceListener", "NewTopic"]
