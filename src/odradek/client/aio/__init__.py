"""Asyncio clients: ``AsyncProducer``, ``AsyncConsumer``, ``AsyncAdmin`` (same methods as the
synchronous facades in ``odradek.client``, as coroutines)."""

from __future__ import annotations

from .admin import AsyncAdmin, NewTopic
from .consumer import AsyncConsumer, ConsumerRebalanceListener
from .producer import AsyncProducer

__all__ = ["AsyncAdmin", "AsyncConsumer", "AsyncProducer", "ConsumerRebalanceListener", "NewTopic"]
