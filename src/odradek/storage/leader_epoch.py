"""The leader-epoch cache of one partition and its ``leader-epoch-checkpoint`` file (Kafka's
``LeaderEpochFileCache``): which leader epoch began at which offset."""

from __future__ import annotations

import logging
from bisect import bisect_right
from pathlib import Path

from odradek.storage.checkpoint import CHECKPOINT_VERSION, read_checkpoint_lines, write_atomically

__all__ = ["LEADER_EPOCH_CHECKPOINT", "LeaderEpochCache"]

logger = logging.getLogger("odradek.storage")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
"""The file's name in the partition directory."""


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
                body = read_checkpoint_lines(path)
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
        lines = [str(CHECKPOINT_VERSION), str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        write_atomically(self.path, "\n".join(lines) + "\n")
