"""FileLog: a partition log on disk in Kafka's format, and the logic both engines share."""

from __future__ import annotations

import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from odradek.clock import Clock, SystemClock
from odradek.protocol.offsets import (  # ListOffsets' special timestamps
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from odradek.storage._batch import check_follower_batches, prepare_append, writable
from odradek.storage.api import AppendResult, FileRegion, ReadResult
from odradek.storage.checkpoint import fsync_dir
from odradek.storage.cleaner_records import check_compacted_append
from odradek.storage.config import LogConfig
from odradek.storage.errors import OffsetOutOfRangeError
from odradek.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from odradek.storage.segment import LogSegment

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FileLog",
    "parse_log_dir_name",
]

logger = logging.getLogger("odradek.storage")

_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")


def parse_log_dir_name(name: str) -> tuple[str, int]:
    """``"orders-3"`` -> ``("orders", 3)`` (Kafka's ``<topic>-<partition>`` directory name)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> log directory name")
    return topic, int(partition)


_INT32_MAX = 2**31 - 1
"""Offsets in a segment are stored relative to its base offset as int32."""


class SegmentReader(Protocol):
    """Reads a segment's bytes for the log cleaner, safe against the segment's deletion."""

    def read(self, position: int, length: int) -> bytes: ...
    def close(self) -> None: ...


class _FdReader:
    """A ``SegmentReader`` over a private dup of a segment file's fd."""

    def __init__(self, fd: int) -> None:
        self._fd = os.dup(fd)

    def read(self, position: int, length: int) -> bytes:
        data = os.pread(self._fd, length, position)
        while len(data) < length:
            more = os.pread(self._fd, length - len(data), position + len(data))
            if not more:
                break
            data += more
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LogBase:
    """Offsets, rolling, retention, truncation and leader epochs, for any segment type.

    Invariants: segments are sorted by base offset and contiguous; the last one is the active
    segment (the only one written); ``log_start_offset <= high_watermark <= log_end_offset``;
    ``recovery_point <= log_end_offset``. All offset lookups bisect ``_bases``, so their cost
    does not depend on the number of segments.
    """

    topic: str
    partition: int

    def __init__(self, topic: str, partition: int, config: LogConfig, clock: Clock) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self.segments: list[Any] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        # single broker: the high watermark follows the log end offset after every append;
        # replication sets this to False and drives update_high_watermark() itself.
        self.high_watermark_follows_leo = True
        self._epochs = LeaderEpochCache(None)
        self._latest_epoch = -1
        self._last_flush_ms = clock.now_ms()
        self.closed = False

    # --- engine hooks ---------------------------------------------------------------------

    def _new_segment(self, base_offset: int, now_ms: int) -> Any:
        raise NotImplementedError

    def _region(self, segment: Any, position: int, length: int) -> FileRegion | bytes:
        raise NotImplementedError

    def _remove_segment(self, segment: Any) -> None:
        raise NotImplementedError

    def _after_flush(self) -> None:
        pass

    # --- state ----------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    def update_config(self, config: LogConfig) -> None:
        """New topic config; applies to the next append, roll and retention run."""
        self.config = config

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset}, segments={len(self.segments)})"
        )

    # --- append ---------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        log_append_time: bool = False,
    ) -> AppendResult:
        """Validate, assign offsets, stamp, write. See PartitionLog.append."""
        config = self.config
        if log_append_time or config.log_append_time:
            if now_ms is None:
                now_ms = self.clock.now_ms()
            append_time: int | None = now_ms
        else:
            append_time = None  # the clock is read only when needed (roll by time, below)
        buf = writable(records)
        base = self.log_end_offset
        infos = prepare_append(
            buf, base, leader_epoch, config.max_message_bytes, config.segment_bytes, append_time
        )
        if config.compact:
            check_compacted_append(buf)
        last = infos[-1][2]
        segment = self.segments[-1]
        if segment.size and self._should_roll(segment, len(buf), infos, now_ms):
            segment = self._roll(self.clock.now_ms() if now_ms is None else now_ms, base)
        segment.append(buf, infos)
        self.log_end_offset = end = last + 1
        if self.high_watermark_follows_leo:
            self.high_watermark = end
        if leader_epoch > self._latest_epoch:
            # the checkpoint file follows at the next flush (see LeaderEpochCache)
            self._epochs.assign(leader_epoch, base, defer=True)
            self._latest_epoch = self._epochs.latest_epoch
        if end - self.recovery_point >= config.flush_interval_messages:
            self.flush()
        return AppendResult(
            base, last, -1 if append_time is None else append_time, self.log_start_offset
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append batches fetched from the leader as they are (offsets and leader epochs already
        assigned, nothing stamped). Every batch is validated first; the first must start at or
        after the LEO (else UnexpectedAppendOffsetError) and offsets must grow (gaps allowed).
        Leader epochs are taken from the batches. The high watermark is not moved: a follower
        learns it from the leader (``update_high_watermark``)."""
        config = self.config
        now_ms = self.clock.now_ms()
        infos, epochs = check_follower_batches(
            records, self.log_end_offset, config.max_message_bytes, config.segment_bytes
        )
        base = epochs[0][1]
        last = infos[-1][2]
        segment = self.segments[-1]
        if segment.size and self._should_roll(segment, len(records), infos, now_ms):
            segment = self._roll(now_ms, base)
        segment.append(records, infos)
        self.log_end_offset = end = last + 1
        for epoch, start in epochs:
            if epoch > self._latest_epoch:
                self._epochs.assign(epoch, start, defer=True)
                self._latest_epoch = self._epochs.latest_epoch
        if end - self.recovery_point >= config.flush_interval_messages:
            self.flush()
        return AppendResult(base, last, -1, self.log_start_offset)

    def _should_roll(
        self,
        segment: Any,
        size: int,
        infos: list[tuple[int, int, int, int]],
        now_ms: int | None,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll, for a non-empty segment about to receive ``size`` bytes:
        it would exceed segment.bytes, an offset would not fit the 32-bit relative offset, an
        index is full (files only), or segment.ms has passed: by record time since the segment's
        first batch when batches carry timestamps (Kafka's timeWaitedForRoll), else by wall time
        since the segment was created. Runs on every append."""
        config = self.config
        if (
            segment.size + size > config.segment_bytes
            or infos[-1][2] - segment.base_offset > _INT32_MAX
            or segment.index_full()
        ):
            return True
        first = segment.first_batch_timestamp()
        if first >= 0:
            newest = infos[0][3] if len(infos) == 1 else max(info[3] for info in infos)
            return bool(newest - first > config.max_segment_ms)
        now = self.clock.now_ms() if now_ms is None else now_ms
        return bool(now - segment.created_ms > config.max_segment_ms)

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        if self.segments[-1].size:
            self._roll(self.clock.now_ms() if now_ms is None else now_ms)

    def _roll(self, now_ms: int, base_offset: int | None = None) -> Any:
        self.segments[-1].on_become_inactive()
        base = self.log_end_offset if base_offset is None else base_offset
        segment = self._new_segment(base, now_ms)
        self.segments.append(segment)
        self._bases.append(segment.base_offset)
        return segment

    # --- read -----------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the batch holding ``offset``. See PartitionLog.read."""
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} of {self.topic}-{self.partition} is outside "
                f"[{self.log_start_offset}, {end}]",
                log_start_offset=self.log_start_offset,
                log_end_offset=end,
            )
        if max_offset is None or max_offset > end:
            max_offset = end
        segments = self.segments
        if offset < max_offset:
            i = bisect_right(self._bases, offset) - 1
            if i < 0:
                i = 0
            n = len(segments)
            while i < n:
                segment = segments[i]
                i += 1
                if max_offset >= segment.next_offset:
                    max_position = segment.size
                else:
                    found = segment.translate_offset(max_offset)
                    max_position = segment.size if found is None else found[0]
                got = segment.read(offset, max_bytes, max_position, min_one_batch)
                if got is not None:
                    return ReadResult(
                        self._region(segment, got[0], got[1]),
                        self.high_watermark,
                        self.log_start_offset,
                        end,
                    )
                if segment.next_offset >= max_offset:
                    break
        last = segments[-1]
        return ReadResult(
            self._region(last, last.size, 0), self.high_watermark, self.log_start_offset, end
        )

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets by time: ``(offset, timestamp)`` of the first record whose timestamp is
        >= ``timestamp_ms`` (at or after the log start offset), or None. Special values as in
        Kafka: -2 earliest -> (log start, -1), -1 latest -> (LEO, -1), -3 -> max_timestamp().
        The broker answers consumers only with offsets below the high watermark."""
        if timestamp_ms == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp_ms == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        if timestamp_ms == MAX_TIMESTAMP:
            return self.max_timestamp()
        start = self.log_start_offset
        for segment in self.segments:
            if segment.max_timestamp >= timestamp_ms and segment.next_offset > start:
                found: tuple[int, int] | None = segment.find_offset_by_timestamp(
                    timestamp_ms, start
                )
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the log's largest timestamp."""
        best = None
        for segment in self.segments:
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        return None if best is None else best.record_of_max_timestamp()

    def increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords: move the log start offset up to ``offset`` (at most the high
        watermark). Reads below it fail from now on; the segments wholly below it are deleted
        by the next ``delete_old_segments``. Returns whether it moved."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self.topic}-{self.partition} to {offset}, "
                f"past the high watermark {self.high_watermark}",
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
            )
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.recovery_point = max(self.recovery_point, min(offset, self.log_end_offset))
        self._epochs.truncate_from_start(offset)
        return True

    def delete_segments_below_log_start(self, now_ms: int | None = None) -> int:
        """Delete the segments wholly below the log start offset (after DeleteRecords moved
        it), without applying retention; returns the number of segments deleted."""
        return self._delete_segments(
            lambda _s, n: n is not None and n.base_offset <= self.log_start_offset,
            self.clock.now_ms() if now_ms is None else now_ms,
        )

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log start, LEO]); returns the value set."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    # --- truncation -----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= ``offset`` (a follower diverging from its
        leader). Batches are never split: if ``offset`` falls inside a batch the whole batch
        goes, and the log end offset becomes that batch's base offset. Cost: one index lookup
        and a scan of at most one index interval; later segments are deleted whole.

        At or past the log end nothing is removed but the leader-epoch entries starting there
        (a leader that took an epoch and wrote nothing before losing it; Kafka does the same)."""
        if offset >= self.log_end_offset:
            self._epochs.truncate_from_end(self.log_end_offset)
            self._latest_epoch = self._epochs.latest_epoch
            return
        if offset < self.segments[0].base_offset or offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        now_ms = self.clock.now_ms()
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self._remove_segment(self.segments.pop())
            self._bases.pop()
        active = self.segments[-1]
        active.truncate_to(offset)
        if active.size == 0:
            active.created_ms = now_ms
        self.log_end_offset = end = active.next_offset
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self.log_start_offset = min(self.log_start_offset, end)
        self._epochs.truncate_from_end(end)
        self._latest_epoch = self._epochs.latest_epoch

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        now_ms = self.clock.now_ms()
        for segment in self.segments:
            self._remove_segment(segment)
        self.segments.clear()
        self._bases.clear()
        segment = self._new_segment(offset, now_ms)
        self.segments.append(segment)
        self._bases.append(offset)
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset
        self.recovery_point = offset
        self._epochs.clear()
        self._latest_epoch = -1

    # --- retention ------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention (cleanup.policy=delete): delete whole segments older than retention.ms,
        then while the log exceeds retention.bytes, then those wholly below the log start
        offset. Only segments wholly below the high watermark go; if every segment qualifies
        the log rolls first, so the active segment is never deleted. Advances the log start
        offset. Returns the number of segments deleted."""
        if now_ms is None:
            now_ms = self.clock.now_ms()
        config = self.config
        deleted = 0
        if config.delete_enabled:
            retention_ms = config.retention_ms
            if retention_ms >= 0:
                deleted += self._delete_segments(
                    lambda s, _n: now_ms - s.largest_timestamp() > retention_ms, now_ms
                )
            if config.retention_bytes >= 0:
                excess = self.size_in_bytes - config.retention_bytes

                def over_size(segment: Any, _next: Any) -> bool:
                    nonlocal excess
                    if excess - segment.size >= 0:
                        excess -= segment.size
                        return True
                    return False

                deleted += self._delete_segments(over_size, now_ms)
        deleted += self._delete_segments(
            lambda _s, n: n is not None and n.base_offset <= self.log_start_offset, now_ms
        )
        return deleted

    def _delete_segments(self, predicate: Callable[[Any, Any], bool], now_ms: int) -> int:
        segments = self.segments
        n = len(segments)
        count = 0
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < n else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and segment.size == 0:
                break
            if self.high_watermark < upper or not predicate(segment, nxt):
                break
            count += 1
        if not count:
            return 0
        if count == n:
            self._roll(now_ms)
        doomed = self.segments[:count]
        del self.segments[:count]
        del self._bases[:count]
        for segment in doomed:
            self._remove_segment(segment)
        start = max(self.log_start_offset, self.segments[0].base_offset)
        self.log_start_offset = start
        self.high_watermark = max(self.high_watermark, start)
        self.recovery_point = max(self.recovery_point, start)
        self._epochs.truncate_from_start(start)
        return count

    # --- log cleaner (odradek.storage.cleaner) ------------------------------------------------
    #
    # The cleaner works off the owner's thread on segments that are closed (never written
    # again). The owner thread (the broker's event loop) runs only cleaner_snapshot() and
    # replace_cleaned_segments(); everything between them reads through the snapshot's own
    # readers and writes new segments no one else sees.

    def cleaner_segments(self) -> list[Any]:
        """The closed segments (every one but the active segment), in offset order."""
        return self.segments[:-1]

    def segment_reader(self, segment: Any) -> SegmentReader:
        """A reader of ``segment``'s bytes that stays valid if the log deletes the segment
        meanwhile (FileLog: a dup of its fd). Owner thread; close it when done."""
        raise NotImplementedError

    def new_cleaned_segment(self, base_offset: int, created_ms: int) -> Any:
        """An empty segment for the cleaner's output, not part of the log (any thread)."""
        raise NotImplementedError

    def finish_cleaned_segment(self, segment: Any) -> None:
        """Make a filled cleaner output segment durable (any thread)."""
        segment.on_become_inactive()
        segment.flush()

    def discard_cleaned_segment(self, segment: Any) -> None:
        """Throw away a cleaner output segment that was not swapped in (any thread)."""

    def replace_cleaned_segments(
        self, expected: list[tuple[Any, int]], replacements: list[tuple[Any, Any]]
    ) -> bool:
        """Swap cleaned segments in (owner thread). ``expected``: ``(segment, size)`` of every
        segment the cleaning read; if any of them is gone or changed (retention, truncation,
        deletion) nothing is swapped and False is returned. ``replacements``: ``(old, new)``
        pairs; ``new`` None removes ``old`` (it kept no record; never the first segment).
        The new segment takes the old one's place and base offset."""
        if self.closed:
            return False
        present = {id(s) for s in self.segments[:-1]}
        for segment, size in expected:
            if id(segment) not in present or segment.size != size:
                return False
        self._swap_cleaned(replacements)
        doomed = {id(old) for old, new in replacements if new is None}
        swapped = {id(old): new for old, new in replacements if new is not None}
        segments = [swapped.get(id(s), s) for s in self.segments if id(s) not in doomed]
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        return True

    def _swap_cleaned(self, replacements: list[tuple[Any, Any]]) -> None:
        for old, _new in replacements:
            self._remove_segment(old)

    # --- flush ----------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``offset`` or LEO) and move
        the recovery point there; first write the leader-epoch-checkpoint if it is behind."""
        upto = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        self._last_flush_ms = self.clock.now_ms()
        self._epochs.flush()  # before the recovery point moves past a deferred epoch entry
        if upto <= self.recovery_point:
            return
        start = self.recovery_point
        i = max(0, bisect_right(self._bases, start) - 1)
        for segment in self.segments[i:]:
            if segment.base_offset >= upto:
                break
            segment.flush()
        self._after_flush()
        self.recovery_point = upto

    def maybe_flush(self, now_ms: int | None = None) -> None:
        """Flush policy (flush.messages is applied on append): fsync when flush.ms has passed
        since the last flush; also fsync segments that were rolled since the last flush (Kafka
        flushes a segment when it rolls), which bounds recovery after a crash to the active
        segment."""
        if now_ms is None:
            now_ms = self.clock.now_ms()
        if self.log_end_offset > self.recovery_point:
            if now_ms - self._last_flush_ms >= self.config.flush_interval_ms:
                self.flush()
            elif self.segments[-1].base_offset > self.recovery_point:
                self.flush(self.segments[-1].base_offset)

    # --- leader epochs ----------------------------------------------------------------------

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        """``[(epoch, start offset), ...]`` as held in the leader-epoch-checkpoint."""
        return self._epochs.entries()

    def assign_leader_epoch(self, epoch: int, start_offset: int | None = None) -> None:
        """Record a new leader epoch starting at ``start_offset`` (default: the LEO), as a new
        leader does at once on election."""
        self._epochs.assign(epoch, self.log_end_offset if start_offset is None else start_offset)
        self._latest_epoch = self._epochs.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(largest epoch <= epoch, end offset of that epoch)``."""
        return self._epochs.end_offset_for(epoch, self.log_end_offset)


class FileLog(LogBase):
    """A partition log in one directory, in Kafka's on-disk format.

    Directory ``<log.dir>/<topic>-<partition>/`` holds:

    * ``<baseOffset:020>.log`` / ``.index`` / ``.timeindex`` per segment (see ``LogSegment``,
      ``OffsetIndex``, ``TimeIndex``);
    * ``leader-epoch-checkpoint`` (see ``LeaderEpochCache``).

    The recovery point, log start offset and high watermark are checkpointed per log dir by
    ``LogManager`` and passed in when the log is opened. On open every segment that may hold
    offsets at or above ``recovery_point`` is scanned and cut at the first bad byte
    (``LogSegment.recover``); if a segment is cut, all segments after it are deleted. The active
    segment is always scanned unless ``clean_shutdown`` (the manager found its clean-shutdown
    marker); its indexes are still sanity-checked and rebuilt if damaged. Leftover
    ``*.deleted``/``*.cleaned``/``*.swap``/``*.tmp`` files are removed.

    Log cleaner swap (Kafka's replaceSegments), for a closed segment ``B`` and its cleaned
    replacement: the cleaner thread writes and fsyncs ``B.log.cleaned`` (+ ``.index.cleaned``,
    ``.timeindex.cleaned``); then, on the owner thread, ``.cleaned`` is renamed to ``.swap``
    and the directory fsynced (the commit point), the old files are renamed to ``.deleted``
    and unlinked (their fd stays open for ``file.delete.delay.ms``), and ``.swap`` is renamed to
    the final name. Renames move the indexes first and the ``.log`` last. On open, before
    anything else, every ``B.log.swap`` completes its swap: ``B.log``/``.index``/``.timeindex``
    are deleted, ``B.log.swap`` becomes ``B.log`` and that segment is recovered (indexes
    rebuilt). A ``.cleaned`` file (crash before the commit point) is deleted with the other
    leftovers: the old segment stays.
    """

    def __init__(
        self,
        directory: Path | str,
        config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        clean_shutdown: bool = False,
    ) -> None:
        directory = Path(directory)
        if topic is None or partition is None:
            topic, partition = parse_log_dir_name(directory.name)
        super().__init__(topic, partition, config or LogConfig(), clock or SystemClock())
        self.directory = directory
        self._graveyard: list[tuple[float, LogSegment]] = []
        self._dir_dirty = False
        self._parent_dirty = False
        if not directory.is_dir():
            directory.mkdir(parents=True)
            # the new directory's name becomes durable with the first flush (_after_flush),
            # not here: an fsync of the log dir on the event loop stalls every connection
            self._parent_dirty = True
        self._load(recovery_point, log_start_offset, high_watermark, clean_shutdown)

    def _load(
        self,
        recovery_point: int,
        log_start_offset: int | None,
        high_watermark: int | None,
        clean_shutdown: bool,
    ) -> None:
        directory = self.directory
        now_ms = self.clock.now_ms()
        swapped = self._complete_swaps()
        bases: list[int] = []
        for path in directory.iterdir():
            name = path.name
            if name.endswith(_LEFTOVER_SUFFIXES):
                path.unlink()
                continue
            stem, dot, suffix = name.partition(".")
            if dot and len(stem) == 20 and stem.isdigit():
                if suffix == "log":
                    bases.append(int(stem))
                elif suffix in ("index", "timeindex") and not (directory / f"{stem}.log").exists():
                    path.unlink()
        bases.sort()
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            if i + 1 < len(bases):
                needs_recovery = bases[i + 1] > recovery_point
            else:  # the active segment: trusted only after a clean shutdown (Kafka's rule)
                needs_recovery = not clean_shutdown
            if segments and base < segments[-1].next_offset:
                logger.warning(
                    "%s overlaps the previous segment (next offset %d); deleting it and later ones",
                    directory / f"{base:020d}.log",
                    segments[-1].next_offset,
                )
                self._delete_files_from(bases[i:])
                break
            segment = LogSegment.open(
                directory, base, self.config, now_ms, recover=needs_recovery or base in swapped
            )
            segments.append(segment)
            if segment.truncated_bytes and i + 1 < len(bases):
                logger.warning(
                    "recovery of %s-%d truncated segment %d; deleting the %d segments after it",
                    self.topic,
                    self.partition,
                    base,
                    len(bases) - i - 1,
                )
                self._delete_files_from(bases[i + 1 :])
                break
        if not segments:
            start = log_start_offset or 0
            segments.append(LogSegment(directory, start, self.config, now_ms))
            self._dir_dirty = True
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_end_offset = end = segments[-1].next_offset
        start = segments[0].base_offset if log_start_offset is None else log_start_offset
        self.log_start_offset = min(max(start, segments[0].base_offset), end)
        self.recovery_point = min(max(recovery_point, self.log_start_offset), end)
        hw = end if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, self.log_start_offset), end)
        self._epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        # entries written after the last flush may be missing from the file (deferred): the
        # batches of every segment recovery scanned (all above the recovery point) supply them
        for segment in segments:
            for epoch, start in segment.epoch_starts:
                self._epochs.assign(epoch, start)
        self._epochs.truncate_from_end(end + 1)  # an epoch may start at the LEO (no data yet)
        self._epochs.truncate_from_start(self.log_start_offset)
        self._latest_epoch = self._epochs.latest_epoch

    def _complete_swaps(self) -> set[int]:
        """Finish the log cleaner swaps a crash interrupted after their commit point (see the
        class docstring); returns the base offsets of the swapped-in segments."""
        swapped: set[int] = set()
        for path in sorted(self.directory.glob("*.log.swap")):
            stem = path.name.removesuffix(".log.swap")
            if len(stem) != 20 or not stem.isdigit():
                continue
            for suffix in (".index", ".timeindex", ".log"):
                try:
                    (self.directory / f"{stem}{suffix}").unlink()
                except FileNotFoundError:
                    pass
            path.rename(self.directory / f"{stem}.log")
            swapped.add(int(stem))
            logger.warning("completed an interrupted log cleaner swap of %s", path)
        if swapped:
            fsync_dir(self.directory)
        return swapped

    def _delete_files_from(self, bases: list[int]) -> None:
        for base in bases:
            for suffix in (".log", ".index", ".timeindex"):
                try:
                    (self.directory / f"{base:020d}{suffix}").unlink()
                except FileNotFoundError:
                    pass

    # --- engine hooks ---------------------------------------------------------------------

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        self._dir_dirty = True
        self._reap()
        return LogSegment(self.directory, base_offset, self.config, now_ms)

    def _region(self, segment: LogSegment, position: int, length: int) -> FileRegion:
        return FileRegion(segment.fd, position, length)

    def _remove_segment(self, segment: LogSegment) -> None:
        segment.delete_files()
        self._dir_dirty = True
        deadline = self.clock.monotonic() + self.config.file_delete_delay_ms / 1000.0
        self._graveyard.append((deadline, segment))
        self._reap()

    def segment_reader(self, segment: LogSegment) -> SegmentReader:
        return _FdReader(segment.fd)

    def new_cleaned_segment(self, base_offset: int, created_ms: int) -> LogSegment:
        return LogSegment(self.directory, base_offset, self.config, created_ms, suffix=".cleaned")

    def discard_cleaned_segment(self, segment: LogSegment) -> None:
        segment.close_fd()
        segment.delete_files()

    def _swap_cleaned(self, replacements: list[tuple[Any, Any]]) -> None:
        for _old, new in replacements:
            if new is not None:
                new.change_suffix(".cleaned", ".swap")
        fsync_dir(self.directory)  # the commit point: recovery completes the swap from here on
        for old, new in replacements:
            old.change_suffix("", ".deleted")
            if new is not None:
                new.change_suffix(".swap", "")
            self._remove_segment(old)
        self._dir_dirty = True

    def _reap(self, everything: bool = False) -> None:
        """Close the fds of deleted segments once file.delete.delay.ms has passed."""
        if not self._graveyard:
            return
        now = self.clock.monotonic()
        keep = []
        for deadline, segment in self._graveyard:
            if everything or deadline <= now:
                segment.close_fd()
            else:
                keep.append((deadline, segment))
        self._graveyard = keep

    def _after_flush(self) -> None:
        if self._parent_dirty:
            fsync_dir(self.directory.parent)
            self._parent_dirty = False
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False

    def maybe_flush(self, now_ms: int | None = None) -> None:
        super().maybe_flush(now_ms)
        self._reap()

    # --- life cycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Flush (fsync) everything, then close every file. The log is unusable afterwards."""
        if self.closed:
            return
        try:
            self.flush()
        finally:
            self.closed = True
            for segment in self.segments:
                segment.close()
            self._reap(everything=True)

    def delete(self, *, defer_close: bool = False) -> None:
        """Remove the whole directory without flushing. With ``defer_close`` the segment fds stay
        open for ``file.delete.delay.ms`` (FileRegions handed out earlier stay readable) and are
        closed by later ``reap()`` calls; otherwise they are closed at once."""
        if not self.closed:
            self.closed = True
            for segment in self.segments:
                self._remove_segment(segment)
            self.segments = []
            self._bases = []
        shutil.rmtree(self.directory, ignore_errors=True)
        self._reap(everything=not defer_close)

    def reap(self) -> bool:
        """Close the fds of deleted segments whose delay has passed; True when none is left."""
        self._reap()
        return not self._graveyard
