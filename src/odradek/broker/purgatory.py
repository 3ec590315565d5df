"""Delayed operations: Fetch requests waiting for data (Kafka's DelayedFetch purgatory) and
acks=all Produce requests waiting for the high watermark (Kafka's DelayedProduce).

A Fetch that has fewer than ``min_bytes`` available parks here with a deadline of
``max_wait_ms``, watching the partitions it asked for. ``notify(topic, partition)`` (called after
every append, and when a partition's high watermark moves) wakes every waiter of that partition
at once; the waiter then re-reads and either answers or parks again until its deadline.

Produce with acks=-1 needs no waiting alone: the high watermark follows the log end offset after
each append (single broker, ISR = {this broker}). Replicated, ``ReplicaManager.wait_for_acks``
parks here until the partition is notified (its high watermark moved, its ISR or leadership
changed) and then re-checks ``Partition.acks_all_status``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["Purgatory"]

TopicPartition = tuple[str, int]


class Purgatory:
    """Waiters keyed by (topic, partition); each waiter is one asyncio.Future."""

    __slots__ = ("_closed", "_watchers")

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, list[asyncio.Future[bool]]] = {}
        self._closed = False

    def watching(self) -> int:
        """Number of (partition, waiter) registrations (for tests and metrics)."""
        return sum(len(v) for v in self._watchers.values())

    def notify(self, topic: str, partition: int) -> None:
        """Wake every waiter watching (topic, partition)."""
        if not self._watchers:
            return
        waiters = self._watchers.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Wait until one of ``partitions`` is notified (True) or ``timeout_s`` passes (False)."""
        if self._closed or timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        keys = list(dict.fromkeys(partitions))
        for key in keys:
            self._watchers.setdefault(key, []).append(fut)
        handle = loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            handle.cancel()
            for key in keys:
                lst = self._watchers.get(key)
                if lst is not None:
                    try:
                        lst.remove(fut)
                    except ValueError:
                        pass
                    if not lst:
                        del self._watchers[key]

    def close(self) -> None:
        """Wake every waiter (shutdown): they answer with what they have."""
        self._closed = True
        watchers, self._watchers = self._watchers, {}
        for lst in watchers.values():
            for fut in lst:
                if not fut.done():
                    fut.set_result(True)


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
