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

Transactions (KIP-98): ``txn`` is the partition's ``TransactionTracker`` (ongoing transactions,
last stable offset, aborted transactions) and ``txn_indexes`` its ``.txnindex`` files. A
transactional data batch opens (or extends) its producer's transaction
(``append_txn_data``); a COMMIT/ABORT marker (``check_marker`` then ``apply_marker``) ends it,
bumps the producer's epoch to the marker's (so older-epoch data is fenced:
INVALID_PRODUCER_EPOCH) and, for an abort, appends the index entry.

Persistence: ``snapshot()`` returns a JSON-able dict {"offset": next offset covered, "producers":
{pid: [epoch, [[f, l, first_offset, last_offset], ...]]}, "txn": {"ongoing": {pid: first offset},
"epochs": {pid: coordinator epoch of its last marker}}} plus "epoch" (the leader epoch of the
last offset covered: a load ignores the snapshot when the log's differs), written as JSON by
``snapshot_payload``/``write_snapshot`` (atomic rename, no fsync: a lost snapshot only costs a
longer replay). ``ProducerStateManager.load(log, path)`` reads the last snapshot (ignored when
unreadable or outside the log's offsets) reads the ``.txnindex`` entries whose markers lie below
the snapshot's offset and replays the batches between its offset and the log end offset
(``update``, and the markers into the tracker and the index files), so the state survives a
restart and a kill -9. A snapshot holds no aborted transactions: they live in the log's index,
which every load truncates to the snapshot's offset and keeps below it (Kafka's
``truncateAndReload``: the producer entries reload from a snapshot, the transaction index is
truncated with the log). A log without a directory (``MemoryLog``) keeps that index in memory,
with the log (``_MEMORY_INDEXES``), not with one loaded state, so that a reload after a
truncation keeps the aborted transactions below its snapshot as the files do. ``load_async``
does the same in chunks, yielding to the event loop.

Replicas: a follower applies the batches it copies from the leader (``apply_batches``, the same
code as the replay), so its state is current when it becomes the leader; after a truncation
the broker reloads it (``Partition.truncate_to``).
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.protocol.records import BatchHeader, RecordBatch, iter_batch_headers
from odradek.storage.api import PartitionLog
from odradek.storage.checkpoint import write_atomic
from odradek.storage.scan import scan_to_end
from odradek.storage.transaction_index import (
    AbortedTxn,
    ControlRecordType,
    TransactionIndexFiles,
    TransactionTracker,
    parse_control_record,
)

__all__ = [
    "DUPLICATE",
    "INVALID_PRODUCER_EPOCH",
    "MAX_CACHED_BATCHES",
    "OK",
    "OUT_OF_ORDER",
    "MarkerVerdict",
    "ProducerStateManager",
    "Verdict",
    "loaded_state",
    "move_loaded_state",
    "snapshot_offset",
    "write_snapshot",
]

log = logging.getLogger("odradek.storage")

MAX_CACHED_BATCHES = 5

# the state last loaded for each log (the log cleaner tells it which aborted transactions'
# markers it removed); weak keys: a closed and dropped log takes its entry with it
_LOADED: weakref.WeakKeyDictionary[Any, ProducerStateManager] = weakref.WeakKeyDictionary()

# the in-memory aborted-transaction index of each log without a directory (a MemoryLog). It
# belongs to the log, not to one loaded state, as the ``.txnindex`` files do on disk: a reload
# (after a truncation, from a snapshot, which holds no aborted transactions) reads the entries
# below its replay offset from it, as it reads them from the files; weak keys, as ``_LOADED``
_MEMORY_INDEXES: weakref.WeakKeyDictionary[Any, TransactionIndexFiles] = weakref.WeakKeyDictionary()


def loaded_state(plog: Any) -> ProducerStateManager | None:
    """The producer state last loaded for ``plog`` (``load`` / ``load_async``), if any."""
    return _LOADED.get(plog)


def move_loaded_state(old: Any, new: Any) -> None:
    """``new`` replaces ``old`` (a log moved to another log dir): the state loaded for
    ``old`` is ``new``'s from now on."""
    state = _LOADED.pop(old, None)
    if state is not None:
        _LOADED[new] = state


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
_BASE_OFFSET = BatchHeader._fields.index("base_offset")
_ATTRIBUTES = BatchHeader._fields.index("attributes")
_LAST_OFFSET_DELTA = BatchHeader._fields.index("last_offset_delta")
_PRODUCER_ID = BatchHeader._fields.index("producer_id")
_PRODUCER_EPOCH = BatchHeader._fields.index("producer_epoch")
_BASE_SEQUENCE = BatchHeader._fields.index("base_sequence")
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_SEQ_MAX = 2**31 - 1
_SEQ_MOD = 2**31


class MarkerVerdict(enum.Enum):
    """What ``ProducerStateManager.check_marker`` says about a COMMIT/ABORT marker."""

    OK = "ok"
    COORDINATOR_FENCED = "coordinator_fenced"
    """A newer coordinator epoch wrote a marker for this producer: TRANSACTION_COORDINATOR_FENCED."""
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    """The marker's producer epoch is older than the producer's: INVALID_PRODUCER_EPOCH."""


@dataclass(slots=True)
class _Entry:
    epoch: int
    batches: deque[tuple[int, int, int, int]] = field(
        default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES)
    )


class ProducerStateManager:
    """Producer id → epoch and recent batches, for one partition."""

    __slots__ = ("_producers", "dirty", "offset", "txn", "txn_indexes")

    def __init__(self, txn_index_dir: Path | None = None) -> None:
        self._producers: dict[int, _Entry] = {}
        self.offset = 0
        """Next log offset whose batches are not reflected in this state."""
        self.dirty = False
        self.txn = TransactionTracker()
        self.txn_indexes = TransactionIndexFiles(txn_index_dir)

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

    # -- transactions --------------------------------------------------------------------------

    def append_txn_data(self, producer_id: int, first_offset: int) -> None:
        """A transactional data batch of ``producer_id`` was appended at ``first_offset``."""
        if producer_id not in self.txn.ongoing:
            self.txn.append_data(producer_id, first_offset)
            self.dirty = True

    def in_transaction(self, producer_id: int) -> bool:
        return producer_id in self.txn.ongoing

    def check_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> MarkerVerdict:
        if not self.txn.check_marker(producer_id, coordinator_epoch):
            return MarkerVerdict.COORDINATOR_FENCED
        entry = self._producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            return MarkerVerdict.INVALID_PRODUCER_EPOCH
        return MarkerVerdict.OK

    def apply_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        offset: int,
        aborted: bool,
        coordinator_epoch: int,
        segment_bases: list[int],
    ) -> AbortedTxn | None:
        """A COMMIT/ABORT marker appended at ``offset``: the transaction ends, the producer's
        epoch becomes the marker's, an abort is indexed (returned)."""
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            self._producers[producer_id] = _Entry(producer_epoch)
        aborted_txn = self.txn.end_transaction(producer_id, offset, aborted, coordinator_epoch)
        if aborted_txn is not None:
            self.txn_indexes.append(aborted_txn, segment_bases)
        self.dirty = True
        if offset + 1 > self.offset:
            self.offset = offset + 1
        return aborted_txn

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: below the high watermark and every ongoing transaction's first offset."""
        txn = self.txn
        if txn.high_watermark != high_watermark:
            txn.update_high_watermark(high_watermark)
        return txn.last_stable_offset

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        return self.txn.aborted_transactions(fetch_offset, upper_bound)

    def forget_aborted(self, last_offsets: set[int]) -> None:
        """The log cleaner removed the ABORT markers at ``last_offsets`` (after every record of
        their transactions): their aborted-transaction entries go too, from memory and from the
        ``.txnindex`` files, so that a read_committed Fetch never lists an aborted transaction
        whose marker is gone (a consumer would skip the producer's later transactions)."""
        self.txn.aborted = [t for t in self.txn.aborted if t.last_offset not in last_offsets]
        self.txn_indexes.remove(last_offsets)

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        """What DescribeProducers shows for each producer id (Kafka's ``activeProducers``):
        ``(producer_id, epoch, last sequence or -1, coordinator epoch of its last marker or
        -1, first offset of its ongoing transaction or -1)``, by producer id."""
        txn = self.txn
        out = []
        for pid in sorted(set(self._producers) | set(txn.ongoing)):
            entry = self._producers.get(pid)
            epoch = entry.epoch if entry is not None else -1
            last_seq = entry.batches[-1][1] if entry is not None and entry.batches else -1
            out.append(
                (
                    pid,
                    epoch,
                    last_seq,
                    txn.coordinator_epochs.get(pid, -1),
                    txn.ongoing.get(pid, -1),
                )
            )
        return out

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
            "txn": {
                "ongoing": {str(pid): first for pid, first in self.txn.ongoing.items()},
                "epochs": {str(pid): ce for pid, ce in self.txn.coordinator_epochs.items()},
            },
        }

    @classmethod
    def from_snapshot(
        cls, data: dict[str, Any], txn_index_dir: Path | None = None
    ) -> ProducerStateManager:
        state = cls(txn_index_dir)
        state.offset = int(data.get("offset", 0))
        txn = data.get("txn", {})
        state.txn.ongoing = {int(p): int(f) for p, f in txn.get("ongoing", {}).items()}
        state.txn.coordinator_epochs = {int(p): int(e) for p, e in txn.get("epochs", {}).items()}
        for pid, (epoch, batches) in data.get("producers", {}).items():
            entry = _Entry(int(epoch))
            for b in batches:
                entry.batches.append((int(b[0]), int(b[1]), int(b[2]), int(b[3])))
            state._producers[int(pid)] = entry
        return state

    def truncate_before(
        self, log_start_offset: int, segment_bases: list[int] | None = None
    ) -> None:
        """Forget batches below the log start (retention); drop producers with none left
        (unless in a transaction); drop aborted transactions below the log start and the
        ``.txnindex`` files of deleted segments."""
        self.txn.advance_log_start_offset(log_start_offset)
        if segment_bases is not None:
            self.txn_indexes.delete_below(segment_bases)
        for pid in list(self._producers):
            entry = self._producers[pid]
            while entry.batches and entry.batches[0][3] < log_start_offset:
                entry.batches.popleft()
            if not entry.batches and pid not in self.txn.ongoing:
                del self._producers[pid]

    # -- loading and snapshots -----------------------------------------------------------------

    @classmethod
    def load(cls, plog: PartitionLog, snapshot_path: Path | None) -> ProducerStateManager:
        """The state of ``plog``: its last snapshot (when usable), then the batch headers from
        the snapshot's offset (or the log start) to the log end offset."""
        state = cls._start_load(plog, snapshot_path)
        from_offset = state.offset
        started = time.perf_counter()
        count = state.replay(plog)
        state.dirty = True
        _log_loaded(plog, count, from_offset, started)
        _LOADED[plog] = state
        return state

    @classmethod
    async def load_async(
        cls,
        plog: PartitionLog,
        snapshot_path: Path | None,
        is_current: Callable[[], bool],
        chunk_bytes: int = 1 << 18,
        yield_every_s: float = 0.01,
    ) -> ProducerStateManager | None:
        """``load`` that yields to the event loop once it has replayed for ``yield_every_s``
        (checked after every ``chunk_bytes`` read), so a large replay does not stall the
        broker for longer than that, without paying a yield per chunk. Appends meanwhile are replayed too (the
        scan runs to the log end). The ``.txnindex`` entries found are written only at the
        end, and only when ``is_current()`` (the caller's check that the log was not truncated
        and nobody loaded the state meanwhile): else None, nothing written."""
        state = cls._start_load(plog, snapshot_path)
        files, state.txn_indexes = state.txn_indexes, TransactionIndexFiles(None)
        from_offset = state.offset
        started = time.perf_counter()
        count = 0
        since = started
        for batches in scan_to_end(plog, state.offset, chunk_bytes):
            state.apply_batches(batches, plog.segment_base_offsets())
            count += len(batches)
            if time.perf_counter() - since >= yield_every_s:
                await asyncio.sleep(0)
                if not is_current():
                    return None
                since = time.perf_counter()
        _read_indexes(files, from_offset)  # drops anything past from_offset, as load does
        bases = plog.segment_base_offsets()
        for entry in state.txn.aborted:
            if entry.last_offset >= from_offset:
                files.append(entry, bases)
        state.txn_indexes = files
        state.dirty = True
        _log_loaded(plog, count, from_offset, started)
        _LOADED[plog] = state
        return state

    @classmethod
    def _start_load(cls, plog: PartitionLog, snapshot_path: Path | None) -> ProducerStateManager:
        """The snapshot (when usable) and the ``.txnindex`` entries below its offset; the
        replay starts at the returned state's ``offset``."""
        state: ProducerStateManager | None = None
        start = plog.log_start_offset
        directory = getattr(plog, "directory", None)
        index_dir = Path(directory) if directory is not None else None
        if snapshot_path is not None and snapshot_path.exists():
            epoch: int | None = None
            try:
                data = json.loads(snapshot_path.read_text())
                state = cls.from_snapshot(data, index_dir)
                epoch = None if data.get("epoch") is None else int(data["epoch"])
            except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
                log.warning("ignoring unreadable producer state snapshot %s", snapshot_path)
                state = None
            if state is not None and not (start <= state.offset <= plog.log_end_offset):
                state = None
            if (
                state is not None
                and epoch is not None
                and state.offset > start
                and epoch != _epoch_at(plog, state.offset - 1)
            ):
                log.info("ignoring producer state snapshot %s of a diverged log", snapshot_path)
                state = None
        if state is None:
            state = cls(index_dir)
            state.offset = start
        if index_dir is None:
            state.txn_indexes = _MEMORY_INDEXES.setdefault(plog, TransactionIndexFiles(None))
        entries = _read_indexes(state.txn_indexes, state.offset)
        state.txn.aborted = [e for e in entries if e.last_offset >= start]
        state.txn_indexes.delete_below(plog.segment_base_offsets())  # retention deleted some
        state.txn_indexes.delete_above(plog.log_end_offset)  # a truncation deleted some
        return state

    def replay(self, plog: PartitionLog) -> int:
        """Apply the batches in [self.offset, log end offset) of ``plog`` (headers, and the
        record of each transaction marker); return how many batches were applied."""
        bases = plog.segment_base_offsets()
        count = 0
        for batches in scan_to_end(plog, self.offset):
            self.apply_batches(batches, bases)
            count += len(batches)
        return count

    def apply_batches(self, batches: Iterable[RecordBatch], segment_bases: list[int]) -> None:
        """Apply batches already in the log, in offset order, as they are (no check): the
        replay of the log, and a follower's append (Kafka's appendAsFollower, whose producer
        state follows the leader's batches; ``segment_bases`` of the log after the append)."""
        for batch in batches:
            base_offset = batch.base_offset
            last_delta = batch.last_offset_delta
            if batch.is_transactional:
                if batch.is_control:
                    self._replay_marker(batch, segment_bases)
                    continue
                self.append_txn_data(batch.producer_id, base_offset)
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

    def apply_appended(
        self, records: bytes | bytearray | memoryview, segment_bases: list[int]
    ) -> None:
        """``apply_batches`` for a buffer of whole, already validated batches (a follower's
        append), cheaper: one header unpack per batch, and a batch with neither a producer
        id nor a transaction only moves ``offset``."""
        last_offset = -1
        for position, header in iter_batch_headers(records):
            base_offset = header[_BASE_OFFSET]
            last_offset = base_offset + header[_LAST_OFFSET_DELTA]
            if header[_ATTRIBUTES] & _CONTROL:
                self.apply_batches((RecordBatch(records, position),), segment_bases)
                continue
            pid = header[_PRODUCER_ID]
            if pid < 0:
                continue
            if header[_ATTRIBUTES] & _TRANSACTIONAL:
                self.append_txn_data(pid, base_offset)
            base_seq = header[_BASE_SEQUENCE]
            last_seq = (base_seq + header[_LAST_OFFSET_DELTA]) % _SEQ_MOD if base_seq >= 0 else -1
            self.update(pid, header[_PRODUCER_EPOCH], base_seq, last_seq, base_offset, last_offset)
        if last_offset + 1 > self.offset:
            self.offset = last_offset + 1

    def _replay_marker(self, batch: RecordBatch, bases: list[int]) -> None:
        for record in batch.records():
            try:
                kind, coordinator_epoch = parse_control_record(record.key, record.value)
            except ValueError:
                log.warning("ignoring a malformed control record at offset %d", record.offset)
                continue
            if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                self.apply_marker(
                    batch.producer_id,
                    batch.producer_epoch,
                    record.offset,
                    kind == ControlRecordType.ABORT,
                    coordinator_epoch,
                    bases,
                )
        if batch.last_offset + 1 > self.offset:
            self.offset = batch.last_offset + 1

    def snapshot_payload(self, plog: PartitionLog, force: bool = False) -> bytes | None:
        """The JSON snapshot when the state changed since the last one (or ``force``), covering
        every batch up to ``plog``'s log end offset (call it on the thread that appends)."""
        if not (self.dirty or force):
            return None
        self.offset = max(self.offset, plog.log_end_offset)
        self.dirty = False
        data = self.snapshot()
        data["epoch"] = _epoch_at(plog, self.offset - 1)
        return json.dumps(data).encode()


def _read_indexes(files: TransactionIndexFiles, replay_from: int) -> list[AbortedTxn]:
    """The aborted transactions whose markers lie below ``replay_from``, in marker order, with
    the index truncated to them (the replay from ``replay_from`` appends the others again):
    ``TransactionIndexFiles.load`` for files, the same on the indexes held in memory."""
    if files.directory is not None:
        return files.load(replay_from)
    files.truncate_to(replay_from)
    entries = [e for index in files.indexes.values() for e in index.entries]
    entries.sort(key=lambda e: e.last_offset)
    return entries


def _epoch_at(plog: PartitionLog, offset: int) -> int:
    """The leader epoch of ``offset`` by the log's leader-epoch entries (-1: none). A snapshot
    records it for its last offset; a load ignores a snapshot whose epoch there differs from
    the log's (the log was truncated and rewritten past it by another leader since: a log is
    the same up to an offset when the epochs at that offset are, KIP-101)."""
    entries_of = getattr(plog, "leader_epoch_entries", None)
    epoch = -1
    if entries_of is not None and offset >= 0:
        for entry_epoch, start in entries_of():
            if start > offset:
                break
            epoch = entry_epoch
    return epoch


def _log_loaded(plog: PartitionLog, count: int, from_offset: int, started: float) -> None:
    log.info(
        "producer state of %s-%s loaded: replayed %d batches from offset %d in %.1f ms",
        getattr(plog, "topic", "?"),
        getattr(plog, "partition", "?"),
        count,
        from_offset,
        (time.perf_counter() - started) * 1000,
    )


def snapshot_offset(path: Path) -> int | None:
    """The offset a snapshot file covers up to (None: missing or unreadable)."""
    try:
        return int(json.loads(path.read_text())["offset"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_snapshot(path: Path, payload: bytes) -> None:
    """Write one snapshot (atomic rename, no fsync); failures are logged, not raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, payload, fsync=False)
    except OSError:
        log.exception("producer state snapshot %s failed", path)
