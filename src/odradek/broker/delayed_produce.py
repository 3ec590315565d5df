"""``DelayedProduce``: the acks=all wait of a Produce request, a transaction marker or a
coordinator write after its leader appends (Kafka's ``DelayedProduce``).

``ReplicaManager.append_records`` appends each entry through ``Partition.append_as_leader``;
only when an acks=-1 entry was appended without error and its records are not yet below the
high watermark does it create a ``DelayedProduce`` (acks 0 and 1, and a leader alone, whose
high watermark follows its log end, never do), holding the local outcomes (``results``, one
per entry, in order) and, for every such entry, (index into results, partition, required
offset, min.insync.replicas). ``complete()`` waits for all of those at once through the
replica manager's ``wait_for_acks`` (at most the timeout, each; one partition is awaited
directly, several in a task each), then returns the results with every entry that did not
make it replaced by its error.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from kio.schema.errors import ErrorCode

from odradek.broker.partition import LeaderAppendResult, Partition

__all__ = ["AcksWaiter", "DelayedProduce"]

_NONE = ErrorCode.none


class AcksWaiter(Protocol):
    """What ``DelayedProduce`` waits through (``ReplicaManager.wait_for_acks``)."""

    async def wait_for_acks(
        self, handle: Partition, required_offset: int, min_insync: int, timeout_s: float
    ) -> ErrorCode: ...


class DelayedProduce:
    """The acks=all part of ``ReplicaManager.append_records`` (Kafka's ``DelayedProduce``):
    ``results`` are the local appends' outcomes; ``complete()`` waits (all partitions at
    once, at most the timeout) until the high watermark of every appended partition passes
    its records, and replaces the results of those that did not make it with their error
    (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT)."""

    __slots__ = ("_replicas", "_timeout_s", "_waits", "results")

    def __init__(
        self,
        replicas: AcksWaiter,
        results: list[LeaderAppendResult],
        waits: list[tuple[int, Partition, int, int]],
        timeout_s: float,
    ) -> None:
        self._replicas = replicas
        self.results = results
        self._waits = waits
        """(index into results, partition, required offset, min.insync.replicas)."""
        self._timeout_s = timeout_s if timeout_s > 0.0 else 0.0

    async def complete(self) -> list[LeaderAppendResult]:
        waits = self._waits
        if not waits:
            return self.results
        self._waits = []
        wait = self._replicas.wait_for_acks
        timeout_s = self._timeout_s
        results = self.results
        if len(waits) == 1:  # the common case: no task, no gather
            i, handle, end, min_insync = waits[0]
            code = await wait(handle, end, min_insync, timeout_s)
            if code is not _NONE:
                results[i] = LeaderAppendResult(code)
            return results
        codes = await asyncio.gather(
            *(wait(handle, end, min_insync, timeout_s) for _i, handle, end, min_insync in waits)
        )
        for (i, _handle, _end, _min), code in zip(waits, codes, strict=True):
            if code is not _NONE:
                results[i] = LeaderAppendResult(code)
        return results
