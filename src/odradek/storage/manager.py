"""LogManager: every partition log of a broker, over one or more ``log.dirs``."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from odradek.clock import Clock, SystemClock
from odradek.storage.api import PartitionLog
from odradek.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.log import FileLog, parse_log_dir_name
from odradek.storage.memory import MemoryLog

__all__ = ["TOPIC_NAME_MAX", "InvalidTopicError", "LogManager", "topic_name_error"]

logger = logging.getLogger("odradek.storage")

TOPIC_NAME_MAX = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class InvalidTopicError(ValueError):
    """A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION, 17)."""


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None when it is. Kafka's rule: 1-249
    characters from [a-zA-Z0-9._-], not "." or ".." (the one copy of it)."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return "topic name cannot be '.' or '..'"
    if len(name) > TOPIC_NAME_MAX:
        return f"topic name is longer than {TOPIC_NAME_MAX} characters"
    if not _LEGAL_TOPIC.match(name):
        return "topic name may contain only ASCII alphanumerics, '.', '_' and '-'"
    return None


def validate_topic_name(topic: str) -> None:
    """Raise InvalidTopicError unless ``topic`` is legal (``topic_name_error``)."""
    if topic_name_error(topic) is not None:
        raise InvalidTopicError(f"illegal topic name {topic!r}")


class LogManager:
    """Opens, creates, checkpoints, retains, flushes and deletes partition logs.

    Layout of each directory of ``log.dirs`` (Kafka's)::

        <log.dir>/.lock                               flock held while the manager is open
        <log.dir>/.kafka_cleanshutdown                written by close(), removed on open: the
                                                      active segments need no recovery scan
        <log.dir>/recovery-point-offset-checkpoint    "0\\n<count>\\n<topic> <partition> <offset>\\n..."
        <log.dir>/log-start-offset-checkpoint         same format
        <log.dir>/replication-offset-checkpoint       same format (high watermarks)
        <log.dir>/<topic>-<partition>/                one FileLog per partition

    Every log found is opened (and recovered from its recovery point) in ``__init__``. New
    partitions go to the directory holding the fewest. With ``in_memory=True`` nothing touches
    the disk and logs are ``MemoryLog``s.

    Background work is driven by the caller (the broker's asyncio task calls
    ``maintenance(now_ms)`` about once a second): retention every
    ``log.retention.check.interval.ms``, the flush policy every ``log.flush.scheduler.interval.ms``
    (bounded to 1 s), checkpoints every ``log.flush.offset.checkpoint.interval.ms``.
    """

    def __init__(
        self,
        log_dirs: Iterable[Path | str] | None,
        default_config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        in_memory: bool = False,
        topic_configs: Mapping[str, LogConfig] | None = None,
        retention_check_interval_ms: int = 300_000,
        flush_check_interval_ms: int = 1_000,
        checkpoint_interval_ms: int = 60_000,
    ) -> None:
        self.default_config = default_config or LogConfig()
        self.clock: Clock = clock or SystemClock()
        self.in_memory = in_memory
        self.log_dirs = [] if in_memory else [Path(d) for d in (log_dirs or ())]
        if not in_memory and not self.log_dirs:
            raise ValueError("log_dirs is empty (use in_memory=True for a memory-only manager)")
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._log_dir_of: dict[tuple[str, int], Path] = {}
        self._locks: list[int] = []
        self._deleted: list[FileLog] = []  # deleted logs whose fds close after file.delete.delay.ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        now = self.clock.now_ms()
        self._next_retention_ms = now + retention_check_interval_ms
        self._next_flush_ms = now + flush_check_interval_ms
        self._next_checkpoint_ms = now + checkpoint_interval_ms
        self.closed = False
        try:
            for log_dir in self.log_dirs:
                self._open_dir(log_dir)
        except BaseException:
            self._release_locks()
            raise

    # --- start-up -------------------------------------------------------------------------

    def _open_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise KafkaStorageError(
                exc.errno, f"{log_dir} is in use by another process (lock {_LOCK_FILE})"
            ) from exc
        self._locks.append(fd)
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read()
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean_shutdown = marker.exists()
        for path in sorted(log_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith("-delete"):  # a topic deletion that did not finish
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                topic, partition = parse_log_dir_name(path.name)
            except ValueError:
                continue
            key = (topic, partition)
            if key in self._logs:
                logger.error("%s-%d exists in two log dirs; ignoring %s", topic, partition, path)
                continue
            self._logs[key] = FileLog(
                path,
                self._topic_configs.get(topic, self.default_config),
                self.clock,
                topic=topic,
                partition=partition,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key),
                high_watermark=high_watermarks.get(key),
                clean_shutdown=clean_shutdown,
            )
            self._log_dir_of[key] = log_dir
        if clean_shutdown:  # from now on a crash must lead to recovery
            marker.unlink()
            fsync_dir(log_dir)

    # --- logs -----------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created (empty) if it does not exist. ``config`` becomes the
        topic's config when given."""
        key = (topic, partition)
        if config is not None:
            self._topic_configs[topic] = config
        log = self._logs.get(key)
        if log is not None:
            if config is not None:
                log.update_config(config)
            return log
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"partition {partition} is negative")
        log_config = self._topic_configs.get(topic, self.default_config)
        if self.in_memory:
            log = MemoryLog(topic, partition, log_config, self.clock)
        else:
            counts = {d: 0 for d in self.log_dirs}
            for d in self._log_dir_of.values():
                counts[d] += 1
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            log = FileLog(
                log_dir / f"{topic}-{partition}",
                log_config,
                self.clock,
                topic=topic,
                partition=partition,
            )
            self._log_dir_of[key] = log_dir
        self._logs[key] = log
        return log

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def topic_config(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Set the topic's config and apply it to its logs."""
        self._topic_configs[topic] = config
        for (t, _), log in self._logs.items():
            if t == topic:
                log.update_config(config)

    def delete_topic(self, topic: str) -> None:
        """Delete every partition log of ``topic`` (files included) and forget its config."""
        for key in [k for k in self._logs if k[0] == topic]:
            self._delete_log(key)
        self._topic_configs.pop(topic, None)
        if not self.in_memory:
            self.checkpoint()

    def delete_log(self, topic: str, partition: int) -> bool:
        """Delete one partition's log, files included (StopReplica with deletion); whether it
        existed."""
        if (topic, partition) not in self._logs:
            return False
        self._delete_log((topic, partition))
        if not self.in_memory:
            self.checkpoint()
        return True

    def _delete_log(self, key: tuple[str, int]) -> None:
        log = self._logs.pop(key)
        self._log_dir_of.pop(key, None)
        if isinstance(log, FileLog):
            log.delete(defer_close=True)
            self._deleted.append(log)
        else:
            log.delete()

    # --- background work ------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        deleted = 0
        for log in list(self._logs.values()):
            try:
                deleted += log.delete_old_segments(now_ms)
            except OSError:
                logger.exception("retention failed for %s-%d", log.topic, log.partition)
        if deleted and not self.in_memory:
            self.checkpoint()
        return deleted

    def run_flush(self, now_ms: int | None = None) -> None:
        """Apply the flush policy to every log (and flush segments rolled since the last run)."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        for log in list(self._logs.values()):
            try:
                log.maybe_flush(now_ms)
            except OSError:
                logger.exception("flush failed for %s-%d", log.topic, log.partition)
        self._deleted = [log for log in self._deleted if not log.reap()]

    def maintenance(self, now_ms: int | None = None) -> None:
        """Run whatever background work is due (call about once a second)."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        if now_ms >= self._next_flush_ms:
            self._next_flush_ms = now_ms + self.flush_check_interval_ms
            self.run_flush(now_ms)
        if now_ms >= self._next_retention_ms:
            self._next_retention_ms = now_ms + self.retention_check_interval_ms
            self.run_retention(now_ms)
        if now_ms >= self._next_checkpoint_ms:
            self._next_checkpoint_ms = now_ms + self.checkpoint_interval_ms
            self.checkpoint()

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset and high watermark checkpoints of every
        log dir (fsync + atomic rename)."""
        if self.in_memory:
            return
        for log_dir in self.log_dirs:
            keys = [k for k, d in self._log_dir_of.items() if d == log_dir]
            logs: dict[tuple[str, int], Any] = {k: self._logs[k] for k in keys}
            OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(
                {k: log.recovery_point for k, log in logs.items()}
            )
            OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                {k: log.log_start_offset for k, log in logs.items()}
            )
            OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(
                {k: log.high_watermark for k, log in logs.items()}
            )

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, release the log dir locks."""
        if self.closed:
            return
        self.closed = True
        try:
            for log in self._logs.values():
                log.close()
            for deleted in self._deleted:
                deleted.delete()  # closes the remaining fds at once
            self._deleted.clear()
            self.checkpoint()
            for log_dir in self.log_dirs:  # every log is flushed and checkpointed
                (log_dir / CLEAN_SHUTDOWN_FILE).touch()
                fsync_dir(log_dir)
        finally:
            self._release_locks()

    def _release_locks(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks.clear()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
