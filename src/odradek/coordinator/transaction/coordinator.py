"""TransactionCoordinator: the I/O around ``TransactionStateManager`` (Kafka's
``TransactionCoordinator`` + ``TransactionStateManager``'s log access + the marker channel).

It owns ``__transaction_state`` (``transaction.state.log.num.partitions`` partitions,
compacted, created on the first transactional InitProducerId through the ``PartitionWriter``,
as the group coordinator creates ``__consumer_offsets``), loads the partitions it leads by
replaying their records (the partition's leader epoch is the coordinator epoch; transactions
found in PrepareCommit/PrepareAbort get their markers written again), and for every handler
outcome:

1. appends its records, one batch per ``__transaction_state`` partition, and replays them
   (``append_failed`` and the error re-raised when the append fails: nothing changed);
2. writes the outcome's markers through the injected ``MarkerWriter`` (WriteTxnMarkers; in one
   broker a local call into the partition leaders), retrying the partitions that answered a
   retriable error every ``marker_retry_backoff_ms``; once every partition is done,
   ``complete_markers`` and its CompleteCommit/CompleteAbort record (1 again);
3. returns the response.

Markers are written before the EndTxn answer when they can be (one broker: always), so the
producer's next AddPartitionsToTxn does not meet CONCURRENT_TRANSACTIONS. Timers: ``tick``
(transactions past ``transaction.timeout.ms`` are fenced and aborted) every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, ``expire_transactional_ids``
every ``transaction.remove.expired.transaction.cleanup.interval.ms``. Producer ids come from
an injected async allocator (the broker's producer-id blocks); one id is kept in reserve so
the pure handlers can take it synchronously.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from odradek.clock import Clock
from odradek.coordinator.records import build_batch
from odradek.coordinator.transaction.manager import (
    MarkerWrite,
    Outcome,
    TransactionStateManager,
    TxnMarker,
)
from odradek.coordinator.transaction.records import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogRecord,
    encode_record,
    iter_pairs,
)
from odradek.coordinator.transaction.state import Errors, TransactionConfig
from odradek.coordinator.writer import PartitionWriter
from odradek.storage.scan import scan_to_end

__all__ = [
    "MarkerWriter",
    "TransactionCoordinator",
    "TransactionCoordinatorConfig",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

MarkerWriter = Callable[[Sequence[TxnMarker]], Mapping[tuple[str, int], int]]
"""Writes COMMIT/ABORT markers to their partitions; the Kafka error code per (topic,
partition) (0: written)."""

# Errors after which a marker is not retried: written (0), the partition is gone (3), a newer
# coordinator or producer epoch already wrote one (52, 47: Kafka stops sending as well).
_MARKER_DONE = frozenset({0, 3, 47, 52})


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    """The coordinator's settings (broker config keys in the comments)."""

    transaction: TransactionConfig = field(default_factory=TransactionConfig)
    state_log_segment_bytes: int = 104857600  # transaction.state.log.segment.bytes
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    # ^ transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # ^ transaction.remove.expired.transaction.cleanup.interval.ms
    marker_retry_backoff_ms: int = 100


class TransactionCoordinator:
    """The transaction coordinator of one broker. See the module docstring."""

    def __init__(
        self,
        writer: PartitionWriter,
        settings: TransactionCoordinatorConfig,
        clock: Clock,
        allocate_producer_id: Callable[[], Awaitable[int]],
        write_markers: MarkerWriter,
    ) -> None:
        self.writer = writer
        self.settings = settings
        self.clock = clock
        self._allocate = allocate_producer_id
        self._write_markers = write_markers
        self._spare_ids: list[int] = []
        self.manager = TransactionStateManager(settings.transaction, self._take_producer_id)
        self.num_partitions = settings.transaction.transaction_state_log_num_partitions
        self._topic_ready = False
        self._running = False
        self._tasks: list[asyncio.Task[None]] = []
        self._retries: set[asyncio.Task[None]] = set()
        self._loaded_event: asyncio.Event | None = None
        self.markers_written = 0

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._loaded_event = asyncio.Event()
        self._running = True
        count = self.writer.partition_count(TRANSACTION_STATE_TOPIC)
        loop = asyncio.get_running_loop()
        if count is not None:
            self.num_partitions = count
            self._topic_ready = True
            for p in range(count):
                self.manager.begin_loading(p, self.writer.leader_epoch(TRANSACTION_STATE_TOPIC, p))
            self._tasks.append(loop.create_task(self._load_all(), name="txn-coordinator-load"))
        else:
            self._become_coordinator_of_all()
            self._loaded_event.set()
        self._tasks.append(loop.create_task(self._timer_loop(), name="txn-coordinator-timers"))

    def _become_coordinator_of_all(self) -> None:
        for p in range(self.num_partitions):
            self.manager.load_partition(p, self.writer.leader_epoch(TRANSACTION_STATE_TOPIC, p), [])

    async def stop(self) -> None:
        self._running = False
        for task in [*self._tasks, *self._retries]:
            task.cancel()
        for task in [*self._tasks, *self._retries]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self._retries.clear()

    async def wait_loaded(self) -> None:
        assert self._loaded_event is not None
        await self._loaded_event.wait()

    def _ensure_topic(self) -> None:
        if self._topic_ready:
            return
        count = self.writer.partition_count(TRANSACTION_STATE_TOPIC)
        if count is None:
            log.info("creating %s with %d partitions", TRANSACTION_STATE_TOPIC, self.num_partitions)
            count = self.writer.ensure_internal_topic(
                TRANSACTION_STATE_TOPIC,
                self.num_partitions,
                {
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.settings.state_log_segment_bytes),
                },
            )
        if count != self.num_partitions:
            raise RuntimeError(f"{TRANSACTION_STATE_TOPIC} appeared with {count} partitions")
        self._topic_ready = True

    def coordinator_for(self, transactional_id: str) -> tuple[Errors, int, str, int]:
        """(error, node id, host, port) of the coordinator of ``transactional_id``: the leader
        of its ``__transaction_state`` partition."""
        if not self._running:
            return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        partition = self.manager.partition_for(transactional_id)
        leader = self.writer.leader(TRANSACTION_STATE_TOPIC, partition)
        if leader is None:
            return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        error = Errors.NONE
        if partition in self.manager.loading:
            error = Errors.COORDINATOR_LOAD_IN_PROGRESS
        node_id, host, port = leader
        return error, node_id, host, port

    # -- loading ------------------------------------------------------------------------------

    async def _load_all(self) -> None:
        assert self._loaded_event is not None
        try:
            writes: list[MarkerWrite] = []
            for p in range(self.num_partitions):
                plog = self.writer.log(TRANSACTION_STATE_TOPIC, p)
                count = 0
                if plog is not None:
                    for batches in scan_to_end(plog, plog.log_start_offset):
                        for batch in batches:
                            if batch.is_control:
                                continue
                            pairs = ((r.key, r.value) for r in batch.records())
                            for record in iter_pairs(pairs):
                                self.manager.replay(record, loading=True)
                                count += 1
                        await asyncio.sleep(0)
                writes += self.manager.finish_loading(p)
                if count:
                    log.info("loaded %d records from %s-%d", count, TRANSACTION_STATE_TOPIC, p)
            for write in writes:
                log.info(
                    "completing transaction %r (%s) found prepared at load",
                    write.transactional_id,
                    write.result.name,
                )
                await self._send_markers(write)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s failed", TRANSACTION_STATE_TOPIC)
        finally:
            self._loaded_event.set()

    # -- running handlers ---------------------------------------------------------------------

    def _take_producer_id(self) -> int:
        if not self._spare_ids:
            raise RuntimeError("no producer id reserved")
        return self._spare_ids.pop()

    async def execute(
        self,
        handler: Callable[[TransactionStateManager, int], Outcome[T]],
        *,
        creates: bool = False,
    ) -> T:
        """Run a pure handler on the manager (``creates``: it may allocate a producer id and
        create ``__transaction_state``), persist its records, write its markers, and return
        its response."""
        if creates:
            if not self._spare_ids:
                self._spare_ids.append(await self._allocate())
            if self._running:
                self._ensure_topic()
        outcome = handler(self.manager, self.clock.now_ms())
        self._persist(outcome.records)
        if outcome.markers is not None:
            await self._send_markers(outcome.markers)
        assert outcome.response is not None
        return outcome.response

    def _persist(self, records: Sequence[TransactionLogRecord]) -> None:
        """Append ``records`` (one batch per partition), then replay them."""
        if not records:
            return
        now = self.clock.now_ms()
        version = self.settings.transaction.value_version
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            by_partition.setdefault(self.manager.partition_for(r.transactional_id), []).append(
                encode_record(r, version)
            )
        try:
            for p, pairs in by_partition.items():
                self.writer.append(TRANSACTION_STATE_TOPIC, p, build_batch(pairs, now))
        except BaseException:
            self.manager.append_failed(records)
            raise
        for r in records:
            self.manager.replay(r)

    async def _send_markers(self, write: MarkerWrite) -> None:
        """Write ``write``'s markers now; the partitions that failed retriably are retried in
        the background; once all are written the transaction completes."""
        remaining = self._write_once(write, write.markers())
        if not remaining:
            self._complete(write)
            return
        task = asyncio.get_running_loop().create_task(self._retry_markers(write, remaining))
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    def _write_once(self, write: MarkerWrite, markers: list[TxnMarker]) -> list[TxnMarker]:
        if not markers:
            return []
        results = self._write_markers(markers)
        self.markers_written += len(markers)
        failed = [m for m in markers if results.get((m.topic, m.partition), 0) not in _MARKER_DONE]
        for m in failed:
            log.debug(
                "marker for %s-%d of %r: error %s, retrying",
                m.topic,
                m.partition,
                write.transactional_id,
                results.get((m.topic, m.partition)),
            )
        return failed

    async def _retry_markers(self, write: MarkerWrite, remaining: list[TxnMarker]) -> None:
        while remaining and self._running:
            await asyncio.sleep(self.settings.marker_retry_backoff_ms / 1000)
            try:
                remaining = self._write_once(write, remaining)
            except Exception:
                log.exception("writing markers of %r failed", write.transactional_id)
        if not remaining:
            self._complete(write)

    def _complete(self, write: MarkerWrite) -> None:
        out = self.manager.complete_markers(
            write.transactional_id,
            write.producer_id,
            write.producer_epoch,
            write.coordinator_epoch,
            self.clock.now_ms(),
        )
        if out.response is not Errors.NONE:
            # a new coordinator epoch owns it, or the transaction moved on: nothing to do
            log.info("transaction %r not completed here: %s", write.transactional_id, out.response)
            return
        self._persist(out.records)

    # -- timers --------------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Fence and abort every transaction past its timeout; how many."""
        outcomes = self.manager.tick(self.clock.now_ms())
        for out in outcomes:
            try:
                self._persist(out.records)
            except Exception:
                log.exception("aborting a timed-out transaction failed")
                continue
            if out.markers is not None:
                log.info(
                    "aborting transaction %r: past its transaction.timeout.ms",
                    out.markers.transactional_id,
                )
                await self._send_markers(out.markers)
        return len(outcomes)

    async def expire_transactional_ids(self) -> int:
        records = self.manager.expire_transactional_ids(self.clock.now_ms())
        self._persist(records)
        return len(records)

    async def _timer_loop(self) -> None:
        settings = self.settings
        abort_every = settings.abort_timed_out_transaction_cleanup_interval_ms / 1000
        expire_every = settings.remove_expired_transaction_cleanup_interval_ms / 1000
        next_expire = self.clock.monotonic() + expire_every
        await self.wait_loaded()
        while True:
            await asyncio.sleep(abort_every)
            try:
                await self.abort_timed_out_transactions()
                if self.clock.monotonic() >= next_expire:
                    next_expire = self.clock.monotonic() + expire_every
                    await self.expire_transactional_ids()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator timers failed")
