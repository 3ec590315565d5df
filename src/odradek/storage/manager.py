"""LogManager: every partition log of a broker, over one or more ``log.dirs``."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping
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
from odradek.storage.future_log import (
    DELETE_SUFFIX,
    FutureLog,
    OfflineLog,
    parse_future_dir_name,
)
from odradek.storage.log import FileLog, parse_log_dir_name
from odradek.storage.memory import MemoryLog
from odradek.storage.producer_state import move_loaded_state

__all__ = [
    "TOPIC_NAME_MAX",
    "InvalidTopicError",
    "LogDirNotFoundError",
    "LogManager",
    "topic_name_error",
]

logger = logging.getLogger("odradek.storage")

TOPIC_NAME_MAX = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class InvalidTopicError(ValueError):
    """A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION, 17)."""


class _LockTakenError(KafkaStorageError):
    """Another process holds a log dir's lock: the manager does not open."""


class LogDirNotFoundError(ValueError):
    """A path that is not one of ``log.dirs`` (LOG_DIR_NOT_FOUND, 57)."""


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
    partitions go to the online directory holding the fewest (or the one an AlterReplicaLogDirs
    named for it beforehand, ``preferred_dirs``). With ``in_memory=True`` nothing touches the
    disk and logs are ``MemoryLog``s.

    A failed directory (Kafka's LogDirFailureChannel): a directory that cannot be opened at
    start, or whose file operation raised an ``OSError`` (``fail_log_dir``), is offline from
    then on: its logs are replaced by ``OfflineLog``s (every read and write raises
    ``KafkaStorageError``), nothing is created, flushed or checkpointed in it, and the listeners
    (``add_log_dir_failure_listener``) are told. The other directories keep serving; when every
    directory is offline at start, ``KafkaStorageError`` is raised.

    Moving a log between directories (AlterReplicaLogDirs): ``start_move`` creates a
    ``FutureLog`` in the target, the caller copies it in rounds (``FutureLog.plan``/``copy``,
    the copy off the owner thread) and ``complete_move`` swaps it in (see
    ``odradek.storage.future_log``). At start, a ``<topic>-<partition>.<uuid>-future`` directory
    is removed when the partition's log exists in some directory, and promoted otherwise.

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
        self._checkpoint_lock = threading.Lock()  # one writer of the checkpoint files at a time
        self._deleted: list[FileLog] = []  # deleted logs whose fds close after file.delete.delay.ms
        self.offline_dirs: dict[Path, str] = {}
        """Each offline log dir, with why."""
        self._dir_locks: dict[Path, int] = {}
        self._moves: dict[tuple[str, int], FutureLog] = {}
        self.preferred_dirs: dict[tuple[str, int], Path] = {}
        """Where a partition not hosted yet is to be created (AlterReplicaLogDirs)."""
        self._failure_listeners: list[Callable[[Path, list[tuple[str, int]]], None]] = []
        self._new_topics: set[str] = set()
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        now = self.clock.now_ms()
        self._next_retention_ms = now + retention_check_interval_ms
        self._next_flush_ms = now + flush_check_interval_ms
        self._next_checkpoint_ms = now + checkpoint_interval_ms
        self.closed = False
        try:
            for log_dir in self.log_dirs:  # a dir another process holds is fatal (Kafka's)
                try:
                    self._lock_dir(log_dir)
                except _LockTakenError:
                    raise
                except OSError as exc:  # Kafka: an unusable dir is offline, the others serve
                    logger.error("log dir %s is offline at start: %s", log_dir, exc)
                    self._mark_offline(log_dir, str(exc))
            self._resolve_future_dirs()
            for log_dir in self.live_log_dirs:
                try:
                    self._open_dir(log_dir)
                except OSError as exc:
                    logger.error("log dir %s is offline at start: %s", log_dir, exc)
                    self._mark_offline(log_dir, str(exc))
            if self.log_dirs and len(self.offline_dirs) == len(self.log_dirs):
                first = next(iter(self.offline_dirs.values()))
                raise KafkaStorageError(5, f"every log dir is offline ({first})")
        except BaseException:
            self._release_locks()
            raise

    # --- start-up -------------------------------------------------------------------------

    def _resolve_future_dirs(self) -> None:
        """Remove or promote the ``-future`` directories a crash left (see the class
        docstring; the dirs locked). Nothing is done while a directory is offline or cannot
        be listed (the partition's log may be there)."""
        if self.offline_dirs:
            return
        listings: dict[Path, list[Path]] = {}
        try:
            for log_dir in self.log_dirs:
                if log_dir.is_dir():
                    listings[log_dir] = [p for p in log_dir.iterdir() if p.is_dir()]
        except OSError:
            return
        current = {p.name for paths in listings.values() for p in paths}
        for log_dir, paths in listings.items():
            for path in paths:
                name = parse_future_dir_name(path.name)
                if name is None:
                    continue
                if name in current:
                    logger.warning("removing %s: the move did not complete", path)
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    logger.warning("completing the interrupted move of %s", path)
                    path.rename(log_dir / name)
                    current.add(name)
                    fsync_dir(log_dir)

    def _lock_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise _LockTakenError(
                exc.errno, f"{log_dir} is in use by another process (lock {_LOCK_FILE})"
            ) from exc
        self._locks.append(fd)
        self._dir_locks[log_dir] = fd

    def _open_dir(self, log_dir: Path) -> None:
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read()
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean_shutdown = marker.exists()
        for path in sorted(log_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_SUFFIX):  # a deletion (or a move) that did not finish
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
        elif self.offline_dirs and topic not in self._new_topics:
            # Kafka's rule: no log is created for a partition that is not new while a dir is
            # offline (its data may be there): the partition is offline instead
            offline_dir = next(iter(self.offline_dirs))
            log = OfflineLog.unknown(
                topic, partition, log_config, offline_dir, "a log dir is offline"
            )
        else:
            live = self.live_log_dirs
            if not live:
                raise KafkaStorageError(5, "every log dir is offline")
            log_dir = self.preferred_dirs.pop(key, None)
            if log_dir not in live:
                counts = {d: 0 for d in live}
                for d in self._log_dir_of.values():
                    if d in counts:
                        counts[d] += 1
                log_dir = min(live, key=lambda d: counts[d])
            try:
                log = FileLog(
                    log_dir / f"{topic}-{partition}",
                    log_config,
                    self.clock,
                    topic=topic,
                    partition=partition,
                )
            except OSError as exc:
                self.fail_log_dir(log_dir, exc)
                raise KafkaStorageError(exc.errno or 5, str(exc)) from exc
            self._log_dir_of[key] = log_dir
        self._logs[key] = log
        return log

    def expect_new_topic(self, topic: str) -> None:
        """``topic`` was just created: its logs may be created while a dir is offline (a
        partition of any other topic without a log then gets an ``OfflineLog``)."""
        self._new_topics.add(topic)

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    @property
    def live_log_dirs(self) -> list[Path]:
        """The log dirs that are not offline, in ``log.dirs`` order."""
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir holding the partition's log (None: no log, or in memory)."""
        return self._log_dir_of.get((topic, partition))

    def find_log_dir(self, path: str) -> Path:
        """The entry of ``log.dirs`` whose absolute path is ``path`` (LogDirNotFoundError)."""
        for log_dir in self.log_dirs:
            if str(log_dir.absolute()) == path or str(log_dir.resolve()) == path:
                return log_dir
        raise LogDirNotFoundError(f"{path} is not one of log.dirs")

    # --- failed directories (Kafka's LogDirFailureChannel) --------------------------------

    def add_log_dir_failure_listener(
        self, listener: Callable[[Path, list[tuple[str, int]]], None]
    ) -> None:
        """``listener(log_dir, partitions)`` after a dir went offline (owner thread)."""
        self._failure_listeners.append(listener)

    def _mark_offline(self, log_dir: Path, reason: str) -> None:
        self.offline_dirs[log_dir] = reason
        fd = self._dir_locks.pop(log_dir, None)
        if fd is not None:
            self._locks.remove(fd)
            try:
                os.close(fd)
            except OSError:
                pass

    def fail_log(self, topic: str, partition: int, error: BaseException) -> Path | None:
        """A file operation of the partition's log raised ``error``: take its dir offline
        (``fail_log_dir``). Returns the dir (None: the log is in memory or unknown)."""
        log_dir = self._log_dir_of.get((topic, partition))
        if log_dir is not None:
            self.fail_log_dir(log_dir, error)
        return log_dir

    def fail_log_dir(self, log_dir: Path, error: BaseException) -> list[tuple[str, int]]:
        """Take ``log_dir`` offline (owner thread; once): its logs become ``OfflineLog``s
        (their files closed without a flush), moves into or out of it are cancelled, the
        listeners are told. Returns the partitions that were in it."""
        if self.closed or log_dir in self.offline_dirs or log_dir not in self.log_dirs:
            return []  # closed: an append racing the broker's stop is no disk failure
        logger.error("log dir %s failed and is offline: %s", log_dir, error)
        self._mark_offline(log_dir, str(error))
        keys = [k for k, d in self._log_dir_of.items() if d == log_dir]
        for key, future in list(self._moves.items()):
            if future.target_dir == log_dir or key in keys:
                self.cancel_move(*key)
        for key in keys:
            log = self._logs[key]
            self._logs[key] = OfflineLog(log, log_dir, error)
            if isinstance(log, FileLog):
                _close_quietly(log)
        for listener in list(self._failure_listeners):
            try:
                listener(log_dir, keys)
            except Exception:
                logger.exception("log dir failure listener failed")
        return keys

    # --- moving logs between directories (AlterReplicaLogDirs) ----------------------------

    def future_log(self, topic: str, partition: int) -> FutureLog | None:
        """The move in progress of the partition's log, if any."""
        return self._moves.get((topic, partition))

    def future_logs(self) -> dict[tuple[str, int], FutureLog]:
        return dict(self._moves)

    def start_move(self, topic: str, partition: int, target: Path) -> FutureLog | None:
        """Begin moving the partition's log to ``target`` (a live entry of ``log.dirs``).
        None when it is there already (a move elsewhere is cancelled); a move to the same
        target is kept. KafkaStorageError when a dir is offline (Kafka creates no future log
        then), KeyError when the partition has no log here."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None or self.in_memory:
            raise KeyError(key)
        if not isinstance(log, FileLog) or log.closed:
            raise KafkaStorageError(5, f"{topic}-{partition} is offline")
        if target in self.offline_dirs:
            raise KafkaStorageError(5, f"log dir {target} is offline")
        current = self._moves.get(key)
        if current is not None:
            if current.target_dir == target:
                return current
            self.cancel_move(topic, partition)
        if self._log_dir_of.get(key) == target:
            return None
        if self.offline_dirs:
            raise KafkaStorageError(5, "a log dir is offline: no future log is created")
        try:
            future = FutureLog(log, target)
        except OSError as exc:
            self.fail_log_dir(target, exc)
            raise KafkaStorageError(exc.errno or 5, str(exc)) from exc
        self._moves[key] = future
        return future

    def cancel_move(self, topic: str, partition: int) -> bool:
        """Drop the partition's move and its copy; whether there was one."""
        future = self._moves.pop((topic, partition), None)
        if future is None:
            return False
        future.discard()
        return True

    def complete_move(self, topic: str, partition: int) -> PartitionLog:
        """Finish the partition's move (owner thread; no append runs meanwhile): the last
        copy round, then the swap (see ``odradek.storage.future_log``). Returns the log now
        in the target dir; the old one is deleted (its fds stay open for
        ``file.delete.delay.ms``). An OSError leaves the current log in place."""
        key = (topic, partition)
        future = self._moves[key]
        log = self._logs[key]
        assert isinstance(log, FileLog)
        try:
            log.flush()
            future.finish()
        except OSError:
            self.cancel_move(topic, partition)
            raise
        del self._moves[key]
        source = log.directory
        dead = source.with_name(f"{source.name}.{future.tag}{DELETE_SUFFIX}")
        final = future.target_dir / source.name
        source.rename(dead)  # the commit point: from here on the future log is the log
        try:
            fsync_dir(source.parent)
            future.directory.rename(final)
        except OSError:
            if not final.exists():  # roll back: the current log stays where it was
                dead.rename(source)
                future.discard()
            raise
        late: OSError | None = None
        try:
            fsync_dir(future.target_dir)
        except OSError as exc:  # the target fails once the copy is in place
            late = exc
        moved: PartitionLog
        try:
            moved = FileLog(
                final,
                log.config,
                self.clock,
                topic=topic,
                partition=partition,
                recovery_point=log.log_end_offset,
                log_start_offset=log.log_start_offset,
                high_watermark=log.high_watermark,
                clean_shutdown=True,  # flushed and fsynced by finish(): no recovery scan
            )
            moved.high_watermark_follows_leo = log.high_watermark_follows_leo
        except OSError as exc:  # the copy is the log now, but its dir fails
            moved = OfflineLog(log, future.target_dir, exc)
            late = late or exc
        move_loaded_state(log, moved)
        log.directory = dead
        log.delete(defer_close=True)
        self._deleted.append(log)
        self._logs[key] = moved
        self._log_dir_of[key] = future.target_dir
        if late is not None:
            self.fail_log_dir(future.target_dir, late)
        self.checkpoint()
        return self._logs[key]

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
        self._new_topics.discard(topic)
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
        self.cancel_move(*key)  # the copy first: a crash then leaves no future log to promote
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
            except OSError as exc:
                logger.exception("retention failed for %s-%d", log.topic, log.partition)
                self.fail_log(log.topic, log.partition, exc)
        if deleted and not self.in_memory:
            self.checkpoint()
        return deleted

    def run_flush(self, now_ms: int | None = None) -> None:
        """Apply the flush policy to every log (and flush segments rolled since the last run)."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        for log in list(self._logs.values()):
            try:
                log.maybe_flush(now_ms)
            except OSError as exc:
                logger.exception("flush failed for %s-%d", log.topic, log.partition)
                self.fail_log(log.topic, log.partition, exc)
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

    def checkpoint_log_start_offsets(self) -> None:
        """Write only the log-start-offset-checkpoint of every log dir (after DeleteRecords,
        so that the new start survives a crash, not only a clean stop). Any thread."""
        if self.in_memory:
            return
        with self._checkpoint_lock:
            for log_dir in self.live_log_dirs:
                keys = [k for k, d in list(self._log_dir_of.items()) if d == log_dir]
                OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(
                    {k: self._logs[k].log_start_offset for k in keys if k in self._logs}
                )

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset and high watermark checkpoints of every
        log dir (fsync + atomic rename)."""
        if self.in_memory:
            return
        failed: list[tuple[Path, OSError]] = []
        with self._checkpoint_lock:
            for log_dir in self.live_log_dirs:
                try:
                    self._checkpoint(log_dir)
                except OSError as exc:
                    failed.append((log_dir, exc))
        for log_dir, error in failed:
            self.fail_log_dir(log_dir, error)

    def _checkpoint(self, log_dir: Path) -> None:
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
            for key in list(self._moves):
                self.cancel_move(*key)
            for log in self._logs.values():
                try:
                    log.close()
                except OSError as exc:
                    logger.error("closing %s-%d failed: %s", log.topic, log.partition, exc)
                    self.fail_log(log.topic, log.partition, exc)
            for deleted in self._deleted:
                deleted.delete()  # closes the remaining fds at once
            self._deleted.clear()
            self.checkpoint()
            for log_dir in self.live_log_dirs:  # every log is flushed and checkpointed
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


def _close_quietly(log: FileLog) -> None:
    """Close a failed log's files without flushing them (the disk may not take writes)."""
    log.closed = True
    for segment in log.segments:
        try:
            segment.close_fd()
        except OSError:
            pass
    try:
        log.reap()
    except OSError:
        pass
