"""Checkpoint files in Kafka's text formats, written with fsync + atomic rename."""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "LeaderEpochCache",
    "OffsetCheckpointFile",
    "fsync_dir",
    "write_atomic",
    "write_atomically",
]

logger = logging.getLogger("odradek.storage")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_VERSION = 0


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, payload: bytes, *, fsync: bool = True, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``payload`` so that a crash leaves the old or the new file: write
    ``path.tmp``, fsync it (``fsync``), rename it over ``path``, fsync the directory
    (``sync_dir``, only with ``fsync``). The one atomic-write helper of odradek."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync and sync_dir:
        fsync_dir(path.parent)


def write_atomically(path: Path, text: str) -> None:
    """Write ``path.tmp``, fsync it, rename it over ``path``, fsync the directory."""
    write_atomic(path, text.encode())


def _read_lines(path: Path) -> list[str] | None:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2 or int(lines[0]) != _VERSION:
        raise ValueError(f"{path}: unrecognised checkpoint header")
    count = int(lines[1])
    body = lines[2 : 2 + count]
    if len(body) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(body)}")
    return body


class OffsetCheckpointFile:
    """A per-log-dir offset checkpoint (recovery point, log start offset, high watermark).

    Format (Kafka's, text, one item per line)::

        0                          version
        <count>                    number of entries
        <topic> <partition> <offset>   repeated <count> times

    Topic names never contain spaces (Kafka's legal characters are [a-zA-Z0-9._-]).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        """The entries, or {} if the file does not exist or cannot be parsed (logged)."""
        try:
            body = _read_lines(self.path)
        except (ValueError, OSError) as exc:
            logger.warning("ignoring unreadable checkpoint %s: %s", self.path, exc)
            return {}
        result: dict[tuple[str, int], int] = {}
        for line in body or ():
            topic, partition, offset = line.rsplit(" ", 2)
            result[(topic, int(partition))] = int(offset)
        return result

    def write(self, entries: Mapping[tuple[str, int], int]) -> None:
        lines = [str(_VERSION), str(len(entries))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
        write_atomically(self.path, "\n".join(lines) + "\n")


class LeaderEpochCache:
    """Leader epoch -> first offset written in that epoch (Kafka's LeaderEpochFileCache).

    File ``leader-epoch-checkpoint`` in the partition directory (Kafka's format)::

        0                        version
        <count>                  number of entries
        <epoch> <startOffset>    repeated, epochs and start offsets strictly increasing

    Rewritten (fsync + rename) on every change (leader election, truncation, retention moving
    the log start offset), except for an epoch first seen in appended batches
    (``assign(..., defer=True)``): that one only marks the cache dirty and is written by the
    log's next ``flush()`` (``flush()`` here), before the log's recovery point moves. So the file
    holds every entry whose start offset is below the recovery point; the newer ones are
    rebuilt on an unclean start from the partitionLeaderEpoch of the batches that recovery
    scans anyway (``FileLog._load``). This keeps an fsync off the event loop on the first
    append of every new partition and every new epoch. ``path=None`` keeps it in memory.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.dirty = False  # entries not yet in the file (deferred assign)
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        if path is not None:
            try:
                body = _read_lines(path)
            except (ValueError, OSError) as exc:
                logger.warning("ignoring unreadable %s: %s", path, exc)
                body = None
            for line in body or ():
                epoch, offset = line.split()
                self._epochs.append(int(epoch))
                self._offsets.append(int(offset))

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else -1

    def assign(self, epoch: int, start_offset: int, *, defer: bool = False) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (ignored unless newer than the last).
        With ``defer`` the file is rewritten by the next ``flush()`` instead of now."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        # entries whose start offset is not below the new one are superseded (Kafka does the same)
        while self._offsets and self._offsets[-1] >= start_offset:
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        if defer and self.path is not None:
            self.dirty = True
        else:
            self._save()

    def flush(self) -> None:
        """Write the file if a deferred ``assign`` left it behind the entries."""
        if self.dirty:
            self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's endOffsetFor (OffsetsForLeaderEpoch): ``(largest epoch <= epoch, its end offset)``;
        the end offset is the next epoch's start offset, or the LEO for the latest epoch.
        ``(-1, -1)`` when ``epoch`` is older than every entry."""
        if not self._epochs:
            return -1, -1
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        i = bisect_right(self._epochs, epoch)
        if i == 0:
            return -1, -1
        if i == len(self._epochs):
            return self._epochs[-1], log_end_offset
        return self._epochs[i - 1], self._offsets[i]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries whose start offset is >= ``end_offset`` (log truncated to it)."""
        n = len(self._offsets)
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
        if len(self._offsets) != n:
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: drop older entries, keeping the epoch that covers
        it with its start offset moved up."""
        i = bisect_right(self._offsets, start_offset) - 1
        if i < 0 or (i == 0 and self._offsets[0] == start_offset):
            return
        del self._epochs[:i]
        del self._offsets[:i]
        self._offsets[0] = start_offset
        self._save()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._offsets.clear()
            self._save()

    def _save(self) -> None:
        self.dirty = False
        if self.path is None:
            return
        lines = [str(_VERSION), str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        write_atomically(self.path, "\n".join(lines) + "\n")
