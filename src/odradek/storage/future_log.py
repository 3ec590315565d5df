"""Moving a partition's log to another directory of ``log.dirs`` (AlterReplicaLogDirs), and
the log of a directory that failed.

``FutureLog`` is the copy being built: ``<target log.dir>/<topic>-<partition>.<uuid hex>-future/``
(Kafka's future log directory name). It is filled from the current log's segment files in
rounds: ``plan()`` (owner thread) lists what each segment still lacks, ``copy(plan)`` (any
thread) copies those bytes through dup'd fds, so a segment deleted by retention meanwhile
stays readable. A segment is copied once it is whole; the active segment's prefix is copied
and only its tail is left for the last round, which ``LogManager.complete_move`` runs on the
owner thread: no append can happen between that round and the swap, so nothing acknowledged
is missing from the copy. Segments that changed meanwhile (cleaned, truncated, deleted) are
copied again or dropped. The copy is uncommitted until the swap renames the current log's
directory to ``<topic>-<partition>.<uuid hex>-delete``; a directory left with the ``-future``
suffix at start is removed (the current log is authoritative), unless the current log is
gone, in which case the swap had passed its commit point and the future log is promoted.

``OfflineLog`` stands in for every log of a directory that failed (Kafka's
LogDirFailureChannel): each read or write raises ``KafkaStorageError``, offsets stay as last
known.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.errors import KafkaStorageError
from odradek.storage.log import FileLog
from odradek.storage.segment import LogSegment, log_file_name

__all__ = ["FUTURE_SUFFIX", "FutureLog", "OfflineLog", "parse_future_dir_name"]

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_CHUNK = 1 << 20
_TAIL_CHECK = 4096


def parse_future_dir_name(name: str) -> str | None:
    """``"orders-3.<32 hex>-future"`` -> ``"orders-3"``; None for any other name."""
    if not name.endswith(FUTURE_SUFFIX):
        return None
    stem, dot, tag = name.removesuffix(FUTURE_SUFFIX).rpartition(".")
    if not dot or len(tag) != 32:
        return None
    return stem


def _copy_durable(source: Path, target: Path) -> None:
    """Copy a file and fsync the copy."""
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(slots=True)
class _Step:
    """Copy ``[start, end)`` of ``segment``'s ``.log`` (and its indexes when ``closed``)."""

    segment: LogSegment
    start: int
    end: int
    closed: bool
    reader: Any = None


class FutureLog:
    """The copy of ``source`` being built in ``target_dir`` (see the module docstring)."""

    def __init__(self, source: FileLog, target_dir: Path) -> None:
        self.source = source
        self.target_dir = target_dir
        self.tag = uuid.uuid4().hex
        self.directory = target_dir / f"{source.topic}-{source.partition}.{self.tag}{FUTURE_SUFFIX}"
        self.directory.mkdir(parents=True)
        self._copied: dict[int, tuple[LogSegment, int, bool]] = {}
        """base offset -> (source segment, .log bytes copied, indexes copied)"""
        self.bytes_copied = 0

    @property
    def size_in_bytes(self) -> int:
        return sum(size for _, size, _ in self._copied.values())

    def copied_offset(self) -> int:
        """The first offset of the source not yet copied, as far as whole segments tell: the
        base offset of the first segment not wholly copied (the end offset when all are)."""
        for segment in self.source.segments:
            done = self._copied.get(segment.base_offset)
            if done is None or done[0] is not segment or done[1] < segment.size:
                return int(segment.base_offset)
        return self.source.log_end_offset

    def remaining_bytes(self) -> int:
        """Bytes of the source not yet copied (owner thread)."""
        return sum(step.end - step.start for step in self.plan(readers=False))

    def plan(self, *, readers: bool = True) -> list[_Step]:
        """What each segment of the source still lacks (owner thread). With ``readers`` every
        step holds a dup'd fd of its segment (closed by ``copy``)."""
        steps: list[_Step] = []
        segments = self.source.segments
        for i, segment in enumerate(segments):
            closed = i + 1 < len(segments)
            done = self._copied.get(segment.base_offset)
            start = 0
            if done is not None and done[0] is segment and done[1] <= segment.size:
                start = done[1]
                if start == segment.size and (done[2] or not closed):
                    continue
            step = _Step(segment, start, segment.size, closed)
            if readers:
                step.reader = self.source.segment_reader(segment)
            steps.append(step)
        return steps

    def copy(self, steps: list[_Step]) -> int:
        """Copy the steps' bytes into the future log's files (any thread); fsyncs each file.
        Returns the bytes copied."""
        total = 0
        try:
            for step in steps:
                total += self._copy_step(step)
        finally:
            for step in steps:
                if step.reader is not None:
                    step.reader.close()
                    step.reader = None
        self.bytes_copied += total
        return total

    def _copy_step(self, step: _Step) -> int:
        base = step.segment.base_offset
        path = self.directory / log_file_name(base, ".log")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        copied = 0
        try:
            if step.start > 0 and not self._same_tail(fd, step):
                step.start = 0  # the segment was truncated and written again: start over
            if step.start == 0:
                os.ftruncate(fd, 0)
            position = step.start
            while position < step.end:
                data = step.reader.read(position, min(_CHUNK, step.end - position))
                if not data:
                    break
                os.pwrite(fd, data, position)
                position += len(data)
                copied += len(data)
            os.ftruncate(fd, position)
            os.fsync(fd)
        finally:
            os.close(fd)
        indexes = False
        if step.closed:  # a closed segment's indexes are final
            indexes = True
            for index in (step.segment.index.path, step.segment.time_index.path):
                try:
                    _copy_durable(index, self.directory / index.name)
                except FileNotFoundError:  # cleaned meanwhile: rebuilt on open if needed
                    indexes = False
        self._copied[base] = (step.segment, step.start + copied, indexes)
        return copied

    @staticmethod
    def _same_tail(fd: int, step: _Step) -> bool:
        """Whether the ``_TAIL_CHECK`` bytes before ``step.start`` are still the source's (a
        follower's log can be truncated and appended to again between two rounds)."""
        n = min(step.start, _TAIL_CHECK)
        return bool(os.pread(fd, n, step.start - n) == step.reader.read(step.start - n, n))

    def finish(self) -> None:
        """The last round (owner thread, the source flushed): copy what is left, drop files of
        segments the source no longer has, copy the active segment's indexes and the other
        files of the log's directory (``leader-epoch-checkpoint``, ``partition.metadata``)
        and fsync the directory: the copy is then what a clean shutdown leaves."""
        self.copy(self.plan())
        bases = {s.base_offset for s in self.source.segments}
        for path in self.directory.iterdir():
            stem = path.name.partition(".")[0]
            if len(stem) == 20 and stem.isdigit() and int(stem) not in bases:
                path.unlink()
        active = self.source.segments[-1]  # its indexes as the flush just wrote them
        for index in (active.index.path, active.time_index.path):
            try:
                _copy_durable(index, self.directory / index.name)
            except FileNotFoundError:
                (self.directory / index.name).unlink(missing_ok=True)  # rebuilt on open
        for path in self.source.directory.iterdir():
            stem = path.name.partition(".")[0]
            if path.is_file() and not (len(stem) == 20 and stem.isdigit()):
                _copy_durable(path, self.directory / path.name)
        fsync_dir(self.directory)

    def discard(self) -> None:
        """Remove the copy (a cancelled move)."""
        shutil.rmtree(self.directory, ignore_errors=True)


class OfflineLog:
    """The log of a partition whose directory failed: offsets as last known, ``closed``,
    every read or write raises ``KafkaStorageError`` (KAFKA_STORAGE_ERROR, 56)."""

    closed = True
    size_in_bytes = 0
    segment_count = 0

    def __init__(self, log: Any, log_dir: Path, error: BaseException | None) -> None:
        self.topic: str = log.topic
        self.partition: int = log.partition
        self.config = log.config
        self.log_dir = log_dir
        self.directory: Path | None = getattr(log, "directory", None)
        self.error = error
        self.log_start_offset: int = log.log_start_offset
        self.log_end_offset: int = log.log_end_offset
        self.high_watermark: int = log.high_watermark
        self.recovery_point: int = log.recovery_point
        self.high_watermark_follows_leo: bool = log.high_watermark_follows_leo

    @classmethod
    def unknown(
        cls, topic: str, partition: int, config: Any, log_dir: Path, reason: str
    ) -> OfflineLog:
        """The log of a partition that may be in the offline ``log_dir`` (offsets 0)."""

        @dataclass
        class _Unknown:
            topic: str
            partition: int
            config: Any
            log_start_offset: int = 0
            log_end_offset: int = 0
            high_watermark: int = 0
            recovery_point: int = 0
            high_watermark_follows_leo: bool = True

        return cls(_Unknown(topic, partition, config), log_dir, KafkaStorageError(5, reason))

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise KafkaStorageError(
            5, f"log dir {self.log_dir} is offline ({self.topic}-{self.partition}): {self.error}"
        )

    append = append_as_follower = read = offset_for_timestamp = max_timestamp = _fail
    increment_log_start_offset = delete_segments_below_log_start = truncate_to = _fail
    truncate_fully_and_start_at = roll = end_offset_for_epoch = _fail
    assign_leader_epoch = segment_base_offsets = cleaner_segments = segment_reader = _fail

    def update_high_watermark(self, offset: int) -> int:
        return self.high_watermark

    def leader_epoch_entries(self) -> list[tuple[int, int]]:
        return []

    def update_config(self, config: Any) -> None:
        self.config = config

    def maybe_flush(self, now_ms: int | None = None) -> None:
        return None

    def flush(self, offset: int | None = None) -> None:
        return None  # nothing of it can be written any more (the broker's stop flushes all)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        return 0

    def close(self) -> None:
        return None

    def delete(self, *, defer_close: bool = False) -> None:
        return None

    def reap(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"OfflineLog({self.topic}-{self.partition} in {self.log_dir})"


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
