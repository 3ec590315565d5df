"""``LogDirs``: the broker's side of JBOD (several ``log.dirs``): moving replicas between
directories (AlterReplicaLogDirs; Kafka's ReplicaAlterLogDirsManager) and taking a failed
directory offline (Kafka's LogDirFailureChannel and ReplicaManager.handleLogDirFailure).

A move (``alter``): the log manager creates the future log in the target dir
(``odradek.storage.future_log``); a task of this broker's event loop copies it in rounds, each
round's bytes copied by a worker thread while produce and fetch go on, until what is left is
below ``FINAL_ROUND_BYTES`` (or after ``MAX_ROUNDS``); then, on the event loop and without
yielding to it (so no append runs meanwhile), the last round and the swap, and the
partition's ``Partition.log`` becomes the moved log. Reads and writes go to the current log
throughout; a failure of the copy cancels the move and leaves the current log in place.

A failure: a partition whose append or read raised an ``OSError`` (``Partition`` answers
KAFKA_STORAGE_ERROR) has its whole directory taken offline (``log_dir_failed``); the log
manager replaces that directory's logs with ``OfflineLog``s, which this class hands to the
partitions, so that each of them answers KAFKA_STORAGE_ERROR from then on (Produce and Fetch
versions that predate it answer NOT_LEADER_OR_FOLLOWER, as Kafka maps it) while the other
directories serve on. The replica fetchers stop fetching for that directory's partitions, and
a fetcher whose follower append raises an ``OSError`` takes the directory offline the same
way. Listeners (``add_failure_listener``) are told; in a cluster on ZooKeeper, the broker's
part (``ZkCluster.log_dir_failed``) writes the controller's ``/log_dir_event_notification``;
the controller's next LeaderAndIsr is answered KAFKA_STORAGE_ERROR for those partitions
(``leadership.py``), and they stay offline until the broker restarts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.storage.errors import KafkaStorageError
from odradek.storage.manager import LogDirNotFoundError, LogManager

__all__ = ["FINAL_ROUND_BYTES", "MAX_ROUNDS", "LogDirs"]

log = logging.getLogger("odradek.broker")

FINAL_ROUND_BYTES = 1 << 20
"""A move's last round (on the event loop) copies at most about this much, unless the
partition takes more than that in appends during each of ``MAX_ROUNDS`` rounds."""
MAX_ROUNDS = 20


class _HasLog(Protocol):
    log: Any


class _Fetchers(Protocol):
    on_storage_error: Callable[[str, int, str], None] | None

    def remove_fetcher_for_partitions(self, keys: list[tuple[str, int]]) -> None: ...


class LogDirs:
    """Moves between log dirs and failed log dirs, for one ``ReplicaManager``: its log
    manager, its partitions by (topic, partition) (whose ``log`` is replaced after a move or
    a failure) and its set of tasks (cancelled when it closes)."""

    def __init__(
        self,
        log_manager: LogManager,
        partitions: Mapping[tuple[str, int], _HasLog],
        tasks: set[asyncio.Task[Any]],
        fetchers: _Fetchers | None = None,
    ) -> None:
        self.log_manager = log_manager
        self._fetchers = fetchers
        self._partitions = partitions
        self._tasks = tasks
        self._moving: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._listeners: list[Callable[[Path, list[tuple[str, int]]], None]] = []
        self.moves_completed = 0
        self.log_manager.add_log_dir_failure_listener(self._on_failure)
        if fetchers is not None:
            fetchers.on_storage_error = self.log_dir_failed

    # -- AlterReplicaLogDirs -------------------------------------------------------------------

    def alter(self, topic: str, partition: int, path: str) -> ErrorCode:
        """Move the partition's replica to the log dir ``path`` (Kafka's
        ``ReplicaManager.alterReplicaLogDirs``): LOG_DIR_NOT_FOUND for a path not in
        ``log.dirs``, KAFKA_STORAGE_ERROR when that dir (or the partition's) is offline, or
        another dir is (no future log is created then), REPLICA_NOT_AVAILABLE when the
        partition has no replica here (the dir is remembered for when it gets one), else NONE
        and the move runs in the background (or nothing, when the replica is there already)."""
        lm = self.log_manager
        try:
            target = lm.find_log_dir(path)
        except LogDirNotFoundError:
            return ErrorCode.log_dir_not_found
        if target in lm.offline_dirs:
            return ErrorCode.kafka_storage_error
        key = (topic, partition)
        if lm.get(topic, partition) is None:
            lm.preferred_dirs[key] = target
            return ErrorCode.replica_not_available
        try:
            future = lm.start_move(topic, partition, target)
        except KafkaStorageError as exc:
            log.warning("cannot move %s-%d to %s: %s", topic, partition, target, exc)
            return ErrorCode.kafka_storage_error
        except KeyError:
            return ErrorCode.replica_not_available
        task = self._moving.get(key)
        if future is None:
            if task is not None:
                task.cancel()
        elif task is None or task.done():
            self._start(key)
        return ErrorCode.none

    def _start(self, key: tuple[str, int]) -> None:
        task = asyncio.get_running_loop().create_task(self._move(key))
        self._moving[key] = task
        tasks = self._tasks
        tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            tasks.discard(t)
            if self._moving.get(key) is t:
                del self._moving[key]

        task.add_done_callback(done)

    async def _move(self, key: tuple[str, int]) -> None:
        lm = self.log_manager
        loop = asyncio.get_running_loop()
        topic, partition = key
        try:
            for _ in range(MAX_ROUNDS):
                future = lm.future_log(topic, partition)
                if future is None:
                    return
                if future.remaining_bytes() <= FINAL_ROUND_BYTES:
                    break
                await loop.run_in_executor(None, future.copy, future.plan())
            if lm.future_log(topic, partition) is None:
                return
            moved = lm.complete_move(topic, partition)
        except asyncio.CancelledError:
            raise
        except OSError as exc:
            log.error("moving %s-%d failed: %s", topic, partition, exc)
            lm.cancel_move(topic, partition)
            return
        handle = self._partitions.get(key)
        if handle is not None:
            handle.log = moved
        self.moves_completed += 1
        log.info("moved %s-%d to %s", topic, partition, lm.log_dir_of(topic, partition))

    def moving(self) -> list[tuple[str, int]]:
        """The partitions being moved."""
        return [k for k, t in self._moving.items() if not t.done()]

    # -- failed log dirs -----------------------------------------------------------------------

    def add_failure_listener(self, listener: Callable[[Path, list[tuple[str, int]]], None]) -> None:
        """``listener(log_dir, partitions)`` once a log dir went offline."""
        self._listeners.append(listener)

    def log_dir_failed(self, topic: str, partition: int, reason: str) -> None:
        """An append or read of the partition's log raised an I/O error: its dir goes
        offline (nothing when the log is in memory or its dir is offline already)."""
        self.log_manager.fail_log(topic, partition, KafkaStorageError(5, reason))

    def _on_failure(self, log_dir: Path, keys: list[tuple[str, int]]) -> None:
        partitions = self._partitions
        if self._fetchers is not None:  # Kafka: replicaFetcherManager.removeFetcherForPartitions
            self._fetchers.remove_fetcher_for_partitions(list(keys))
        for key in keys:
            handle = partitions.get(key)
            offline = self.log_manager.get(*key)
            if handle is not None and offline is not None:
                handle.log = offline
            task = self._moving.get(key)
            if task is not None:
                task.cancel()
        for listener in list(self._listeners):
            try:
                listener(log_dir, keys)
            except Exception:
                log.exception("log dir failure listener failed")
