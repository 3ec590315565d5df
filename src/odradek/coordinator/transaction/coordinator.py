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

In a cluster (``follow_partition_leadership``) it serves only the transactional ids whose
``__transaction_state`` partition this broker leads: ``on_leadership_change`` loads a partition
when LeaderAndIsr makes this broker its leader (COORDINATOR_LOAD_IN_PROGRESS meanwhile; the
leader epoch becomes the coordinator epoch; transactions found in PrepareCommit/PrepareAbort
get their markers written, as Kafka's new coordinator completes them after a failover) and
unloads it when leadership goes (NOT_COORDINATOR). Records are then acknowledged only once the
partition's ISR has them (acks=all, ``PartitionWriter.wait_replicated``); a record that is not
replicated in time leaves the state unchanged and the request fails with
``TransactionLogWriteError`` (COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, as Kafka answers
an append error). An append that fails (not the leader, a storage error) is NOT_COORDINATOR
in both modes, as in Kafka.

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
    "TransactionLogWriteError",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

MarkerWriter = Callable[[Sequence[TxnMarker]], Awaitable[Mapping[tuple[str, int], int]]]
"""Writes COMMIT/ABORT markers to their partitions (in a cluster: WriteTxnMarkers to each
partition's leader); the Kafka error code per (topic, partition) (0: written)."""


class TransactionLogWriteError(Exception):
    """Records of ``__transaction_state`` could not be written (or replicated) in time: the
    state did not change; the client should retry (``error`` is what Kafka answers)."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


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
        # In a cluster (follow_partition_leadership): only the led partitions are served.
        self._partitioned = False
        self._loads: dict[int, asyncio.Task[None]] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._loaded_event = asyncio.Event()
        self._running = True
        count = self.writer.partition_count(TRANSACTION_STATE_TOPIC)
        loop = asyncio.get_running_loop()
        if self._partitioned:
            # nothing is served until LeaderAndIsr makes this broker lead a partition
            self._topic_ready = count is not None
            self._loaded_event.set()
        elif count is not None:
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
        loads = list(self._loads.values())
        self._loads.clear()
        for task in [*self._tasks, *self._retries, *loads]:
            task.cancel()
        for task in [*self._tasks, *self._retries, *loads]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self._retries.clear()

    async def wait_loaded(self) -> None:
        assert self._loaded_event is not None
        await self._loaded_event.wait()

    # -- in a cluster: follow the leadership of __transaction_state ----------------------------

    def follow_partition_leadership(self) -> None:
        """Serve only the ``__transaction_state`` partitions this broker leads (call before
        ``start``); the topic is then created by FindCoordinator, through the cluster."""
        self._partitioned = True

    def on_leadership_change(
        self, became_leader: Mapping[int, int], became_follower: Sequence[int]
    ) -> None:
        """``__transaction_state`` partitions that became led here ({partition: leader epoch},
        the epoch being the coordinator epoch), or stopped being led (Kafka's onElection /
        onResignation). A partition led again with a new epoch is loaded again."""
        for p in became_follower:
            self._unload_partition(p)
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        for p, epoch in became_leader.items():
            self._unload_partition(p)
            self.manager.begin_loading(p, epoch)
            self._loads[p] = loop.create_task(
                self._load_led_partition(p, epoch), name=f"txn-coordinator-load-{p}"
            )

    async def wait_partitions_loaded(self) -> None:
        """Wait until the partitions that became led here so far are loaded (tests)."""
        pending = list(self._loads.values())
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def _unload_partition(self, p: int) -> None:
        task = self._loads.pop(p, None)
        if task is not None:
            task.cancel()
        self.manager.unload_partition(p)

    async def _load_led_partition(self, p: int, epoch: int) -> None:
        try:
            count = await self._replay_log(p)
            writes = self.manager.finish_loading(p)
            log.info(
                "loaded %s-%d (coordinator epoch %d): %d records, %d transactions to complete",
                TRANSACTION_STATE_TOPIC,
                p,
                epoch,
                count,
                len(writes),
            )
            await self._complete_prepared(writes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, p)
        finally:
            if self._loads.get(p) is asyncio.current_task():
                del self._loads[p]

    async def _complete_prepared(self, writes: Sequence[MarkerWrite]) -> None:
        """Write the markers of transactions found in PrepareCommit/PrepareAbort at load."""
        for write in writes:
            log.info(
                "completing transaction %r (%s) found prepared at load",
                write.transactional_id,
                write.result.name,
            )
            await self._send_markers(write)

    def _ensure_topic(self) -> None:
        if self._topic_ready or self._partitioned:
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
        if self._partitioned and self.writer.partition_count(TRANSACTION_STATE_TOPIC) is None:
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
                count = await self._replay_log(p)
                writes += self.manager.finish_loading(p)
                if count:
                    log.info("loaded %d records from %s-%d", count, TRANSACTION_STATE_TOPIC, p)
            await self._complete_prepared(writes)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s failed", TRANSACTION_STATE_TOPIC)
        finally:
            self._loaded_event.set()

    async def _replay_log(self, p: int) -> int:
        """Replay partition ``p`` of ``__transaction_state`` (begun with ``begin_loading``) from
        its log start to its end; how many records."""
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
        return count

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
        on_write_error: Callable[[T, Errors], T] | None = None,
    ) -> T:
        """Run a pure handler on the manager (``creates``: it may allocate a producer id and
        create ``__transaction_state``), persist its records, write its markers, and return
        its response. When the records cannot be written, ``on_write_error(response, error)``
        answers (without it ``TransactionLogWriteError`` is raised)."""
        if creates:
            if not self._spare_ids:
                self._spare_ids.append(await self._allocate())
            if self._running:
                self._ensure_topic()
        outcome = handler(self.manager, self.clock.now_ms())
        assert outcome.response is not None
        try:
            await self._persist(outcome.records)
        except TransactionLogWriteError as exc:
            log.warning("%s", exc)
            if on_write_error is None:
                raise
            return on_write_error(outcome.response, exc.error)
        if outcome.markers is not None:
            # the markers are the coordinator's from here on: a request cancelled now (its
            # client disconnected) must not stop them, or the transaction stays prepared
            task = asyncio.get_running_loop().create_task(self._send_markers(outcome.markers))
            self._retries.add(task)
            task.add_done_callback(self._retries.discard)
            await asyncio.shield(task)
        return outcome.response

    async def _persist(self, records: Sequence[TransactionLogRecord]) -> None:
        """Append ``records`` (one batch per partition), in a cluster wait until the ISR has
        them, then replay them. Raises (and nothing changes) when that fails."""
        if not records:
            return
        now = self.clock.now_ms()
        version = self.settings.transaction.value_version
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            by_partition.setdefault(self.manager.partition_for(r.transactional_id), []).append(
                encode_record(r, version)
            )
        epochs = {p: self.manager.coordinator_epochs.get(p) for p in by_partition}
        try:
            for p, pairs in by_partition.items():
                try:
                    self.writer.append(TRANSACTION_STATE_TOPIC, p, build_batch(pairs, now))
                except Exception as exc:  # not the leader, or storage: Kafka's NOT_COORDINATOR
                    raise TransactionLogWriteError(
                        Errors.NOT_COORDINATOR, f"{TRANSACTION_STATE_TOPIC}-{p}: {exc}"
                    ) from exc
            if self._partitioned:
                await self._wait_replicated(list(by_partition), epochs)
        except BaseException:
            self.manager.append_failed(records)
            raise
        for r in records:
            self.manager.replay(r)

    async def _wait_replicated(
        self, partitions: list[int], epochs: Mapping[int, int | None]
    ) -> None:
        """acks=all: wait until each partition's ISR has everything appended so far."""
        for p in partitions:
            plog = self.writer.log(TRANSACTION_STATE_TOPIC, p)
            end = plog.log_end_offset if plog is not None else 0
            if not await self.writer.wait_replicated(TRANSACTION_STATE_TOPIC, p, end):
                raise TransactionLogWriteError(
                    Errors.COORDINATOR_NOT_AVAILABLE,
                    f"{TRANSACTION_STATE_TOPIC}-{p}: not replicated in time",
                )
            if self.manager.coordinator_epochs.get(p) != epochs[p]:
                raise TransactionLogWriteError(
                    Errors.NOT_COORDINATOR,
                    f"{TRANSACTION_STATE_TOPIC}-{p}: leadership moved during the append",
                )

    async def _send_markers(self, write: MarkerWrite) -> None:
        """Write ``write``'s markers now; the partitions that failed retriably are retried in
        the background; once all are written the transaction completes."""
        remaining = await self._write_once(write, write.markers())
        if not remaining:
            await self._complete(write)
            return
        task = asyncio.get_running_loop().create_task(self._retry_markers(write, remaining))
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    async def _write_once(self, write: MarkerWrite, markers: list[TxnMarker]) -> list[TxnMarker]:
        if not markers:
            return []
        results = await self._write_markers(markers)
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
        while remaining and self._running and self._still_coordinator(write):
            await asyncio.sleep(self.settings.marker_retry_backoff_ms / 1000)
            try:
                remaining = await self._write_once(write, remaining)
            except Exception:
                log.exception("writing markers of %r failed", write.transactional_id)
        if not remaining:
            await self._complete(write)

    def _still_coordinator(self, write: MarkerWrite) -> bool:
        """Whether this coordinator still owns ``write`` (the same coordinator epoch)."""
        p = self.manager.partition_for(write.transactional_id)
        return self.manager.coordinator_epochs.get(p) == write.coordinator_epoch

    async def _complete(self, write: MarkerWrite) -> None:
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
        try:
            await self._persist(out.records)
        except TransactionLogWriteError as exc:
            # it stays prepared; the partition's next leader completes it when it loads
            log.warning("completing transaction %r failed: %s", write.transactional_id, exc)

    # -- timers --------------------------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Fence and abort every transaction past its timeout; how many."""
        outcomes = self.manager.tick(self.clock.now_ms())
        for out in outcomes:
            try:
                await self._persist(out.records)
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
        await self._persist(records)
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
