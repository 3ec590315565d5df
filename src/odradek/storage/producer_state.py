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

It lives next to the log, as Kafka's ProducerStateManager lives in its log layer.

Persistence: ``snapshot()`` returns a JSON-able dict {"offset": next offset covered, "producers":
{pid: [epoch, [[f, l, first_offset, last_offset], ...]]}}, written as JSON by
``snapshot_payload``/``write_snapshot`` (atomic rename, no fsync: a lost snapshot only costs a
longer replay). ``ProducerStateManager.load(log, path)`` reads the last snapshot (ignored when
unreadable or outside the log's offsets) and replays the batch headers between its offset
and the log end offset (``update``), so the state survives a restart and a kill -9.
"""

from __future__ import annotations

import enum
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.storage.api import PartitionLog
from odradek.storage.checkpoint import write_atomic
from odradek.storage.scan import scan_to_end

__all__ = [
    "DUPLICATE",
    "INVALID_PRODUCER_EPOCH",
    "MAX_CACHED_BATCHES",
    "OK",
    "OUT_OF_ORDER",
    "ProducerStateManager",
    "Verdict",
    "write_snapshot",
]

log = logging.getLogger("odradek.storage")

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
_SEQ_MOD = 2**31


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

    # -- loading and snapshots -----------------------------------------------------------------

    @classmethod
    def load(cls, plog: PartitionLog, snapshot_path: Path | None) -> ProducerStateManager:
        """The state of ``plog``: its last snapshot (when usable), then the batch headers from
        the snapshot's offset (or the log start) to the log end offset."""
        state: ProducerStateManager | None = None
        start = plog.log_start_offset
        if snapshot_path is not None and snapshot_path.exists():
            try:
                state = cls.from_snapshot(json.loads(snapshot_path.read_text()))
            except (OSError, ValueError, KeyError, TypeError, IndexError):
                log.warning("ignoring unreadable producer state snapshot %s", snapshot_path)
                state = None
            if state is not None and not (start <= state.offset <= plog.log_end_offset):
                state = None
        if state is None:
            state = cls()
            state.offset = start
        state.replay(plog)
        state.dirty = True
        return state

    def replay(self, plog: PartitionLog) -> None:
        """Apply the batch headers in [self.offset, log end offset) of ``plog``."""
        for batches in scan_to_end(plog, self.offset):
            for batch in batches:
                base_offset = batch.base_offset
                last_delta = batch.last_offset_delta
                if batch.is_control:  # control batches carry no sequence
                    pid = base_seq = -1
                else:
                    pid, base_seq = batch.producer_id, batch.base_sequence
                last_seq = (base_seq + last_delta) % _SEQ_MOD if base_seq >= 0 else -1
                self.update(
                    pid,
                    batch.producer_epoch,
                    base_seq,
                    last_seq,
                    base_offset,
                    base_offset + last_delta,
                )

    def snapshot_payload(self, plog: PartitionLog, force: bool = False) -> bytes | None:
        """The JSON snapshot when the state changed since the last one (or ``force``), covering
        every batch up to ``plog``'s log end offset (call it on the thread that appends)."""
        if not (self.dirty or force):
            return None
        self.offset = max(self.offset, plog.log_end_offset)
        self.dirty = False
        return json.dumps(self.snapshot()).encode()


def write_snapshot(path: Path, payload: bytes) -> None:
    """Write one snapshot (atomic rename, no fsync); failures are logged, not raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, payload, fsync=False)
    except OSError:
        log.exception("producer state snapshot %s failed", path)
