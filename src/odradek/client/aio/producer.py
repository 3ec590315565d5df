"""AsyncProducer: the asyncio producer core, Kafka's ``KafkaProducer`` over four parts.

* ``_accumulator``: ``RecordAccumulator``, per-partition batch queues and the partitioner;
  thread-safe, so the synchronous facade appends from the caller's thread without a hop to the
  event loop (``_bulk`` prepares ``send_batch``'s columns for it).
* ``_sender``: ``Sender``, the task that drains ready batches into Produce requests, one
  write per request in drain order, and completes the batches with the answers.
* ``_idempotence``: producer id, epoch and per-partition sequences; epoch bumps (KIP-360).
* ``_txn``: the transaction state machine and the coordinator requests (KIP-98, KIP-447).

Idempotence is on by default: InitProducerId at ``start()``. With ``transactional.id`` there
is no producer id at start — ``init_transactions()`` gets it from the transaction coordinator;
``send`` only inside ``begin_transaction()``; a failed batch makes the transaction abortable;
sequence trouble (which the idempotent producer repairs with an epoch bump) also does, and the
bump happens after ``abort_transaction()`` (a new InitProducerId); PRODUCER_FENCED /
INVALID_PRODUCER_EPOCH is fatal.

``delivery.timeout.ms`` bounds every batch: a queued one expires at its deadline, a request
never waits past the earliest deadline of its batches. ``flush()``/``close()`` without a
timeout return within delivery.timeout.ms + request.timeout.ms and fail what is left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import _bulk
from .._cluster import Cluster
from .._config import PRODUCER, parse_config
from .._futures import RecordFuture
from ..errors import (
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    TransactionAbortableError,
)
from ..types import RecordMetadata
from . import _txn
from ._accumulator import RecordAccumulator
from ._idempotence import IdempotenceState, init_producer_id
from ._sender import Sender
from ._txn import ConsumerGroupMetadata, TransactionManager, TxnRequests, TxnState

__all__ = ["AsyncProducer"]

log = logging.getLogger("odradek.client.producer")


class AsyncProducer:
    """Asyncio Kafka producer. ``config`` uses the Java producer's keys.

    ``await producer.start()`` (or ``async with``), then ``fut = await producer.send(...)`` and
    ``metadata = await fut`` (or ``await producer.send_and_wait(...)``).
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = parse_config(config, PRODUCER, "producer")
        c = self.config
        self._cluster = Cluster(c)
        self._delivery_timeout = c["delivery.timeout.ms"] / 1000
        self._request_timeout = c["request.timeout.ms"] / 1000
        self._max_block = c["max.block.ms"] / 1000
        tid = c["transactional.id"]
        self._txn = None if tid is None else TransactionManager(tid, c["transaction.timeout.ms"])
        self._txn_requests = None if tid is None else TxnRequests(self._cluster, tid, c["retry.backoff.ms"] / 1000)
        self._idem = IdempotenceState(c["enable.idempotence"], self._txn)
        self._acc = RecordAccumulator(c, lambda: None, None if self._txn is None else self._txn.check_send)
        self._sender = Sender(c, self._cluster, self._acc, self._idem, self._txn, self._txn_requests)
        self._acc.wake = self._sender.wake
        # the accumulator's appends, called directly by send() and the synchronous facade
        self._append = self._acc.append
        self._append_rows = self._acc.append_rows
        self._prepare_columns = self._acc.prepare_columns
        self._slices = self._acc.slices
        self._run_task: asyncio.Task[None] | None = None
        self._closed = False
        self._started = False

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._sender.start(asyncio.get_running_loop())
        await self._cluster.refresh([])
        if self._idem.enabled and self._txn is None:
            pid, epoch = await init_producer_id(self._cluster, self._max_block, self.config["retry.backoff.ms"] / 1000)
            self._idem.set_producer_id(pid, epoch)
        self._run_task = asyncio.ensure_future(self._sender.run())
        self._started = True

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered, then close connections. Waits up to ``timeout`` seconds,
        or, without one, up to delivery.timeout.ms + request.timeout.ms; records still not
        delivered then fail with ProducerClosedError (and a warning says how many)."""
        if self._closed:
            return
        sender = self._sender
        try:
            if self._txn is not None and self._txn.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
                sender.fail_queued(ProducerClosedError("producer closed: the transaction of this record cannot complete"))
            if self._started:
                await self.flush(timeout)
        except (TimeoutError, KafkaError) as exc:
            log.warning("producer close: %s", exc)
        finally:
            self._closed = self._acc.closed = sender.closed = True
            if self._run_task is not None:
                self._run_task.cancel()
                try:
                    await self._run_task
                except (asyncio.CancelledError, Exception):
                    pass
            sender.cancel_tasks()
            n = sender.fail_all(ProducerClosedError("producer closed before this record was delivered"))
            if n:
                log.warning("producer closed with %d batches not delivered: they are failed", n)
            await self._cluster.close()

    def partitions_for(self, topic: str) -> list[int] | None:
        parts = self._cluster.partitions_for(topic)
        return None if parts is None else [p.partition for p in parts]

    async def refresh_metadata(self, topics: Iterable[str]) -> None:
        """Fetch metadata for ``topics`` now (e.g. after their partitions were added), so that
        ``partitions_for`` and explicit partitions see the new count."""
        await self._cluster.refresh(list(topics))

    async def _ensure_topic(self, topic: str) -> int:
        parts = self._cluster.partitions_for(topic)
        if parts is None:
            await self._cluster.wait_for_topics([topic], self._max_block, auto_create=True)
            parts = self._cluster.partitions_for(topic)
            assert parts is not None
        return len(parts)

    # -- sending ----------------------------------------------------------------------------
    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        *,
        on_delivery: Callable[[RecordMetadata | None, BaseException | None], Any] | None = None,
    ) -> RecordFuture:
        """Buffer one record; return the future of its ``RecordMetadata`` (``await fut``).

        ``headers``: list of (str, bytes) or a dict. ``timestamp`` in ms (default: now).
        Waits (up to ``max.block.ms``) for metadata of a new topic and for buffer space.
        """
        if not self._started:
            await self.start()
        parts = self._cluster.partitions_for(topic)
        n = len(parts) if parts else await self._ensure_topic(topic)
        fut = self._append(topic, value, key, headers, partition, timestamp, n, block=False)
        if fut is None:
            deadline = time.monotonic() + self._max_block
            while fut is None:
                if time.monotonic() > deadline:
                    raise KafkaTimeoutError("buffer.memory is full: not freed within max.block.ms")
                await asyncio.sleep(0.001)
                fut = self._append(topic, value, key, headers, partition, timestamp, n, block=False)
        if on_delivery is not None:
            fut.add_callback(on_delivery)
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
                            partition: int | None = None, timestamp: int | None = None) -> RecordMetadata:
        fut = await self.send(topic, value, key, headers, partition, timestamp)
        return await fut

    # -- columnar bulk append (see odradek.client._bulk) -------------------------------------
    async def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        partitions: Any = None,
        headers: Any = None,
        timestamps: Any = None,
    ) -> _bulk.BulkFuture:
        """Buffer whole columns of records (see ``odradek.client._bulk``); one ``BulkFuture``.

        Same placement, batches and bytes as ``send`` per row. Waits (up to ``max.block.ms``) for
        metadata of a new topic and for buffer space; columns larger than a quarter of
        ``buffer.memory`` are appended in slices.
        """
        if not self._started:
            await self.start()
        parts = self._cluster.partitions_for(topic)
        n = len(parts) if parts else await self._ensure_topic(topic)
        recs, sizes, ps, nk, tss = self._prepare_columns(topic, values, keys, partitions, headers, timestamps, n)
        segments: list[_bulk.Segment] = []
        for lo, hi in self._slices(sizes):
            seg = self._append_rows(topic, recs, sizes, ps, nk, lo, hi, n, block=False)
            if seg is None:
                deadline = time.monotonic() + self._max_block
                while seg is None:
                    if time.monotonic() > deadline:
                        raise KafkaTimeoutError("buffer.memory is full: not freed within max.block.ms")
                    await asyncio.sleep(0.001)
                    seg = self._append_rows(topic, recs, sizes, ps, nk, lo, hi, n, block=False)
            segments.extend(seg)
        return _bulk.BulkFuture(topic, len(recs), segments, tss)

    def _give_up_after(self) -> float:
        """How long flush()/close() without a timeout wait: delivery.timeout.ms bounds every
        batch in a queue, request.timeout.ms one in flight (plus a second of slack)."""
        return float(self._delivery_timeout + self._request_timeout + 1.0)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged (or failed).

        ``timeout`` None: wait at most delivery.timeout.ms + request.timeout.ms (every batch is
        completed by then); whatever is still not done then is failed, and KafkaTimeoutError
        says how many batches that was. A given ``timeout`` only stops the waiting."""
        pending = self._acc.pending_results()
        if not pending:
            return
        self._sender.flushing += 1
        try:
            self._sender.wake()
            limit = self._give_up_after() if timeout is None else timeout
            deadline = time.monotonic() + limit
            loop = asyncio.get_running_loop()
            for r in pending:
                if r.done:
                    continue
                af = loop.create_future()
                if r._async_waiters is None:
                    r._async_waiters = []
                r._async_waiters.append((loop, af))
                if r.done:
                    continue
                try:
                    await asyncio.wait_for(af, max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    if timeout is not None:
                        raise KafkaTimeoutError(f"flush timed out after {timeout:g} s") from None
                    n = self._sender.fail_pending(pending, KafkaTimeoutError(
                        f"not delivered within delivery.timeout.ms + request.timeout.ms ({limit:g} s): failed by flush()"))
                    raise KafkaTimeoutError(
                        f"flush gave up after {limit:g} s (delivery.timeout.ms + request.timeout.ms): "
                        f"{n} batches were not delivered and are failed") from None
        finally:
            self._sender.flushing -= 1

    # -- transactions (see _txn) ----------------------------------------------------------------
    def _txn_manager(self) -> TransactionManager:
        if self._txn is None:
            raise KafkaError("this producer has no transactional.id: transactions are not available")
        return self._txn

    def _txn_deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self._max_block if timeout is None else timeout)

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its transaction coordinator (InitProducerId): fences
        every older producer instance with the same id and completes (aborts) its open transaction.
        Call once, before the first ``begin_transaction()``; on KafkaTimeoutError it may be called again."""
        txn = self._txn_manager()
        assert self._txn_requests is not None
        if not self._started:
            await self.start()
        txn.transition(TxnState.INITIALIZING)
        try:
            pid, epoch = await self._txn_requests.init_producer_id(txn.timeout_ms, self._txn_deadline(timeout))
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            raise self._sender.fatal(exc) from None
        self._idem.set_producer_id(pid, epoch)  # sequences start at 0 under the new epoch
        txn.epoch_bump_needed = False
        txn.transition(TxnState.READY)

    def producer_id_and_epoch(self) -> tuple[int, int]:
        """(producer id, epoch); (-1, -1) before InitProducerId."""
        return self._idem.producer_id, self._idem.epoch

    def begin_transaction(self) -> None:
        """Start a transaction (local: the coordinator hears of it with the first partition)."""
        self._txn_manager().transition(TxnState.IN_TRANSACTION)

    async def send_offsets_to_transaction(
        self, offsets: Any, group_metadata: ConsumerGroupMetadata | str | Any, timeout: float | None = None
    ) -> None:
        """Commit consumer offsets as part of the transaction (AddOffsetsToTxn, then
        TxnOffsetCommit to the group's coordinator): they become the group's committed offsets
        only if the transaction commits. ``offsets``: {TopicPartition: next offset to read (int
        or OffsetAndMetadata)} or a list of objects with ``topic``, ``partition``, ``offset``
        (confluent-kafka's TopicPartition); ``group_metadata``: ``consumer.consumergroup_metadata()``
        or a group id."""
        txn = self._txn_manager()
        assert self._txn_requests is not None
        txn.check_send()
        group = _txn.group_metadata(group_metadata)
        md = _txn.offsets_map(offsets)
        deadline = self._txn_deadline(timeout)
        try:
            await self._txn_requests.add_offsets(self._idem.producer_id, self._idem.epoch, group.group_id, deadline)
            txn.offsets_added = True
            await self._txn_requests.txn_offset_commit(self._idem.producer_id, self._idem.epoch, group, md, deadline)
        except (ProducerFencedError, KafkaTimeoutError) as exc:
            if isinstance(exc, ProducerFencedError):
                raise self._sender.fatal(exc) from None
            raise
        except KafkaError as exc:
            err = TransactionAbortableError(f"send_offsets_to_transaction failed: {exc}", exc.code)
            txn.fail_abortable(err)
            raise err from exc

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records, then commit it (EndTxn). Raises
        TransactionAbortableError if a record of it failed (then ``abort_transaction()``),
        ProducerFencedError if fenced, KafkaTimeoutError if not done in time (call it again)."""
        txn = self._txn_manager()
        assert self._txn_requests is not None
        txn.transition(TxnState.COMMITTING_TRANSACTION)
        deadline = self._txn_deadline(timeout)
        await self.flush(max(0.0, deadline - time.monotonic()))
        if txn.state is not TxnState.COMMITTING_TRANSACTION:  # a batch failed meanwhile
            txn.transition(TxnState.COMMITTING_TRANSACTION)  # raises the abortable / fatal error
        if txn.anything_to_end:
            try:
                await self._txn_requests.end_txn(self._idem.producer_id, self._idem.epoch, True, deadline)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                raise self._sender.fatal(exc) from None
        txn.transition(TxnState.READY)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail (TransactionAbortableError),
        records sent are discarded by read_committed consumers (EndTxn abort)."""
        txn = self._txn_manager()
        assert self._txn_requests is not None
        txn.transition(TxnState.ABORTING_TRANSACTION)
        deadline = self._txn_deadline(timeout)
        aborted = TransactionAbortableError("the transaction was aborted before this record was sent")
        while True:  # fail what is queued; wait for what is in flight (it may be re-queued)
            self._sender.fail_queued(aborted)
            if not self._acc.has_incomplete():
                break
            if time.monotonic() > deadline:
                raise KafkaTimeoutError("abort_transaction timed out waiting for in-flight requests")
            await asyncio.sleep(0.005)
        if txn.anything_to_end:
            try:
                await self._txn_requests.end_txn(self._idem.producer_id, self._idem.epoch, False, deadline)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                raise self._sender.fatal(exc) from None
        if txn.epoch_bump_needed:  # sequences broke during the transaction: a new epoch
            try:
                pid, epoch = await self._txn_requests.init_producer_id(txn.timeout_ms, deadline)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                raise self._sender.fatal(exc) from None
            self._idem.set_producer_id(pid, epoch)
            txn.epoch_bump_needed = False
        txn.transition(TxnState.READY)
