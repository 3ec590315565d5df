"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's ``LogCleaner``,
``Cleaner`` and ``LogCleanerManager``).

What a cleaning does, for the dirtiest log:

1. **Choose** (``LogCleanerManager.grab_filthiest_log``). A log's closed segments split at its
   *first dirty offset* (from ``cleaner-offset-checkpoint``; the log start offset at first)
   into a clean head and a dirty tail. The dirty tail ends at the *first uncleanable offset*:
   the active segment is never cleaned, nor a segment reaching past the high watermark, nor a
   segment whose newest record is younger than ``min.compaction.lag.ms``. The log is cleanable
   when dirty bytes / (clean + dirty bytes) >= ``min.cleanable.dirty.ratio``, or when its
   first dirty batch is older than ``max.compaction.lag.ms``; the highest ratio goes first.
   A cleaning runs at one time, ``now_ms`` (the cleaner's clock).
2. **Snapshot** (owner thread, short). The segments to read and a private reader of each
   (``PartitionLog.segment_reader``: a dup'd fd), with their sizes, the same for the rest of
   the log (headers only), and the high watermark.
3. **Walk the headers** (cleaner thread) of the whole log as the snapshot saw it (the
   segments to clean and the rest, the active one included): each producer's last data
   batch, and the transactions, from their data batches and markers (the record of each
   control batch is read): the aborted ones (the ``.txnindex`` entries, ``AbortedTxn``) and
   the *first unstable offset*, the first offset of a transaction whose marker is not below
   the high watermark. Nothing from there on is cleaned (Kafka's last stable offset bound);
   the manager then waits for a segment to close before it looks at that log again.
4. **Build the offset map** (cleaner thread) over the dirty section: key -> latest offset
   (``SkimpyOffsetMap``, bounded by ``log.cleaner.dedupe.buffer.size`` / threads; allocated at
   the first cleaning, not at start). Records of aborted transactions are not mapped. If the
   map fills up, the dirty section ends at the last segment that fitted whole.
5. **Rewrite** (cleaner thread) every segment from the log start to the end of the mapped
   section into a new segment with the same base offset (``<base>.log.cleaned``), batch by
   batch as Kafka's ``Cleaner.cleanInto`` (``_clean_batch``; the transactions' bookkeeping,
   ``CleanedTransactions``, and the header walk of step 3 are ``cleaner_txn``'s):

   * a data record is kept when its offset is the latest for its key and it is not in an
     aborted transaction; records without a key go;
   * **delete horizon** (KIP-534): a batch that keeps a tombstone, or a marker whose
     transaction has no record left, gets ``deleteHorizonMs`` = this cleaning's time +
     ``delete.retention.ms`` in its header the first time (attributes bit 0x40,
     baseTimestamp; see ``cleaner_records.filter_batch``); a later cleaning at or past that
     time drops its tombstones, or the marker;
   * a COMMIT marker stays while a batch of its transaction is read in the same pass, an ABORT
     marker while a batch of its aborted transaction is: so a reader never meets a
     transaction's records without its marker;
   * the last data batch of each producer id is kept, possibly empty (and a producer with no
     data batch left keeps its markers of its last epoch), so that producers' state survives.

   Offsets, order and timestamps are preserved. A segment that keeps nothing is removed
   (except the log's first segment); a segment none of whose batches changed is left alone.
6. **Swap** (owner thread, short): ``PartitionLog.replace_cleaned_segments`` checks that every
   segment read is still there unchanged (else the work is thrown away) and swaps the new
   segments in crash-safely (``FileLog``: ``.cleaned`` -> ``.swap`` -> rename). In the same
   step the aborted transactions whose ABORT markers went leave the partition's producer
   state and ``.txnindex`` files (``ProducerStateManager.forget_aborted``), so that a
   read_committed Fetch never lists an aborted transaction without its marker.
7. **Checkpoint**: the first dirty offset becomes the end of the mapped section
   (``<log.dir>/cleaner-offset-checkpoint``, Kafka's format).

**Threads.** The partition logs belong to one *owner* thread (the broker's event loop).
The cleaner threads touch a log only through ``call_on_owner(fn)``, which runs ``fn`` on the
owner and returns its result: the broker passes ``run_on_loop(loop)`` (``call_soon_threadsafe``
and a future); with ``None`` ``fn`` runs on the calling thread (single-threaded use: tests,
tools). Between the snapshot and the swap the cleaner reads only closed segments through its
own fds (closed segments are never written again; if the owner deletes or truncates one, the
check at the swap notices) and writes only files nobody else knows. So the owner's critical
sections are the snapshot (a list copy and one ``dup`` per segment) and the swap (a few
renames and one directory fsync).

Settings (``CleanerConfig``, broker keys): ``log.cleaner.enable``, ``log.cleaner.threads``,
``log.cleaner.backoff.ms``, ``log.cleaner.dedupe.buffer.size``,
``log.cleaner.io.buffer.size``, ``log.cleaner.io.max.bytes.per.second``; per topic (``LogConfig``):
``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``, ``max.compaction.lag.ms``,
``delete.retention.ms`` (broker defaults ``log.cleaner.min.cleanable.ratio``,
``log.cleaner.delete.retention.ms``, ...).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from odradek.clock import Clock, SystemClock
from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD,
)
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.cleaner_records import (
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    batch_records_data,
    filter_batch,
    iter_raw_records,
)
from odradek.storage.cleaner_txn import (
    CleanedTransactions,
    HeaderWalk,
    control_type,
    walk_headers,
)
from odradek.storage.offset_map import OffsetMapFullError, SkimpyOffsetMap
from odradek.storage.producer_state import loaded_state
from odradek.storage.transaction_index import (
    ControlRecordType,
    TransactionIndexFiles,
)

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanerConfig",
    "CleanerStats",
    "CleanerStoppedError",
    "LogCleaner",
    "LogCleanerManager",
    "LogToClean",
    "clean_log",
    "run_on_loop",
]

logger = logging.getLogger("odradek.storage.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_HEADER = BATCH_HEADER
HEADER_SIZE = BATCH_HEADER_SIZE
_T = TypeVar("_T")
OwnerCall = Callable[[Callable[[], Any]], Any]


class CleanerStoppedError(Exception):
    """The cleaner was stopped while it waited for the owner thread."""


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's names and defaults)."""

    enable: bool = True
    num_threads: int = 1
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 134_217_728
    io_buffer_size: int = 524_288
    io_max_bytes_per_second: float = float("inf")
    io_buffer_load_factor: float = 0.9

    KEYS = {
        "log.cleaner.enable": "enable",
        "log.cleaner.threads": "num_threads",
        "log.cleaner.backoff.ms": "backoff_ms",
        "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
        "log.cleaner.io.buffer.size": "io_buffer_size",
        "log.cleaner.io.max.bytes.per.second": "io_max_bytes_per_second",
        "log.cleaner.io.buffer.load.factor": "io_buffer_load_factor",
    }

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> CleanerConfig:
        """From broker keys (absent or None keep Kafka's defaults; other keys are ignored)."""
        values: dict[str, Any] = {}
        for key, name in cls.KEYS.items():
            raw = config.get(key)
            if raw is None or raw == "":
                continue
            if name == "enable":
                values[name] = raw if isinstance(raw, bool) else str(raw).lower() == "true"
            elif name in ("io_max_bytes_per_second", "io_buffer_load_factor"):
                values[name] = float(raw)
            else:
                values[name] = int(raw)
        return cls(**values)

    @property
    def map_memory(self) -> int:
        """Bytes of offset map per cleaner thread: its share of the dedupe buffer minus room
        for the I/O (a read chunk and the batch sliced from it, the pending output and its
        joined copy: four ``log.cleaner.io.buffer.size``), so that a thread's whole working
        set stays within ``dedupe.buffer.size / threads`` (measured: bench/cleaner.py;
        batches larger than the I/O buffer are read whole, as in Kafka)."""
        share = self.dedupe_buffer_size // max(1, self.num_threads)
        return max(share - 4 * self.io_buffer_size, share // 2)


@dataclass(slots=True)
class LogToClean:
    """A compacted log and its clean/dirty split (Kafka's ``LogToClean``)."""

    log: Any
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool = False
    limit: int = 0  # min(active segment base, high watermark): the end without transactions

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    """What one cleaning did."""

    topic: str = ""
    partition: int = 0
    bytes_read: int = 0  # dirty section bytes mapped + every segment rewritten
    dirty_bytes: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_dropped: int = 0
    segments_cleaned: int = 0
    segments_removed: int = 0
    first_dirty_offset: int = 0
    end_offset: int = 0  # the next first dirty offset
    swapped: bool = False
    elapsed_s: float = 0.0
    owner_s: float = 0.0  # time spent on the owner thread (snapshot + swap)
    map_entries: int = 0
    map_memory: int = 0
    first_unstable_offset: int = -1  # first offset of a transaction with no marker read, or -1


def run_on_loop(
    loop: asyncio.AbstractEventLoop, stopped: threading.Event | None = None
) -> OwnerCall:
    """A ``call_on_owner`` for logs owned by ``loop``: runs ``fn`` on the loop and waits for it.
    When ``stopped`` gets set while waiting and ``fn`` has not started, ``fn`` never runs and
    ``CleanerStoppedError`` is raised (so stopping the cleaner from the loop cannot deadlock)."""

    def call(fn: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError as exc:  # the loop is closed
            raise CleanerStoppedError(str(exc)) from exc
        while True:
            try:
                return future.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                stop = (stopped is not None and stopped.is_set()) or loop.is_closed()
                if stop and future.cancel():
                    raise CleanerStoppedError("cleaner stopped") from None

    return call


def _direct(fn: Callable[[], Any]) -> Any:
    return fn()


class _Throttler:
    """Sleeps so that the bytes counted stay under ``rate`` per second
    (``log.cleaner.io.max.bytes.per.second``), and lets the owner thread run: the cleaner is
    pure Python, so it holds the GIL while it works; every ``YIELD_EVERY_S`` of work it sleeps
    ``YIELD_S`` (a bare switch interval of 5 ms would otherwise add up to 5 ms to every
    request the event loop serves meanwhile)."""

    YIELD_EVERY_S = 0.001
    YIELD_S = 0.0002

    def __init__(self, rate: float, stopped: threading.Event | None) -> None:
        self.rate = rate
        self.stopped = stopped
        self.start = time.monotonic()
        self.count = 0
        self._last_yield = time.perf_counter()

    def pause(self) -> None:
        """Give the GIL away for a moment if this thread has held it a while."""
        now = time.perf_counter()
        if now - self._last_yield >= self.YIELD_EVERY_S:
            time.sleep(self.YIELD_S)
            self._last_yield = time.perf_counter()

    def add(self, n: int) -> None:
        self.pause()
        if self.rate == float("inf"):
            return
        self.count += n
        ahead = self.count / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            if self.stopped is not None:
                self.stopped.wait(ahead)
            else:
                time.sleep(ahead)


def _iter_batches(
    reader: Any, size: int, buffer_size: int, throttler: _Throttler
) -> Iterator[bytes]:
    """The whole batches of a segment of ``size`` bytes, read ``buffer_size`` at a time."""
    position = 0
    chunk = b""
    chunk_start = 0
    while position + HEADER_SIZE <= size:
        rel = position - chunk_start
        if rel + HEADER_SIZE > len(chunk):
            chunk = reader.read(position, min(buffer_size, size - position))
            throttler.add(len(chunk))
            chunk_start, rel = position, 0
            if len(chunk) < HEADER_SIZE:
                return
        batch_size = struct.unpack_from(">i", chunk, rel + 8)[0] + LOG_OVERHEAD
        if rel + batch_size > len(chunk):
            if batch_size > buffer_size:
                batch = reader.read(position, batch_size)
                throttler.add(len(batch))
                if len(batch) < batch_size:
                    return
                yield batch
                position += batch_size
                chunk, chunk_start = b"", position
                continue
            chunk = reader.read(position, min(buffer_size, size - position))
            throttler.add(len(chunk))
            chunk_start, rel = position, 0
            if len(chunk) < batch_size:
                return
        yield chunk[rel : rel + batch_size]
        position += batch_size


@dataclass(slots=True)
class _SegmentView:
    segment: Any
    base_offset: int
    upper: int  # the next segment's base offset (or the active segment's)
    size: int
    largest_timestamp: int
    created_ms: int
    reader: Any


@dataclass(slots=True)
class _Snapshot:
    views: list[_SegmentView]
    first_segment: Any  # the log's first segment (never removed)
    config: Any
    # the segments after the views (the active one included), read for their batch headers
    # only: (reader, size at the snapshot)
    tail: list[tuple[Any, int]] = field(default_factory=list)
    high_watermark: int = 0
    closed: bool = field(default=False)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for view in self.views:
                view.reader.close()
            for reader, _ in self.tail:
                reader.close()


def _snapshot(log: Any, end_offset: int) -> _Snapshot | None:
    """Owner thread: the closed segments wholly below ``end_offset``, with private readers,
    and readers of the rest of the log (for the transactions' markers)."""
    if log.closed:
        return None
    segments = log.cleaner_segments()
    following = log.segments[1 : len(segments) + 1]
    views = []
    for segment, nxt in zip(segments, following, strict=True):
        if nxt.base_offset > end_offset:
            break
        views.append(
            _SegmentView(
                segment,
                segment.base_offset,
                nxt.base_offset,
                segment.size,
                segment.largest_timestamp(),
                segment.created_ms,
                log.segment_reader(segment),
            )
        )
    if not views:
        return None
    tail = [(log.segment_reader(s), s.size) for s in log.segments[len(views) :]]
    return _Snapshot(views, log.segments[0], log.config, tail, log.high_watermark)


def _clean_batch(
    batch: bytes,
    header: tuple[int, ...],
    txns: CleanedTransactions,
    walk: HeaderWalk,
    offset_map: SkimpyOffsetMap,
    now_ms: int,
    horizon_ms: int,
    removed_aborts: list[int],
) -> tuple[bytes | None, int]:
    """One batch of the rewrite (Kafka's ``checkBatchRetention`` + ``shouldRetainRecord``):
    the bytes to keep (``batch`` itself when unchanged, None when it goes) and the number of
    records dropped. The offset of an ABORT marker whose record goes is added to
    ``removed_aborts``."""
    attributes, pid, epoch, count = header[5], header[9], header[10], header[12]
    last = header[0] + header[6]
    control = bool(attributes & CONTROL_BIT)
    flagged = bool(attributes & DELETE_HORIZON_BIT)
    past_horizon = flagged and header[7] <= now_ms
    if control:
        kind = control_type(batch, count)
        can_discard = txns.on_control_batch(pid, last, kind)
        discard_records = can_discard and past_horizon
        if discard_records and kind == ControlRecordType.ABORT:
            removed_aborts.append(last)
    else:
        can_discard = txns.on_batch(pid, last, bool(attributes & TRANSACTIONAL_BIT))
        discard_records = can_discard
    keep_empty = pid >= 0 and walk.is_last_of_producer(pid, last, control, epoch)
    if discard_records and not keep_empty:
        return None, count
    retain: Callable[[int, bytes | None, bool, int], bool]
    if discard_records:
        retain = _none
    elif control:
        retain = _all
    else:
        retain_deletes = not past_horizon

        def retain(offset: int, key: bytes | None, null_value: bool, _ts: int) -> bool:
            if key is None or offset < offset_map.get(key):
                return False
            return retain_deletes or not null_value

    return filter_batch(batch, retain, keep_empty, horizon_ms, can_discard and control)


def _none(_offset: int, _key: bytes | None, _null: bool, _ts: int) -> bool:
    return False


def _all(_offset: int, _key: bytes | None, _null: bool, _ts: int) -> bool:
    return True


def clean_log(
    to_clean: LogToClean,
    config: CleanerConfig | None = None,
    *,
    call_on_owner: OwnerCall | None = None,
    offset_map: SkimpyOffsetMap | None = None,
    stopped: threading.Event | None = None,
    now_ms: int | None = None,
) -> CleanerStats:
    """Clean one log (steps 2-6 of the module docstring) at time ``now_ms`` (default: the
    log's clock). Returns what was done; ``swapped`` False means nothing changed (the log
    changed under the cleaner, or nothing to do)."""
    config = config or CleanerConfig()
    if now_ms is None:
        clock: Clock = getattr(to_clean.log, "clock", None) or SystemClock()
        now_ms = clock.now_ms()
    owner = call_on_owner or _direct
    log = to_clean.log
    started = time.monotonic()
    stats = CleanerStats(log.topic, log.partition, first_dirty_offset=to_clean.first_dirty_offset)

    def timed(fn: Callable[[], _T]) -> Callable[[], _T]:
        def run() -> _T:
            start = time.perf_counter()
            try:
                return fn()
            finally:
                stats.owner_s += time.perf_counter() - start

        return run

    snapshot: _Snapshot | None = owner(
        timed(lambda: _snapshot(log, to_clean.first_uncleanable_offset))
    )
    if snapshot is None:
        return stats
    if offset_map is None:
        offset_map = SkimpyOffsetMap(config.map_memory, config.io_buffer_load_factor)
    else:
        offset_map.clear()
    throttler = _Throttler(config.io_max_bytes_per_second, stopped)
    new_segments: list[Any] = []
    try:
        views = snapshot.views
        log_config = snapshot.config
        # 3. producers' last batches and the transactions: a header walk of the whole log
        walk = walk_headers(
            [(v.reader, v.size) for v in snapshot.views] + snapshot.tail,
            snapshot.high_watermark,
            throttler.pause,
        )
        stats.first_unstable_offset = -1 if walk.first_unstable is None else walk.first_unstable
        # 4. the offset map over the dirty section (whole segments only), below the first
        # offset of a transaction whose marker is not below the high watermark (Kafka: LSO)
        map_end = to_clean.first_dirty_offset
        dirty = [v for v in views if v.upper > to_clean.first_dirty_offset]
        if walk.first_unstable is not None:
            dirty = [v for v in dirty if v.upper <= walk.first_unstable]
        txns = CleanedTransactions(walk.aborted)
        for view in dirty:
            try:
                for batch in _iter_batches(
                    view.reader, view.size, config.io_buffer_size, throttler
                ):
                    throttler.pause()
                    header = _HEADER.unpack_from(batch)
                    base, attributes, count = header[0], header[5], header[12]
                    last = base + header[6]
                    stats.records_read += count
                    if attributes & CONTROL_BIT:
                        txns.on_control_batch(header[9], last, control_type(batch, count))
                        continue
                    if txns.on_batch(header[9], last, bool(attributes & TRANSACTIONAL_BIT)):
                        continue  # aborted: its records go, they do not count as latest
                    for _, _, delta, _, key, _ in iter_raw_records(
                        batch_records_data(batch), count
                    ):
                        if key is not None:
                            offset_map.put(key, base + delta)
            except OffsetMapFullError:
                if view is dirty[0]:
                    raise _Uncleanable(
                        f"one segment holds more keys than the offset map's {offset_map.max_entries}"
                        " (raise log.cleaner.dedupe.buffer.size)"
                    ) from None
                break
            map_end = view.upper
            stats.dirty_bytes += view.size
        stats.end_offset = map_end
        stats.map_entries = len(offset_map)
        stats.map_memory = offset_map.memory
        if map_end <= to_clean.first_dirty_offset:
            return stats
        # 5. rewrite from the log start to the end of the mapped section
        horizon = now_ms + log_config.delete_retention_ms  # for batches cleaned the first time
        txns = CleanedTransactions(walk.aborted)
        removed_aborts: list[int] = []
        replacements: list[tuple[Any, Any]] = []
        for view in views:
            if view.upper > map_end:
                break
            if stopped is not None and stopped.is_set():
                raise CleanerStoppedError("cleaner stopped")
            new = log.new_cleaned_segment(view.base_offset, view.created_ms)
            new_segments.append(new)
            dropped = 0
            changed = False
            pending: list[bytes] = []
            infos: list[tuple[int, int, int, int]] = []
            pending_size = 0
            for batch in _iter_batches(view.reader, view.size, config.io_buffer_size, throttler):
                throttler.pause()
                header = _HEADER.unpack_from(batch)
                if view.upper <= to_clean.first_dirty_offset:  # dirty ones: counted while mapping
                    stats.records_read += header[12]
                kept, n = _clean_batch(
                    batch, header, txns, walk, offset_map, now_ms, horizon, removed_aborts
                )
                dropped += n
                if kept is not batch:
                    changed = True
                if kept is None:
                    continue
                kept_header = _HEADER.unpack_from(kept)
                infos.append(
                    (pending_size, len(kept), kept_header[0] + kept_header[6], kept_header[8])
                )
                pending.append(kept)
                pending_size += len(kept)
                if pending_size >= config.io_buffer_size:
                    new.append(b"".join(pending), infos)
                    throttler.add(pending_size)
                    stats.bytes_written += pending_size
                    pending, infos, pending_size = [], [], 0
            if pending:
                new.append(b"".join(pending), infos)
                throttler.add(pending_size)
                stats.bytes_written += pending_size
            stats.bytes_read += view.size
            stats.records_dropped += dropped
            if not changed:  # nothing to gain: leave the segment alone
                log.discard_cleaned_segment(new)
                new_segments.remove(new)
                continue
            if new.size == 0 and view.segment is not snapshot.first_segment:
                log.discard_cleaned_segment(new)
                new_segments.remove(new)
                replacements.append((view.segment, None))
                stats.segments_removed += 1
                continue
            log.finish_cleaned_segment(new)
            replacements.append((view.segment, new))
            stats.segments_cleaned += 1
        if replacements:
            expected = [(v.segment, v.size) for v in views]
            # from here on the files belong to the swap: if it fails half-way (an I/O error
            # after the commit point), start-up recovery completes it or removes them
            ours, new_segments = new_segments, []
            swapped = owner(timed(lambda: _swap(log, expected, replacements, set(removed_aborts))))
            if not swapped:
                for new in ours:
                    log.discard_cleaned_segment(new)
                logger.info(
                    "%s-%d changed while it was cleaned; discarding the cleaned segments",
                    log.topic,
                    log.partition,
                )
                stats.end_offset = to_clean.first_dirty_offset
                return stats
        stats.swapped = True
        return stats
    finally:
        for new in new_segments:
            log.discard_cleaned_segment(new)
        snapshot.close()
        stats.elapsed_s = time.monotonic() - started


def _swap(
    log: Any,
    expected: list[tuple[Any, int]],
    replacements: list[tuple[Any, Any]],
    removed_aborts: set[int],
) -> bool:
    """Owner thread: swap the cleaned segments in; the aborted transactions whose markers went
    leave the producer state and the ``.txnindex`` files in the same step."""
    if not log.replace_cleaned_segments(expected, replacements):
        return False
    if removed_aborts:
        state = loaded_state(log)
        if state is not None:
            state.forget_aborted(removed_aborts)
        elif getattr(log, "directory", None) is not None:
            TransactionIndexFiles.remove_from_directory(log.directory, removed_aborts)
    return True


class _Uncleanable(Exception):
    """This log cannot be cleaned now (the reason is the message)."""


class _LazyOffsetMap:
    """A cleaner thread's offset map, allocated when it first has a log to clean (the dedupe
    buffer is 128 MiB by default: zeroing it is not start-up work), then reused."""

    __slots__ = ("_config", "_map")

    def __init__(self, config: CleanerConfig) -> None:
        self._config = config
        self._map: SkimpyOffsetMap | None = None

    def get(self) -> SkimpyOffsetMap:
        if self._map is None:
            self._map = SkimpyOffsetMap(self._config.map_memory, self._config.io_buffer_load_factor)
        return self._map


class LogCleanerManager:
    """Which log to clean next, the first dirty offsets (``cleaner-offset-checkpoint``), and
    the logs being cleaned (Kafka's ``LogCleanerManager``).

    ``<log.dir>/cleaner-offset-checkpoint``: Kafka's offset checkpoint format (see
    ``OffsetCheckpointFile``), one ``<topic> <partition> <first dirty offset>`` line per
    compacted log cleaned at least once. Memory logs keep theirs in memory.
    """

    def __init__(self, log_manager: Any, clock: Clock | None = None) -> None:
        self.log_manager = log_manager
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._in_progress: set[tuple[str, int]] = set()
        self._uncleanable: dict[tuple[str, int], str] = {}
        self._checkpoints: dict[tuple[str, int], int] = {}
        # (first unstable offset, limit when it was found): not cleaned past the former
        # until the limit moves (a segment closed, which may hold the transaction's marker)
        self._unstable: dict[tuple[str, int], tuple[int, int]] = {}
        for log_dir in getattr(log_manager, "log_dirs", []):
            self._checkpoints.update(
                OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT).read()
            )

    def first_dirty_offset(self, log: Any) -> int:
        """The checkpointed first dirty offset, reset to the log start offset when it is out of
        range (Kafka's rule)."""
        offset: int = self._checkpoints.get((log.topic, log.partition), log.log_start_offset)
        if offset < log.log_start_offset or offset > log.log_end_offset:
            offset = log.log_start_offset
        return offset

    def log_to_clean(self, log: Any, now_ms: int) -> LogToClean:
        """The log's clean/dirty split now (owner thread: it reads the segment list)."""
        config = log.config
        first_dirty = self.first_dirty_offset(log)
        segments = log.segments
        uncapped = limit = min(segments[-1].base_offset, log.high_watermark)
        key = (log.topic, log.partition)
        unstable = self._unstable.get(key)
        if unstable is not None:
            if limit > unstable[1]:
                del self._unstable[key]
            else:
                limit = min(limit, unstable[0])
        clean_bytes = dirty_bytes = 0
        first_uncleanable = first_dirty
        must_clean = False
        for segment, nxt in itertools.pairwise(segments):
            upper = nxt.base_offset
            if upper <= first_dirty:
                clean_bytes += segment.size
                continue
            if upper > limit:
                break
            lag = config.min_compaction_lag_ms
            if lag > 0 and now_ms - segment.largest_timestamp() < lag:
                break
            if dirty_bytes == 0 and segment.size:
                first_ts = segment.first_batch_timestamp()
                if first_ts >= 0 and now_ms - first_ts > config.max_compaction_lag_ms:
                    must_clean = True
            dirty_bytes += segment.size
            first_uncleanable = upper
        return LogToClean(
            log, first_dirty, first_uncleanable, clean_bytes, dirty_bytes, must_clean, uncapped
        )

    def grab_filthiest_log(self, now_ms: int | None = None) -> LogToClean | None:
        """The compacted log most worth cleaning, now marked in progress (owner thread), or
        None. Call ``done_cleaning`` afterwards."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        best: LogToClean | None = None
        with self._lock:
            for log in self.log_manager.all_logs():
                key = (log.topic, log.partition)
                if not log.config.compact or key in self._in_progress or log.closed:
                    continue
                if key in self._uncleanable:
                    continue
                candidate = self.log_to_clean(log, now_ms)
                if candidate.dirty_bytes == 0:
                    continue
                ratio = candidate.cleanable_ratio
                if not candidate.must_clean and ratio < log.config.min_cleanable_dirty_ratio:
                    continue
                if best is None or (candidate.must_clean, ratio) > (
                    best.must_clean,
                    best.cleanable_ratio,
                ):
                    best = candidate
            if best is not None:
                self._in_progress.add((best.log.topic, best.log.partition))
        return best

    def done_cleaning(self, log: Any, end_offset: int | None) -> None:
        """Release ``log``; with ``end_offset`` record it as its new first dirty offset and
        write the checkpoint (any thread)."""
        key = (log.topic, log.partition)
        with self._lock:
            self._in_progress.discard(key)
            if end_offset is None:
                return
            self._checkpoints[key] = end_offset
            directory = getattr(log, "directory", None)
        if directory is not None:
            self._write_checkpoint(Path(directory).parent)

    def note_unstable(self, log: Any, first_unstable_offset: int, limit: int) -> None:
        """A cleaning stopped at a transaction without a marker in the closed segments: clean
        no further than its first offset until ``limit`` (``LogToClean.limit``) moves."""
        with self._lock:
            self._unstable[(log.topic, log.partition)] = (first_unstable_offset, limit)

    def mark_uncleanable(self, log: Any, reason: str) -> None:
        key = (log.topic, log.partition)
        with self._lock:
            self._in_progress.discard(key)
            if key not in self._uncleanable:
                logger.warning("not compacting %s-%d: %s", log.topic, log.partition, reason)
            self._uncleanable[key] = reason

    def uncleanable_reason(self, topic: str, partition: int) -> str | None:
        return self._uncleanable.get((topic, partition))

    def _write_checkpoint(self, log_dir: Path) -> None:
        with self._lock:
            live = {
                (log.topic, log.partition)
                for log in self.log_manager.all_logs()
                if Path(getattr(log, "directory", "")).parent == log_dir
            }
            entries = {k: v for k, v in self._checkpoints.items() if k in live}
            OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).write(entries)


class LogCleaner:
    """``log.cleaner.threads`` background threads that clean the dirtiest compacted log of a
    ``LogManager``, then sleep ``log.cleaner.backoff.ms`` when there is nothing to clean.

    ``call_on_owner`` runs a function on the thread that owns the logs (see the module
    docstring; ``run_on_loop(loop)`` for an asyncio owner). ``clean_once()`` cleans the
    filthiest log on the calling thread (tests, tools).
    """

    def __init__(
        self,
        log_manager: Any,
        config: CleanerConfig | None = None,
        clock: Clock | None = None,
        *,
        call_on_owner: OwnerCall | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config = config or CleanerConfig()
        self.clock = clock or getattr(log_manager, "clock", None) or SystemClock()
        self.manager = LogCleanerManager(log_manager, self.clock)
        self._stopped = threading.Event()
        if loop is not None:
            call_on_owner = run_on_loop(loop, self._stopped)
        self._owner: OwnerCall = call_on_owner or _direct
        self._threads: list[threading.Thread] = []
        self._wake = threading.Event()
        self.stats: list[CleanerStats] = []  # the last 100 cleanings
        self.cleanings = 0

    def start(self) -> None:
        """Start the threads (nothing when ``log.cleaner.enable`` is false)."""
        if not self.config.enable or self._threads:
            return
        for i in range(max(1, self.config.num_threads)):
            thread = threading.Thread(
                target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def wakeup(self) -> None:
        """Look for work now instead of after the backoff."""
        self._wake.set()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop the threads (a cleaning in progress is abandoned, its files removed)."""
        self._stopped.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()

    def clean_once(self, now_ms: int | None = None) -> CleanerStats | None:
        """Clean the filthiest log, if any is cleanable; returns what was done."""
        return self._clean_filthiest(_LazyOffsetMap(self.config), now_ms)

    def _clean_filthiest(
        self, offset_map: _LazyOffsetMap, now_ms: int | None = None
    ) -> CleanerStats | None:
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        to_clean = self._owner(lambda: self.manager.grab_filthiest_log(now_ms))
        if to_clean is None:
            return None
        end: int | None = None
        try:
            stats = clean_log(
                to_clean,
                self.config,
                call_on_owner=self._owner,
                offset_map=offset_map.get(),
                stopped=self._stopped,
                now_ms=now_ms,
            )
            if (
                stats.first_unstable_offset >= 0
                and stats.end_offset < to_clean.first_uncleanable_offset
            ):
                self.manager.note_unstable(
                    to_clean.log, stats.first_unstable_offset, to_clean.limit
                )
            if stats.swapped:
                end = stats.end_offset
            self.cleanings += 1
            self.stats = [*self.stats[-99:], stats]
            if stats.swapped:
                logger.info(
                    "cleaned %s-%d: %d bytes read, %d written, %d of %d records dropped, %.3f s",
                    stats.topic,
                    stats.partition,
                    stats.bytes_read,
                    stats.bytes_written,
                    stats.records_dropped,
                    stats.records_read,
                    stats.elapsed_s,
                )
            return stats
        except _Uncleanable as exc:
            self.manager.mark_uncleanable(to_clean.log, str(exc))
            return None
        finally:
            self.manager.done_cleaning(to_clean.log, end)

    def _run(self) -> None:
        offset_map = _LazyOffsetMap(self.config)  # allocated at the first cleaning, not at start
        while not self._stopped.is_set():
            try:
                stats = self._clean_filthiest(offset_map)
            except CleanerStoppedError:
                return
            except Exception:
                logger.exception("log cleaner thread failed; backing off")
                stats = None
            if stats is None or not stats.swapped:
                self._wake.wait(self.config.backoff_ms / 1000.0)
                self._wake.clear()
