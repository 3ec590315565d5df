"""Checkpoint files in Kafka's text formats, written with fsync + atomic rename: the per-log-dir
offset checkpoints here, the per-partition leader-epoch checkpoint in ``leader_epoch``."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "CHECKPOINT_VERSION",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "OffsetCheckpointFile",
    "fsync_dir",
    "read_checkpoint_lines",
    "write_atomic",
    "write_atomically",
]

logger = logging.getLogger("odradek.storage")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # high watermarks
CHECKPOINT_VERSION = 0
"""The version line every checkpoint file starts with."""


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path, payload: bytes, *, fsync: bool = True, sync_dir: bool = True, mode: int = 0o644
) -> None:
    """Replace ``path`` with ``payload`` so that a crash leaves the old or the new file: write
    ``path.tmp`` (created with ``mode``), fsync it (``fsync``), rename it over ``path``, fsync
    the directory (``sync_dir``, only with ``fsync``). The one atomic-write helper of odradek."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # a leftover .tmp keeps its old mode otherwise
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


def read_checkpoint_lines(path: Path) -> list[str] | None:
    """The entry lines of a checkpoint file (after its version and count lines); None if the
    file does not exist; ValueError if its header or its count is wrong."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
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
            body = read_checkpoint_lines(self.path)
        except (ValueError, OSError) as exc:
            logger.warning("ignoring unreadable checkpoint %s: %s", self.path, exc)
            return {}
        result: dict[tuple[str, int], int] = {}
        for line in body or ():
            topic, partition, offset = line.rsplit(" ", 2)
            result[(topic, int(partition))] = int(offset)
        return result

    def write(self, entries: Mapping[tuple[str, int], int]) -> None:
        lines = [str(CHECKPOINT_VERSION), str(len(entries))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
        write_atomically(self.path, "\n".join(lines) + "\n")
