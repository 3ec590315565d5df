"""The storage contract shared by both engines (docs/internals.md §2)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from odradek.storage.config import LogConfig

__all__ = ["AppendResult", "FileRegion", "PartitionLog", "ReadResult"]


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 3.5x more to build (hot path)
class FileRegion:
    """``length`` bytes of an open segment file starting at ``position`` (for ``os.sendfile``).

    The fd belongs to the log: do not close it. It stays valid for at least
    ``file.delete.delay.ms`` after the segment is deleted by retention (deleted files are
    unlinked at once but their fds are closed only after that delay). If the log is truncated
    meanwhile, reading past the new end returns fewer bytes (sendfile returns 0): treat that
    as end of data.
    """

    fd: int
    position: int
    length: int

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The region's bytes (tests, tools, and engines without sendfile)."""
        data = os.pread(self.fd, self.length, self.position)
        while len(data) < self.length:
            more = os.pread(self.fd, self.length - len(data), self.position + len(data))
            if not more:
                break
            data += more
        return data


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 3.5x more to build (hot path)
class ReadResult:
    """What ``PartitionLog.read`` returns.

    ``records``: whole batches (a ``FileRegion`` for ``FileLog``, ``bytes`` for ``MemoryLog``),
    empty when there is nothing to read; ``len(records)`` is the byte count. The watermarks are
    those at the time of the read (Fetch responses carry them).
    """

    records: FileRegion | bytes
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 3.5x more to build (hot path)
class AppendResult:
    """What ``PartitionLog.append`` returns: the offsets assigned to the appended batches,
    the LogAppendTime used (-1 with CreateTime) and the log start offset (Produce response)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int


@runtime_checkable
class PartitionLog(Protocol):
    """One partition's log. Offsets: ``log_start_offset <= high_watermark <= log_end_offset``.

    ``recovery_point``: every offset below it is known to be on disk (fsynced).
    See docs/internals.md §2 for the full contract; ``FileLog`` and ``MemoryLog`` implement it.
    """

    topic: str
    partition: int
    config: LogConfig
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    recovery_point: int
    high_watermark_follows_leo: bool  # True on a single broker; replication sets it False

    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        log_append_time: bool = False,
    ) -> AppendResult: ...

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult: ...

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult: ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None: ...

    def max_timestamp(self) -> tuple[int, int] | None: ...

    def update_high_watermark(self, offset: int) -> int: ...

    def increment_log_start_offset(self, offset: int) -> bool: ...

    def delete_segments_below_log_start(self, now_ms: int | None = None) -> int: ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def roll(self, now_ms: int | None = None) -> None: ...

    def flush(self, offset: int | None = None) -> None: ...

    def delete_old_segments(self, now_ms: int | None = None) -> int: ...

    def maybe_flush(self, now_ms: int | None = None) -> None: ...

    def segment_base_offsets(self) -> list[int]:
        """The base offset of every segment, in order (the last is the active segment's)."""
        ...

    def leader_epoch_entries(self) -> list[tuple[int, int]]: ...

    def assign_leader_epoch(self, epoch: int, start_offset: int | None = None) -> None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def update_config(self, config: LogConfig) -> None: ...

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def segment_count(self) -> int: ...

    def close(self) -> None: ...

    def delete(self) -> None: ...
