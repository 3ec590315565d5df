"""Transactions on the partition side: control batches, the aborted-transaction index and the
last stable offset.

**Control batches** (KIP-98). A transaction marker is a batch with the control and
transactional attribute bits set, the transaction's producer id and epoch, base sequence -1 and
exactly one record whose key is ``ControlRecordType`` (version int16 = 0, type int16: 0 ABORT,
1 COMMIT) and whose value is ``EndTxnMarker`` (version int16 = 0, coordinator_epoch int32).
``build_control_batch`` / ``parse_control_record``.

**The aborted-transaction index** (Kafka's ``TransactionIndex``, one ``<base offset>.txnindex``
per segment, next to its ``.log``): a sequence of 34-byte entries, all big-endian::

    version int16 (= 0), producer_id int64, first_offset int64, last_offset int64,
    last_stable_offset int64

An entry is an aborted transaction: its first data offset, the offset of its ABORT marker
(``last_offset``), and the partition's LSO once it completed. Entries are appended in
``last_offset`` order to the index of the segment holding the marker. A read_committed Fetch
from ``fetch_offset`` whose answer ends before ``upper_bound`` needs every entry with
``last_offset >= fetch_offset`` and ``first_offset < upper_bound``; scanning segments in order
stops at the first entry with ``last_stable_offset >= upper_bound`` (later ones cannot overlap).

**The last stable offset** (``TransactionTracker``, the transaction part of Kafka's
``ProducerStateManager``): fed every batch appended to a partition, it keeps each producer's
ongoing transaction (first offset), and the transactions completed above the high watermark
(their markers are not yet replicated). Invariants::

    first_unstable_offset = min(first offset of every ongoing or unreplicated transaction)
    last_stable_offset    = min(first_unstable_offset, high_watermark)
    an aborted transaction's (first_offset, last_offset, lso) is recorded when its marker is
    appended, with lso = first offset of the earliest other ongoing transaction, else
    last_offset + 1 (Kafka's lastStableOffset(completedTxn))

read_committed consumers read below the LSO and drop the records of the aborted transactions
the Fetch response lists (``aborted_transactions(fetch_offset, upper_bound)``). Pure: no I/O,
except ``TransactionIndex`` when it is given a path.
"""

from __future__ import annotations

import enum
import os
import struct
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from odradek.protocol.records import RecordBatch, build_batch

__all__ = [
    "ABORTED_TXN_SIZE",
    "AbortedTxn",
    "CompletedTxn",
    "ControlRecordType",
    "TransactionIndex",
    "TransactionIndexFiles",
    "TransactionTracker",
    "TxnIndexSearchResult",
    "build_control_batch",
    "collect_aborted_txns",
    "parse_control_record",
]

_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


# -- control batches -----------------------------------------------------------------------


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    marker: ControlRecordType,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT/ABORT marker batch (what WriteTxnMarkers appends on a partition leader)."""
    key = _CONTROL_KEY.pack(0, int(marker))
    value = _END_TXN_MARKER.pack(0, coordinator_epoch)
    return build_batch(
        [(key, value, (), timestamp_ms)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def parse_control_record(key: bytes | None, value: bytes | None) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control record; coordinator epoch -1 when the
    type is not ABORT/COMMIT (Kafka skips unknown control types). ValueError when malformed."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise ValueError("control record key is too short")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ValueError(f"bad ControlRecordType version {version}")
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return int(kind), -1
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise ValueError("EndTxnMarker value is too short")
    _, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    return int(kind), int(coordinator_epoch)


# -- the index -----------------------------------------------------------------------------


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, *self)

    @classmethod
    def decode(cls, data: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != 0:
            raise ValueError(f"unknown aborted-transaction entry version {version}")
        return cls(*fields)


def _last_offset(txn: AbortedTxn) -> int:
    return txn.last_offset


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted: list[AbortedTxn]
    is_complete: bool  # an entry with last_stable_offset >= upper_bound was seen: stop here


class TransactionIndex:
    """One segment's ``.txnindex`` (``path`` None: in memory). A partial trailing entry left by
    a crash is ignored on open and overwritten by the next append."""

    def __init__(self, start_offset: int, path: Path | str | None = None) -> None:
        self.start_offset = start_offset
        self.path = None if path is None else Path(path)
        self.entries: list[AbortedTxn] = []
        if self.path is not None and self.path.exists():
            data = self.path.read_bytes()
            whole = len(data) - len(data) % ABORTED_TXN_SIZE
            self.entries = [AbortedTxn.decode(data, p) for p in range(0, whole, ABORTED_TXN_SIZE)]
            if whole != len(data):
                os.truncate(self.path, whole)

    def append(self, txn: AbortedTxn) -> None:
        """Entries come in ``last_offset`` order (ValueError otherwise, as Kafka)."""
        if self.entries and txn.last_offset < self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction {txn} ends before the last entry {self.entries[-1]}"
            )
        self.entries.append(txn)
        if self.path is not None:
            with open(self.path, "ab") as f:
                f.write(txn.encode())

    def flush(self) -> None:
        if self.path is not None and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset`` (log truncation). The file
        stays, empty when no entry is left, until its segment goes: Kafka's
        ``TransactionIndex.truncateTo`` cuts the file at the first such entry and keeps it
        (``LogSegment.truncateTo`` never deletes a kept segment's index). Nothing can tell an
        empty file from an absent one: both open as no entries (Kafka creates the file only
        at the first append, so a segment without one is normal), and the next append goes
        after the last whole entry."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            if self.path is not None:
                os.truncate(self.path, len(keep) * ABORTED_TXN_SIZE)

    def remove(self, last_offsets: set[int]) -> bool:
        """Drop the entries whose ABORT marker (``last_offset``) is in ``last_offsets``: the
        log cleaner removed those markers, after the transactions' records (Kafka rewrites a
        cleaned segment's index with the transactions it kept). The file is replaced
        atomically. Whether anything was dropped."""
        keep = [t for t in self.entries if t.last_offset not in last_offsets]
        if len(keep) == len(self.entries):
            return False
        self.entries = keep
        if self.path is not None and self.path.exists():
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(b"".join(t.encode() for t in keep))
            os.replace(tmp, self.path)
        return True

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> TxnIndexSearchResult:
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return TxnIndexSearchResult(out, True)
        return TxnIndexSearchResult(out, False)

    def delete(self) -> None:
        self.entries = []
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def collect_aborted_txns(
    indexes: Iterable[TransactionIndex], fetch_offset: int, upper_bound: int
) -> list[AbortedTxn]:
    """Aborted transactions overlapping [fetch_offset, upper_bound) from the indexes of the
    segments from the one holding ``fetch_offset`` on, in order (Kafka's
    collectAbortedTransactions)."""
    out: list[AbortedTxn] = []
    for index in indexes:
        result = index.collect_aborted_txns(fetch_offset, upper_bound)
        out += result.aborted
        if result.is_complete:
            break
    return out


# -- the tracker ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class TransactionTracker:
    """The transactions of one partition, fed the batches appended to it (leader or
    follower, or the log replayed at recovery). Kafka's names: ongoing transactions,
    first unstable offset, last stable offset, aborted transactions."""

    def __init__(self, high_watermark: int = 0) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its transaction
        self.unreplicated: list[CompletedTxn] = []  # completed, marker at or above the HW
        self.aborted: list[AbortedTxn] = []
        self.high_watermark = high_watermark
        self.coordinator_epochs: dict[int, int] = {}  # producer id -> last marker's

    @classmethod
    def rebuild(
        cls, batches: Iterable[RecordBatch], high_watermark: int
    ) -> tuple[TransactionTracker, list[AbortedTxn]]:
        """Recovery: a tracker fed ``batches`` (the log from its start or from a snapshot) and
        the index entries they produce, to rewrite the ``.txnindex`` files of the segments
        recovery scanned."""
        tracker = cls()
        entries = []
        for batch in batches:
            entry = tracker.append_batch(batch)
            if entry is not None:
                entries.append(entry)
        tracker.update_high_watermark(high_watermark)
        return tracker, entries

    def append_batch(self, batch: RecordBatch) -> AbortedTxn | None:
        """Account for a batch just appended (offsets assigned). Returns the entry to add to
        the active segment's ``.txnindex`` when the batch is an ABORT marker."""
        if not batch.is_transactional:
            return None
        pid = batch.producer_id
        if not batch.is_control:
            self.ongoing.setdefault(pid, batch.base_offset)
            return None
        for record in batch.records():
            kind, coordinator_epoch = parse_control_record(record.key, record.value)
            if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                return self.end_transaction(
                    pid, record.offset, kind == ControlRecordType.ABORT, coordinator_epoch
                )
        return None

    def append_data(self, producer_id: int, first_offset: int) -> None:
        """A transactional data batch starting at ``first_offset`` (same as append_batch)."""
        self.ongoing.setdefault(producer_id, first_offset)

    def end_transaction(
        self, producer_id: int, marker_offset: int, aborted: bool, coordinator_epoch: int = -1
    ) -> AbortedTxn | None:
        """A COMMIT/ABORT marker at ``marker_offset``. A marker for a producer with no ongoing
        transaction (a retried WriteTxnMarkers) completes an empty transaction: nothing to
        index. The caller checks the marker's epochs beforehand (``check_marker``)."""
        self.coordinator_epochs[producer_id] = max(
            coordinator_epoch, self.coordinator_epochs.get(producer_id, -1)
        )
        first = self.ongoing.get(producer_id)
        if first is None:
            return None
        completed = CompletedTxn(producer_id, first, marker_offset, aborted)
        lso = self._lso_after(completed)
        del self.ongoing[producer_id]
        if marker_offset >= self.high_watermark:
            self.unreplicated.append(completed)
        if not aborted:
            return None
        entry = AbortedTxn(producer_id, first, marker_offset, lso)
        self.aborted.append(entry)
        return entry

    def check_marker(self, producer_id: int, coordinator_epoch: int) -> bool:
        """False when a newer coordinator already wrote a marker for this producer
        (TRANSACTION_COORDINATOR_FENCED)."""
        return coordinator_epoch >= self.coordinator_epochs.get(producer_id, -1)

    def _lso_after(self, completed: CompletedTxn) -> int:
        others = [f for pid, f in self.ongoing.items() if pid != completed.producer_id]
        return min(others, default=completed.last_offset + 1)

    def update_high_watermark(self, high_watermark: int) -> None:
        self.high_watermark = high_watermark
        self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    @property
    def first_unstable_offset(self) -> int | None:
        firsts = list(self.ongoing.values()) + [t.first_offset for t in self.unreplicated]
        return min(firsts, default=None)

    @property
    def last_stable_offset(self) -> int:
        first = self.first_unstable_offset
        return self.high_watermark if first is None else min(first, self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), in marker order.
        ``aborted`` is in marker order: bisect to the first marker at or past
        ``fetch_offset``, and stop after an entry whose ``last_stable_offset`` reaches
        ``upper_bound`` (every later transaction starts at or past it), as the index search
        does."""
        aborted = self.aborted
        out = []
        for i in range(bisect_left(aborted, fetch_offset, key=_last_offset), len(aborted)):
            t = aborted[i]
            if t.first_offset < upper_bound:
                out.append(t)
            if t.last_stable_offset >= upper_bound:
                break
        return out

    def truncate_to(self, offset: int) -> None:
        """Forget what lies at or past ``offset``: ongoing transactions that start there and
        aborted entries whose marker is there. A transaction whose marker is truncated away
        comes back only by replaying the log: rebuild the tracker after a truncation that cuts
        through markers (as Kafka reloads producer state from a snapshot)."""
        self.ongoing = {p: f for p, f in self.ongoing.items() if f < offset}
        self.aborted = [t for t in self.aborted if t.last_offset < offset]
        self.unreplicated = [t for t in self.unreplicated if t.last_offset < offset]

    def advance_log_start_offset(self, offset: int) -> None:
        """Retention / DeleteRecords: aborted transactions wholly below the log start go."""
        self.aborted = [t for t in self.aborted if t.last_offset >= offset]


# -- the .txnindex files of one partition ----------------------------------------------------


class TransactionIndexFiles:
    """The ``<base offset>.txnindex`` files of one partition directory (``directory`` None: in
    memory, nothing written). An entry goes to the index of the segment holding its ABORT
    marker: the segment with the largest base offset at or below ``last_offset``.

    ``load(replay_from)`` reads every file, keeps the entries whose marker lies below
    ``replay_from`` (the log is replayed from there and adds the others again) and truncates
    the files to them, so a crash between a marker and its index entry, or an index entry
    whose marker was lost, is repaired. Files of segments deleted by retention are removed by
    ``delete_below``, files of segments deleted by a log truncation (every base past the log
    end offset) by ``delete_above``; ``truncate_to`` follows a log truncation in memory.

    The log's own segment deletion leaves the ``.txnindex`` files to this class: the log
    cleaner merges segments into the first of a group without moving their entries, so the
    index of a merged segment stays at its old base, below the log end, and stays in use."""

    SUFFIX = ".txnindex"

    def __init__(self, directory: Path | str | None) -> None:
        self.directory = None if directory is None else Path(directory)
        self.indexes: dict[int, TransactionIndex] = {}

    def _path(self, base: int) -> Path | None:
        return None if self.directory is None else self.directory / f"{base:020d}{self.SUFFIX}"

    def load(self, replay_from: int) -> list[AbortedTxn]:
        if self.directory is None or not self.directory.is_dir():
            return []
        for path in sorted(self.directory.glob("*" + self.SUFFIX)):
            stem = path.name[: -len(self.SUFFIX)]
            if len(stem) != 20 or not stem.isdigit():
                continue
            base = int(stem)
            try:
                index = TransactionIndex(base, path)
                index.truncate_to(replay_from)
            except (OSError, ValueError):
                path.unlink(missing_ok=True)  # rebuilt by the replay only from replay_from
                continue
            self.indexes[base] = index
        out = [e for base in sorted(self.indexes) for e in self.indexes[base].entries]
        out.sort(key=lambda e: e.last_offset)
        return out

    def append(self, entry: AbortedTxn, segment_bases: list[int]) -> None:
        base = 0
        for b in segment_bases:
            if b > entry.last_offset:
                break
            base = b
        index = self.indexes.get(base)
        if index is None:
            index = self.indexes[base] = TransactionIndex(base, self._path(base))
        index.append(entry)

    def truncate_to(self, offset: int) -> None:
        for base in list(self.indexes):
            if base >= offset and base > 0:
                self.indexes.pop(base).delete()
            else:
                self.indexes[base].truncate_to(offset)

    def delete_below(self, segment_bases: list[int]) -> None:
        """Remove the indexes of segments that no longer exist below the first one."""
        first = segment_bases[0] if segment_bases else 0
        for base in [b for b in self.indexes if b < first]:
            self.indexes.pop(base).delete()

    def delete_above(self, log_end_offset: int) -> None:
        """Remove the indexes whose base is past ``log_end_offset``: their segments were
        deleted by a truncation (no segment starts past the log end) and every entry's marker
        lay past it, so none is left. Kafka deletes a segment's ``.txnindex`` with the
        segment (``LogSegment.deleteIfExists``); without this the emptied file would stay
        with no ``.log`` beside it until retention passed its base."""
        for base in [b for b in self.indexes if b > log_end_offset]:
            self.indexes.pop(base).delete()

    def flush(self) -> None:
        for index in self.indexes.values():
            index.flush()

    def remove(self, last_offsets: set[int]) -> None:
        """Drop the entries of the ABORT markers at ``last_offsets`` (``TransactionIndex.remove``)."""
        for index in self.indexes.values():
            index.remove(last_offsets)

    @classmethod
    def remove_from_directory(cls, directory: Path | str, last_offsets: set[int]) -> None:
        """``remove`` on the ``.txnindex`` files of ``directory`` when no producer state holds
        them (its next load reads the files)."""
        for path in sorted(Path(directory).glob("*" + cls.SUFFIX)):
            stem = path.name[: -len(cls.SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                TransactionIndex(int(stem), path).remove(last_offsets)
