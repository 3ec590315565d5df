"""Why the oldest data of a partition is still there, and when it will go (pure decisions).

``explain_retention`` applies the same rules as ``LogBase.delete_old_segments`` and the log
cleaner to a description of a partition's segments, with time injected. It backs
``odradek topics explain-retention`` (see docs/retention.md for the rules in prose).

Rules, for the oldest segment (retention only ever deletes whole segments, oldest first):

* ``retention.ms`` (``cleanup.policy`` has ``delete``, ``retention.ms`` >= 0): the segment goes
  at the first retention check (every ``log.retention.check.interval.ms``) after its largest
  timestamp is more than ``retention.ms`` old; its files are unlinked then and their space is
  freed ``file.delete.delay.ms`` later at most (open fds).
* ``retention.bytes``: while the partition is larger than ``retention.bytes`` by at least the
  oldest segment's size, that segment goes at the next check.
* The **active segment** is only deleted when *every* segment has expired: the log then rolls
  first (Kafka's behaviour). While newer data keeps arriving it is closed by ``segment.ms``
  (rolled on the first append once its first batch is ``segment.ms`` older than the new one),
  so a record can outlive ``retention.ms`` by up to ``segment.ms``.
* ``compact`` only: nothing is deleted by age or size; a record goes when a newer record with
  the same key has been cleaned past it (not before ``min.compaction.lag.ms``, and
  ``max.compaction.lag.ms`` at the latest, once the cleaner runs), tombstones
  ``delete.retention.ms`` after that.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.config import LogConfig

__all__ = ["RetentionExplanation", "SegmentInfo", "explain_retention", "scan_log_dir"]

_HEADER = struct.Struct(">qi11xiqq")  # baseOffset, batchLength, lastOffsetDelta, baseTs, maxTs


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    size: int
    first_timestamp: int  # maxTimestamp of the first batch, -1 when empty
    largest_timestamp: int  # the segment's largest timestamp (its mtime when it has none)


@dataclass(frozen=True, slots=True)
class RetentionExplanation:
    """``rule``: what keeps the oldest data (``active segment``, ``retention.ms``,
    ``retention.bytes``, ``compaction``, ``unlimited``, ``empty``); ``deletable_at_ms``: when the
    oldest segment is due (-1: never by retention), ``deleted_by_ms``: when a retention check
    will have deleted it at the latest (-1 likewise)."""

    oldest_offset: int
    oldest_timestamp: int
    segments: int
    size: int
    rule: str
    detail: str
    deletable_at_ms: int
    deleted_by_ms: int


def explain_retention(
    segments: list[SegmentInfo],
    config: LogConfig,
    now_ms: int,
    *,
    log_start_offset: int | None = None,
    retention_check_interval_ms: int = 300_000,
) -> RetentionExplanation:
    """Explain the oldest data of a partition whose segments (oldest first, the last one
    active) are ``segments``."""
    size = sum(s.size for s in segments)
    start = segments[0].base_offset if log_start_offset is None else log_start_offset
    data = [s for s in segments if s.size]
    if not data:
        return RetentionExplanation(start, -1, len(segments), 0, "empty", "no data", -1, -1)
    oldest = data[0]
    is_active = oldest is segments[-1]
    check = retention_check_interval_ms

    def result(rule: str, detail: str, due: int) -> RetentionExplanation:
        return RetentionExplanation(
            start,
            oldest.first_timestamp,
            len(segments),
            size,
            rule,
            detail,
            due,
            -1 if due < 0 else max(due, now_ms) + check,
        )

    if not config.delete_enabled:
        return result(
            "compaction",
            "cleanup.policy=compact: records stay until a newer record with the same key is "
            f"cleaned past them (min.compaction.lag.ms={config.min_compaction_lag_ms}, "
            f"tombstones: delete.retention.ms={config.delete_retention_ms})",
            -1,
        )
    over = config.retention_bytes >= 0 and size - oldest.size >= config.retention_bytes
    if over and not is_active:
        return result(
            "retention.bytes",
            f"the partition holds {size} bytes, over retention.bytes="
            f"{config.retention_bytes} by more than this segment: due at the next check",
            now_ms,
        )
    if config.retention_ms < 0:
        detail = "retention.ms=-1"
        if config.retention_bytes >= 0:
            detail += (
                f"; the partition ({size} bytes) is within retention.bytes={config.retention_bytes}"
            )
        return result("unlimited", detail, -1)
    due = oldest.largest_timestamp + config.retention_ms + 1
    if is_active:
        roll = oldest.first_timestamp + config.max_segment_ms
        return result(
            "active segment",
            "only the active segment holds data: it is deleted (after a roll) once its newest "
            f"record is retention.ms={config.retention_ms} old, or closed by segment.ms="
            f"{config.max_segment_ms} on the first append after {roll} and then aged out",
            due,
        )
    return result(
        "retention.ms",
        f"its newest record ({oldest.largest_timestamp}) is not yet retention.ms="
        f"{config.retention_ms} old",
        due,
    )


def scan_log_dir(directory: Path) -> list[SegmentInfo]:
    """Read-only description of the segments of one ``<topic>-<partition>`` directory
    (a header walk of every ``.log`` file; nothing is written, the broker may be running)."""
    infos = []
    for path in sorted(directory.glob("*.log")):
        stem = path.name[:-4]
        if len(stem) != 20 or not stem.isdigit():
            continue
        first = -1
        largest = -1
        with path.open("rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            position = 0
            while position + 61 <= size:
                header = os.pread(fd, _HEADER.size, position)
                if len(header) < _HEADER.size:
                    break
                _, length, _, _, max_ts = _HEADER.unpack(header)
                if first < 0:
                    first = max_ts
                largest = max(largest, max_ts)
                position += length + 12
            if largest <= 0:
                largest = os.fstat(fd).st_mtime_ns // 1_000_000
        infos.append(SegmentInfo(int(stem), size, first, largest))
    return infos
