"""Idempotent-producer state of one partition (Kafka's ProducerStateManager, simplified).

For every producer id that wrote to the partition we keep its epoch and the last
``MAX_CACHED_BATCHES`` (5, like Kafka) batches it wrote: (first sequence, last sequence,
first offset, last offset). A new batch from producer P with epoch E and sequences [f, l]:

* P == -1: no idempotence, always accepted.
* E older than P's epoch: INVALID_PRODUCER_EPOCH (47).
* [f, l] equals a cached batch: a duplicate (a retry) — nothing is appended and the producer
  gets success with the original base offset (Kafka's DUPLICATE_SEQUENCE_NUMBER handling).
* E newer than P's epoch: f must be 0 (a bumped epoch restarts the sequences), else
  OUT_OF_ORDER_SEQUENCE_NUMBER (45).
* otherwise f must be the last sequence + 1 (wrapping at 2^31-1 to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER. A producer id we have no state for is accepted with any f
  (its state may have been removed with old segments).

Persistence: ``snapshot()`` returns a JSON-able dict {"offset": next offset covered, "producers":
{pid: [epoch, [[f, l, first_offset, last_offset], ...]]}}; on open the broker loads the last
snapshot and replays the batch headers between its offset and the log end offset
(``update``), so the state survives a restart and a kill -9.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DUPLICATE",
    "INVALID_PRODUCER_EPOCH",
    "MAX_CACHED_BATCHES",
    "OK",
    "OUT_OF_ORDER",
    "ProducerStateManager",
    "Verdict",
]

MAX_CACHED_BATCHES = 5


class Verdict(enum.Enum):
    """What ``ProducerStateManager.check`` says about a new batch."""

    OK = "ok"
    """Append it."""
    DUPLICATE = "duplicate"
    """A retry of a cached batch: answer with its first offset, append nothing."""
    OUT_OF_ORDER = "out_of_order"
    """OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    """INVALID_PRODUCER_EPOCH (47)."""


OK = Verdict.OK
DUPLICATE = Verdict.DUPLICATE
OUT_OF_ORDER = Verdict.OUT_OF_ORDER
INVALID_PRODUCER_EPOCH = Verdict.INVALID_PRODUCER_EPOCH
_SEQ_MAX = 2**31 - 1


@dataclass(slots=True)
class _Entry:
    epoch: int
    batches: deque[tuple[int, int, int, int]] = field(
        default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES)
    )


class ProducerStateManager:
    """Producer id → epoch and recent batches, for one partition."""

    __slots__ = ("_producers", "dirty", "offset")

    def __init__(self) -> None:
        self._producers: dict[int, _Entry] = {}
        self.offset = 0
        """Next log offset whose batches are not reflected in this state."""
        self.dirty = False

    def check(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> tuple[Verdict, int]:
        """(verdict, the duplicate's first offset or -1)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return OK, -1
        if epoch < entry.epoch:
            return INVALID_PRODUCER_EPOCH, -1
        if epoch > entry.epoch:
            return (OK, -1) if first_seq == 0 else (OUT_OF_ORDER, -1)
        for f, last, fo, _lo in entry.batches:
            if f == first_seq and last == last_seq:
                return DUPLICATE, fo
        if not entry.batches:
            return OK, -1
        last = entry.batches[-1][1]
        expected = 0 if last == _SEQ_MAX else last + 1
        if first_seq != expected:
            return OUT_OF_ORDER, -1
        return OK, -1

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
    ) -> None:
        """Record one appended batch: on the produce path and when replaying the log's batch
        headers. A batch without a producer id or sequence (-1: not idempotent, or a control
        batch replayed as such) only moves ``offset``."""
        if producer_id >= 0 and first_seq >= 0:
            entry = self._producers.get(producer_id)
            if entry is None or epoch != entry.epoch:
                entry = _Entry(epoch)
                self._producers[producer_id] = entry
            entry.batches.append((first_seq, last_seq, first_offset, last_offset))
            self.dirty = True
        if last_offset + 1 > self.offset:
            self.offset = last_offset + 1

    def producer_epoch(self, producer_id: int) -> int | None:
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.epoch

    def __len__(self) -> int:
        return len(self._producers)

    def snapshot(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "producers": {
                str(pid): [e.epoch, [list(b) for b in e.batches]]
                for pid, e in self._producers.items()
            },
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> ProducerStateManager:
        state = cls()
        state.offset = int(data.get("offset", 0))
        for pid, (epoch, batches) in data.get("producers", {}).items():
            entry = _Entry(int(epoch))
            for b in batches:
                entry.batches.append((int(b[0]), int(b[1]), int(b[2]), int(b[3])))
            state._producers[int(pid)] = entry
        return state

    def truncate_before(self, log_start_offset: int) -> None:
        """Forget batches below the log start (retention); drop producers with none left."""
        for pid in list(self._producers):
            entry = self._producers[pid]
            while entry.batches and entry.batches[0][3] < log_start_offset:
                entry.batches.popleft()
            if not entry.batches:
                del self._producers[pid]
