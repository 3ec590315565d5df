"""Background log maintenance of one broker: the flush policy, retention, checkpoints,
producer-state snapshots and the log cleaner.

``LogMaintenance.start(loop)`` runs, on ``LogManager``'s schedule:

* the flush policy (``log.flush.*``) and retention (``log.retention.*``, then the producer
  states are truncated to the new log starts) on the event loop: cheap unless due;
* checkpoints (three fsynced files per log dir, 3-8 ms measured) and producer-state snapshots
  (every 30 s, or the checkpoint interval when shorter) in a worker thread, so that they do
  not stall requests; at most one such write is in flight (``stop()`` awaits it);
* the log cleaner (``log.cleaner.*``; ``reconfigure_cleaner`` restarts it with new settings,
  as Kafka's ``LogCleaner.reconfigure``: shutdown, then start). Its threads start with the
  first log whose ``cleanup.policy`` includes ``compact`` (looked for at start, then at every
  turn of the loop until one is found: at most ``min(1 s, retention and checkpoint
  intervals)`` later; the cleaner's backoff is 15 s): a broker without a compacted log starts
  and stops no thread for it. A cleaner thread allocates its dedupe buffer at its first
  cleaning.

``stop()`` cancels the loop, shuts the cleaner down and awaits a write in flight; the final
snapshots, flush and checkpoint of a clean stop are the broker's (``Broker.stop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from odradek.broker.replica_manager import ReplicaManager, write_snapshots
from odradek.clock import Clock
from odradek.storage import LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner

__all__ = ["SNAPSHOT_EVERY_MS", "LogMaintenance"]

log = logging.getLogger("odradek.broker")

SNAPSHOT_EVERY_MS = 30_000


class LogMaintenance:
    def __init__(
        self,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        clock: Clock,
        *,
        retention_check_interval_ms: int,
    ) -> None:
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.clock = clock
        self.retention_check_interval_ms = retention_check_interval_ms
        self.log_cleaner: LogCleaner | None = None
        self._cleaner_threads = False  # whether log_cleaner's threads were started
        self._task: asyncio.Task[None] | None = None
        self._background: asyncio.Future[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop, cleaner: CleanerConfig) -> None:
        self._start_cleaner(loop, cleaner)
        self._task = loop.create_task(self._run())

    def _start_cleaner(self, loop: asyncio.AbstractEventLoop, config: CleanerConfig) -> None:
        """A cleaner whose threads swap segments through ``loop``; they start now if a
        compacted log exists, else from the maintenance loop once one does."""
        self.log_cleaner = LogCleaner(self.log_manager, config, self.clock, loop=loop)
        self._cleaner_threads = False
        self._maybe_start_cleaner_threads()

    def _maybe_start_cleaner_threads(self) -> None:
        cleaner = self.log_cleaner
        if cleaner is None or self._cleaner_threads:
            return
        if cleaner.config.num_threads <= 0 or not cleaner.config.enable:
            return
        if any(plog.config.compact for plog in self.log_manager.all_logs()):
            self._cleaner_threads = True
            cleaner.start()

    async def _shutdown_cleaner(self) -> None:
        if self.log_cleaner is not None and self._cleaner_threads:
            self._cleaner_threads = False
            await asyncio.get_running_loop().run_in_executor(None, self.log_cleaner.shutdown)

    async def reconfigure_cleaner(self, config: CleanerConfig) -> None:
        await self._shutdown_cleaner()
        self._start_cleaner(asyncio.get_running_loop(), config)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._shutdown_cleaner()
        if self._background is not None:
            with contextlib.suppress(Exception):
                await self._background  # a checkpoint or snapshot still being written
            self._background = None

    async def _run(self) -> None:
        lm = self.log_manager
        clock = self.clock
        interval = max(
            0.01,
            min(
                1.0,
                self.retention_check_interval_ms / 1000.0,
                lm.checkpoint_interval_ms / 1000.0,
            ),
        )
        now = clock.now_ms()
        next_flush = now + lm.flush_check_interval_ms
        next_retention = now + lm.retention_check_interval_ms
        next_checkpoint = now + lm.checkpoint_interval_ms
        next_snapshot = now + min(SNAPSHOT_EVERY_MS, lm.checkpoint_interval_ms)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = clock.now_ms()
            try:
                self._maybe_start_cleaner_threads()
                if now >= next_flush:
                    next_flush = now + lm.flush_check_interval_ms
                    lm.run_flush(now)
                if now >= next_retention:
                    next_retention = now + lm.retention_check_interval_ms
                    lm.run_retention(now)
                    self.replica_manager.truncate_producer_states()
                if now >= next_checkpoint:
                    next_checkpoint = now + lm.checkpoint_interval_ms
                    self._background = loop.run_in_executor(None, self._checkpoint_quietly)
                    await asyncio.shield(self._background)
                if now >= next_snapshot:
                    next_snapshot = now + min(SNAPSHOT_EVERY_MS, lm.checkpoint_interval_ms)
                    snapshots = self.replica_manager.producer_state_snapshots()
                    if snapshots:
                        self._background = loop.run_in_executor(None, write_snapshots, snapshots)
                        await asyncio.shield(self._background)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log maintenance failed")

    def _checkpoint_quietly(self) -> None:
        try:
            self.log_manager.checkpoint()
        except RuntimeError:
            # a partition was created while the worker thread iterated: next time
            log.debug("checkpoint skipped (logs changed meanwhile)")
