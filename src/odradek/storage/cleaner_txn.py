"""Transactions in a log cleaning (Kafka's ``Cleaner`` with ``CleanedTransactionMetadata``):
what the cleaner must know of producers and transactions before it drops any record.

* ``walk_headers`` (step 3 of ``odradek.storage.cleaner``'s docstring) reads every batch
  header of the log as the cleaner's snapshot saw it, and the one record of each control
  batch, and returns a ``HeaderWalk``: each producer's last data batch and last epoch (a
  producer's last batch is kept, possibly empty, so that its state survives the cleaning),
  the transactions aborted in the log (``AbortedTxn``: producer id, first data offset, the
  ABORT marker's offset, as the ``.txnindex`` holds them) and the first unstable offset (the
  first offset of a transaction whose marker is not below the high watermark; nothing from
  there on is cleaned).
* ``CleanedTransactions``, fed a pass's batches in offset order, says which data batches
  belong to aborted transactions (their records go, and are not mapped as a key's latest)
  and which markers may go (no batch of their transaction was read in the pass).
* ``control_type(batch, count)``: the ControlRecordType of a control batch (ABORT 0,
  COMMIT 1), None for a control batch an earlier cleaning emptied.

A batch is the bytes of one RecordBatch v2 (``protocol.records``); its header is unpacked
with ``BATCH_HEADER`` (base offset [0], batch length [1], attributes [5], last offset delta
[6], producer id [9], producer epoch [10], record count [12]).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.records import BATCH_HEADER, BATCH_HEADER_SIZE, LOG_OVERHEAD
from odradek.storage.cleaner_records import (
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    batch_records_data,
    iter_raw_records,
)
from odradek.storage.transaction_index import AbortedTxn, ControlRecordType

__all__ = ["CleanedTransactions", "HeaderWalk", "control_type", "walk_headers"]

_HEADER = BATCH_HEADER
HEADER_SIZE = BATCH_HEADER_SIZE
_CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version, type


def control_type(batch: bytes, count: int) -> int | None:
    """The ControlRecordType of a control batch's record (ABORT 0, COMMIT 1), or None for an
    empty control batch (one the cleaner emptied before)."""
    if count == 0:
        return None
    for _, _, _, _, key, _ in iter_raw_records(batch_records_data(batch), 1):
        if key is not None and len(key) >= _CONTROL_KEY.size:
            return int(_CONTROL_KEY.unpack_from(key)[1])
    return -1


@dataclass(slots=True)
class HeaderWalk:
    """What one header walk of the log found (Kafka takes the first two from the producer
    state and the aborted transactions from the ``.txnindex``: here all come from the log
    itself, which holds every marker the index is built from, so that a log whose producer
    state is not loaded, or a memory log, is cleaned alike).

    ``aborted``: the ``.txnindex`` entries of the transactions aborted in the log
    (producer id, first data offset, ABORT marker's offset). ``first_unstable``: the first
    offset of a transaction whose marker is not below the high watermark: nothing from there
    on is cleaned (Kafka does not clean past the last stable offset)."""

    last_data_offset: dict[int, int] = field(default_factory=dict)  # pid -> last data offset
    last_epoch: dict[int, int] = field(default_factory=dict)  # pid -> its last batch's epoch
    aborted: list[AbortedTxn] = field(default_factory=list)
    first_unstable: int | None = None

    def is_last_of_producer(self, pid: int, last_offset: int, control: bool, epoch: int) -> bool:
        """Kafka's ``isBatchLastRecordOfProducer``: the producer's last data batch, or, for a
        producer with no data batch left, its markers of its last epoch."""
        data_last = self.last_data_offset.get(pid)
        if data_last is not None:
            return last_offset == data_last
        return control and self.last_epoch.get(pid) == epoch


def walk_headers(
    segments: Sequence[tuple[Any, int]], high_watermark: int, pause: Callable[[], None]
) -> HeaderWalk:
    """Read every batch header of the log (and the record of each control batch): the
    ``segments`` (a private reader of each, with ``read(position, size) -> bytes``, and its
    size when the cleaner's snapshot was taken: the segments to clean and the rest of the log),
    calling ``pause`` (the cleaner's I/O throttle) before each header. A marker at or past the
    high watermark does not end its transaction (Kafka's last stable offset counts a
    transaction whose marker is not replicated yet as unstable)."""
    walk = HeaderWalk()
    ongoing: dict[int, int] = {}  # pid -> first offset of its transaction
    for reader, segment_size in segments:
        position = 0
        while position + HEADER_SIZE <= segment_size:
            pause()
            raw = reader.read(position, HEADER_SIZE)
            if len(raw) < HEADER_SIZE:
                break  # the segment shrank under us (a truncation past the high watermark)
            header = _HEADER.unpack_from(raw)
            size = header[1] + LOG_OVERHEAD
            base, attributes, pid = header[0], header[5], header[9]
            last = base + header[6]
            if base >= high_watermark or size < HEADER_SIZE:
                break  # not replicated yet: may still be truncated and rewritten
            if pid >= 0:
                walk.last_epoch[pid] = header[10]
                if not attributes & CONTROL_BIT:
                    walk.last_data_offset[pid] = last
                    if attributes & TRANSACTIONAL_BIT:
                        ongoing.setdefault(pid, base)
                elif last < high_watermark and position + size <= segment_size:
                    first = ongoing.pop(pid, None)
                    kind = control_type(reader.read(position, size), header[12])
                    if first is not None and kind == ControlRecordType.ABORT:
                        walk.aborted.append(AbortedTxn(pid, first, last, last + 1))
            position += size
    walk.first_unstable = min(ongoing.values(), default=None)
    return walk


class CleanedTransactions:
    """Kafka's ``CleanedTransactionMetadata``: fed the batches of a pass in offset order, it
    says which data batches belong to aborted transactions (their records go) and which
    markers may go (no batch of their transaction was read in this pass: the transaction's
    records are all gone already, so the marker only waits for its delete horizon)."""

    __slots__ = ("_aborted", "_aborting", "_committing", "_next")

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._committing: set[int] = set()  # pids with a batch read in an ongoing committed txn
        self._aborting: dict[int, list[Any]] = {}  # pid -> [AbortedTxn, a batch was read]

    def _consume_up_to(self, offset: int) -> None:
        aborted = self._aborted
        while self._next < len(aborted) and aborted[self._next].first_offset <= offset:
            txn = aborted[self._next]
            self._next += 1
            self._aborting.setdefault(txn.producer_id, [txn, False])

    def on_control_batch(self, pid: int, last_offset: int, kind: int | None) -> bool:
        """A marker was read: whether it may be discarded (once its horizon has passed)."""
        self._consume_up_to(last_offset)
        if kind is None:
            return True  # emptied by an earlier cleaning
        if kind == ControlRecordType.ABORT:
            entry = self._aborting.pop(pid, None)
            return not (entry is not None and entry[1])  # kept while its data was seen
        if kind == ControlRecordType.COMMIT:
            if pid in self._committing:
                self._committing.discard(pid)
                return False
            return True
        return False

    def on_batch(self, pid: int, last_offset: int, transactional: bool) -> bool:
        """A data batch was read: whether it belongs to an aborted transaction."""
        self._consume_up_to(last_offset)
        if not transactional:
            return False
        entry = self._aborting.get(pid)
        if entry is not None:
            entry[1] = True
            return True
        self._committing.add(pid)
        return False
