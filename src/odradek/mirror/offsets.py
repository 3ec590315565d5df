"""Offset syncs: when to emit them and how to translate with them (pure).

An offset sync ``(upstream, downstream)`` says: the record at ``upstream`` in the source
partition was written at ``downstream`` in the remote partition.

Emission (``SyncEmitter``, as MM2's MirrorSourceTask): a record's pair is emitted when it is the
first record of this process's lifetime for the partition, when the last emitted sync would
translate it more than ``offset.lag.max`` records back (``downstream - (last_sync + 1) >=
offset.lag.max``), when upstream offsets skipped (compaction, transaction markers, a reset), or
when the downstream offset went back (the remote topic was recreated). Every other pair is kept
as the partition's *delayed* sync and emitted by ``promote`` (done periodically), so that a group
at the end of the topic translates exactly.

Translation (``OffsetSyncStore``, as MM2 3.9's OffsetSyncStore after KAFKA-12468): a committed
upstream offset ``g`` translates to the *nearest preceding* sync ``s`` (largest ``s.upstream <=
g``) as ``s.downstream + (0 if g == s.upstream else 1)``: never ahead of the group, so a
consumer that moves to the target skips nothing; nothing is translated before the sync topic
has been read to its end. Unlike MM2, which thins old syncs exponentially (so a group far behind
is translated thousands of records back), the store keeps every sync at or above the lowest
offset a known group still needs (``retain_from``: only syncs below it are thinned when a
partition holds ``max_per_partition``, up to twice that), so translation is always within ``offset.lag.max`` of
the group.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from odradek.client.types import TopicPartition

__all__ = ["OffsetSyncStore", "SyncEmitter"]


class SyncEmitter:
    """Per source partition: which (upstream, downstream) pairs become offset syncs."""

    __slots__ = ("delayed", "last_sync_downstream", "max_lag", "previous_downstream", "previous_upstream")

    def __init__(self, max_lag: int) -> None:
        self.max_lag = max_lag
        self.last_sync_downstream = -1
        self.previous_upstream = -1
        self.previous_downstream = -1
        self.delayed: tuple[int, int] | None = None

    def update(self, upstream: int, downstream: int) -> bool:
        """Record one copied record; True when its pair must be emitted now."""
        emit = (
            self.last_sync_downstream == -1
            or downstream - (self.last_sync_downstream + 1) >= self.max_lag
            or upstream - self.previous_upstream != 1
            or downstream < self.previous_downstream
        )
        self.previous_upstream = upstream
        self.previous_downstream = downstream
        if emit:
            self.last_sync_downstream = downstream
            self.delayed = None
        else:
            self.delayed = (upstream, downstream)
        return emit

    def promote(self) -> tuple[int, int] | None:
        """The delayed pair to emit now (once), or None."""
        pair, self.delayed = self.delayed, None
        if pair is not None:
            self.last_sync_downstream = pair[1]
        return pair


class OffsetSyncStore:
    """Syncs read from ``mm2-offset-syncs.<target>.internal``, per upstream partition, sorted."""

    def __init__(self, max_per_partition: int = 100_000) -> None:
        self._up: dict[TopicPartition, list[int]] = {}
        self._down: dict[TopicPartition, list[int]] = {}
        self.read_to_end = False
        self.max_per_partition = max_per_partition
        self._floor: dict[TopicPartition, int] = {}

    def add(self, tp: TopicPartition, upstream: int, downstream: int) -> None:
        ups = self._up.setdefault(tp, [])
        downs = self._down.setdefault(tp, [])
        if ups and (upstream <= ups[-1] or downstream < downs[-1]):
            # the source was truncated or the remote topic recreated: older syncs may lie
            i = bisect.bisect_left(ups, upstream) if upstream <= ups[-1] else len(ups)
            j = bisect.bisect_right(downs, downstream) if downstream < downs[-1] else len(downs)
            k = min(i, j)
            del ups[k:], downs[k:]
        ups.append(upstream)
        downs.append(downstream)
        if len(ups) > self.max_per_partition:
            # bound memory: thin every other sync no known group needs (those before the last
            # one at or below the floor); past twice the bound, thin the older half regardless
            floor = self._floor.get(tp)
            cut = bisect.bisect_right(ups, floor) - 1 if floor is not None else 0
            if cut < 2 and len(ups) > 2 * self.max_per_partition:
                cut = len(ups) // 2
            if cut >= 2:
                ups[:cut] = ups[:cut:2]
                downs[:cut] = downs[:cut:2]

    def retain_from(self, tp: TopicPartition, upstream: int) -> None:
        """Known groups need no sync before the last one at or below ``upstream`` in ``tp``:
        those are the first thinned when the partition holds ``max_per_partition`` syncs
        (a group that moves back is still translated, from a sync further back)."""
        self._floor[tp] = upstream

    def translate(self, tp: TopicPartition, upstream: int) -> int | None:
        """The downstream offset for committed upstream offset ``upstream``; None when it cannot
        be translated (no sync at or before it, or the sync topic not yet read to its end)."""
        if not self.read_to_end:
            return None
        ups = self._up.get(tp)
        if not ups:
            return None
        i = bisect.bisect_right(ups, upstream) - 1
        if i < 0:
            return None
        return self._down[tp][i] + (0 if ups[i] == upstream else 1)

    def partitions(self) -> Iterable[TopicPartition]:
        return self._up.keys()

    def syncs(self, tp: TopicPartition) -> list[tuple[int, int]]:
        return list(zip(self._up.get(tp, []), self._down.get(tp, []), strict=True))
