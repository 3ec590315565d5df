"""The producer's sender: drains the accumulator into Produce requests (Kafka's ``Sender``).

One task (``run``) drains batches that are full (``batch.size``), old enough (``linger.ms``) or
flushed, groups them per leader into Produce requests (at most one batch per partition per
request, at most ``max.in.flight.requests.per.connection`` requests in flight per broker and
batches in flight per partition) and writes each request at once, on an open connection, so
requests reach the broker in drain order; tasks only await the responses and complete the
batches' futures.

Idempotence (``_idempotence``): the first batch of a partition under an epoch goes alone (a
broker with no state for the producer takes any first sequence). A batch failing with a
retriable error goes back to the head of its queue in drain order and is re-sent, with the same
sequence, once the partition has nothing in flight. A batch that failed after getting a
sequence (expired, fatal error) leaves a hole, which bumps the epoch. A reset waits until
nothing is in flight, then restarts every partition at sequence 0; queued batches are
re-sequenced, except those an earlier attempt of which may have been written (the request got
no answer): they fail with an error saying so (re-sending could write them twice).

Transactions (``_txn``): the sender holds back a partition's batches until AddPartitionsToTxn
added it to the transaction, and marks batches transactional; a failed batch makes the
transaction abortable; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH is fatal.

``delivery.timeout.ms`` bounds every batch: a queued one expires at its deadline, a request
never waits past the earliest deadline of its batches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any

from .. import _protocol as proto
from .. import _records
from .._cluster import Cluster
from .._futures import BatchResult
from .._signal import Signal
from ..errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
)
from ._accumulator import ProducerBatch, RecordAccumulator
from ._idempotence import (
    DUPLICATE_SEQUENCE,
    PRODUCER_STATE_ERRORS,
    RETRIABLE,
    IdempotenceState,
    init_producer_id,
)
from ._txn import TransactionManager, TxnRequests, TxnState, error_for

try:  # compiled twin of the batch encoder
    from .. import _speedups  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

__all__ = ["Sender"]

log = logging.getLogger("odradek.client.producer")

_STALE_METADATA = frozenset({3, 5, 6, 74, 75})
_REQUEST_TIMED_OUT = 7
_PRODUCER_FENCED = 90
_TXN_FATAL = frozenset({47, _PRODUCER_FENCED, 53})  # INVALID_PRODUCER_EPOCH, ..., TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _ms(v: Any) -> int:
    """A kio datetime/int/None timestamp as epoch milliseconds (-1 when absent)."""
    if v is None:
        return -1
    if isinstance(v, int):
        return v
    return int(v.timestamp() * 1000)


class Sender:
    """Drains ``acc`` to the partitions' leaders and completes the batches with the answers.

    ``start(loop)`` binds it to the producer's event loop; ``wake()`` (any thread) makes ``run``
    look again; ``flushing`` > 0 sends lingering batches at once; ``closed`` ends ``run``."""

    def __init__(
        self,
        config: dict[str, Any],
        cluster: Cluster,
        acc: RecordAccumulator,
        idem: IdempotenceState,
        txn: TransactionManager | None,
        txn_requests: TxnRequests | None,
    ) -> None:
        c = config
        self.cluster = cluster
        self.acc = acc
        self.idem = idem
        self.txn = txn
        self.txn_requests = txn_requests
        self.acks: int = c["acks"]
        self.linger: float = c["linger.ms"] / 1000
        self.codec = _records.CODECS[c["compression.type"]]
        self.max_in_flight: int = c["max.in.flight.requests.per.connection"]
        self.delivery_timeout: float = c["delivery.timeout.ms"] / 1000
        self.max_block: float = c["max.block.ms"] / 1000
        self.max_request_size: int = c["max.request.size"]
        self.request_timeout: float = c["request.timeout.ms"] / 1000
        self.request_timeout_ms: int = c["request.timeout.ms"]
        self.backoff: float = c["retry.backoff.ms"] / 1000
        self.in_flight_node: dict[int, int] = {}
        self.in_flight_total = 0
        self.drained = 0
        self.connecting: set[int] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.wakeup: Signal | None = None
        self.flushing = 0
        self.closed = False
        self.pending_wakeup = False
        self.tasks: set[asyncio.Task[Any]] = set()
        self.metadata_needed = False
        self.refreshing = False
        self.adding = False  # an AddPartitionsToTxn is in flight

    # -- the loop ---------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.wakeup = Signal()

    def wake(self) -> None:
        """Make ``run`` look at the queues again (from any thread)."""
        loop = self.loop
        if loop is None or self.pending_wakeup:
            return
        self.pending_wakeup = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._do_wake()
        else:
            loop.call_soon_threadsafe(self._do_wake)

    def _do_wake(self) -> None:
        self.pending_wakeup = False
        if self.wakeup is not None:
            self.wakeup.set()

    async def run(self) -> None:
        assert self.wakeup is not None
        while not self.closed:
            try:
                delay = self.send_ready()
            except Exception:  # keep the sender alive
                log.exception("producer sender failed")
                delay = 0.1
            if (self.metadata_needed or self.cluster.metadata_stale()) and not self.refreshing:
                self.metadata_needed = False
                self.refreshing = True
                self.spawn(self._refresh_metadata())
            self.wakeup.clear()
            if delay is None:
                await self.wakeup.wait()
            elif delay > 0:
                await self.wakeup.wait(delay)
            else:
                await asyncio.sleep(0)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def cancel_tasks(self) -> None:
        for t in list(self.tasks):
            t.cancel()

    async def _refresh_metadata(self) -> None:
        try:
            await self.cluster.refresh()
        except KafkaError as exc:
            log.debug("metadata refresh failed: %s", exc)
            await asyncio.sleep(self.backoff)
        finally:
            self.refreshing = False
        self.wake()

    async def _open_connection(self, node: int) -> None:
        try:
            await self.cluster.connection(node)
        except AuthenticationError as exc:  # not retried: what is queued fails with it now
            log.warning("connection to node %s refused: %s", node, exc)
            self.fail_queued(exc)
        except KafkaError as exc:
            log.debug("connection to node %s failed: %s", node, exc)
            # the node may be gone for good (a dead leader): ask who leads now, as Java does
            self.metadata_needed = True
        finally:
            self.connecting.discard(node)
        self.wake()

    # -- draining ---------------------------------------------------------------------------
    def send_ready(self) -> float | None:
        """Drain ready batches into Produce requests and write them; return seconds until the
        sender must look again (a linger or delivery deadline), None to wait for a wake-up.

        Frames are written here, synchronously, in drain order, so a partition's batches reach
        the broker in sequence order; only the responses are awaited in tasks."""
        acc = self.acc
        idem = self.idem
        now = time.monotonic()
        if idem.reset_pending and not self.in_flight_total and not idem.pid_requesting:
            self.reset_producer_state()
        resetting = idem.reset_pending or idem.pid_requesting
        next_delay: float | None = None
        per_node: dict[int, list[ProducerBatch]] = {}
        expired: list[ProducerBatch] = []
        cluster = self.cluster
        parts = idem.parts
        max_in_flight = self.max_in_flight
        idempotent = idem.enabled
        txn = self.txn
        with acc.lock:
            for tp, q in acc.queues.items():
                if not q:
                    continue
                batch = q[0]
                if now >= batch.deadline:
                    expired.append(q.popleft())
                    continue
                wait = batch.deadline - now
                if txn is not None and not txn.may_drain(tp):
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                st = parts.get(tp)
                in_flight = 0 if st is None else st.in_flight
                if resetting or (
                    in_flight
                    and (
                        batch.attempts  # a retry waits until the partition's in-flight batches are answered
                        or in_flight >= max_in_flight
                        or (idempotent and st is not None and st.last_acked < 0)  # first batch of an epoch goes alone
                    )
                ):
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                if not (
                    len(q) > 1
                    or batch.size >= acc.batch_size
                    or now - batch.created >= self.linger
                    or self.flushing
                    or self.closed
                    or acc.used >= acc.buffer_memory * 0.9
                ):
                    wait = min(wait, batch.created + self.linger - now)
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                leader = cluster.leader_for(tp)
                if leader < 0:
                    self.metadata_needed = True
                    wait = min(wait, 0.05)
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                if self.in_flight_node.get(leader, 0) >= max_in_flight:
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                per_node.setdefault(leader, []).append(batch)
        if txn is not None and txn.pending and not self.adding:
            self.adding = True
            self.spawn(self._add_partitions_to_txn())
        for b in expired:
            self.fail_batch(b, self._expired(b))
        sent = False
        for node, batches in per_node.items():
            conn = cluster.ready_connection(node)
            if conn is None:
                if node not in self.connecting:
                    self.connecting.add(node)
                    self.spawn(self._open_connection(node))
                continue
            size = 0
            chosen: list[ProducerBatch] = []
            with acc.lock:
                for b in batches:
                    if chosen and size + b.size > self.max_request_size:
                        break
                    q = acc.queues[b.tp]
                    if not q or q[0] is not b:
                        continue
                    q.popleft()
                    b.sealed = True
                    chosen.append(b)
                    size += b.size
            if chosen:
                self._write_request(node, conn, chosen)
                sent = True
        if sent or expired:
            return 0
        return next_delay

    def _expired(self, b: ProducerBatch) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"record expired: not delivered to {b.tp.topic}-{b.tp.partition} within delivery.timeout.ms "
            f"({self.delivery_timeout:g} s, {b.attempts} attempts)"
        )

    def _write_request(self, node: int, conn: Any, batches: list[ProducerBatch]) -> None:
        for b in batches:
            self.encode(b)
        topic_data: dict[str, list[tuple[int, bytes | memoryview]]] = {}
        for b in batches:
            assert b.encoded is not None
            topic_data.setdefault(b.tp.topic, []).append((b.tp.partition, b.encoded))
        try:
            version = conn.version(0)
            corr = conn.next_correlation_id()
            frame = proto.encode_produce_request(
                version, corr, conn.client_id, self.acks, self.request_timeout_ms, topic_data,
                None if self.txn is None else self.txn.transactional_id,
            )
            fut = conn.send_frame(0, version, frame, corr, expect_response=self.acks != 0)
        except KafkaConnectionError:  # not written: back to the queues as they were
            self.requeue(batches)
            return
        except KafkaError as exc:
            for b in batches:
                self.fail_batch(b, exc)
            return
        for b in batches:
            b.attempts += 1
        if fut is None:  # acks=0: nothing comes back
            for b in batches:
                self.acc.complete(b, -1, -1, None)
            return
        self.in_flight_total += 1
        self.in_flight_node[node] = self.in_flight_node.get(node, 0) + 1
        part = self.idem.part
        for b in batches:
            part(b.tp).in_flight += 1
        # a request never outlives the earliest delivery deadline of its batches
        left = min(b.deadline for b in batches) - time.monotonic()
        timeout = max(0.001, min(self.request_timeout, left))
        self.spawn(self._await_response(node, conn, fut, corr, batches, timeout))

    def encode(self, b: ProducerBatch) -> None:
        """Encode ``b`` as a RecordBatch v2 once (sequence from ``idem`` on the first drain)."""
        if b.encoded is not None:
            return
        if b.order < 0:
            b.order = self.drained
            self.drained += 1
        pid, epoch, seq = self.idem.assign_sequence(b)
        recs = b.records
        base_ts = recs[0][3]
        if _speedups is not None:
            data, count, max_ts = _speedups.encode_records(recs, base_ts)
        else:
            data, count, max_ts = _records.encode_records(recs, base_ts)
        b.encoded = _records.finish_batch(
            data, count, base_ts, max_ts, codec=self.codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
            transactional=self.txn is not None,
        )

    async def _await_response(
        self, node: int, conn: Any, fut: asyncio.Future[Any], corr: int, batches: list[ProducerBatch], timeout: float
    ) -> None:
        requeue: list[ProducerBatch] = []
        refresh = False
        idem = self.idem
        try:
            resp = await conn.wait(fut, corr, timeout)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("produce to node %s failed: %s", node, exc)
            for b in batches:
                b.ambiguous = True  # it may have been written
            requeue = batches
            refresh = True
        except Exception as exc:
            for b in batches:
                self.fail_batch(b, exc)
        else:
            by_tp = {(str(t.name), int(p.index)): p for t in resp.responses for p in t.partition_responses}
            for b in batches:
                p = by_tp.get((b.tp.topic, b.tp.partition))
                if p is None:
                    b.ambiguous = True
                    requeue.append(b)
                    continue
                err = int(p.error_code)
                if err == 0 or err == DUPLICATE_SEQUENCE:
                    idem.acked(b)
                    if err:
                        self.acc.complete(b, -1, -1, None)  # already written by an earlier attempt
                    else:
                        self.acc.complete(b, int(p.base_offset), _ms(getattr(p, "log_append_time", None)), None)
                elif self.txn is not None and err in _TXN_FATAL:
                    fenced = self.txn.fail_fatal(error_for(err, f"produce to {b.tp.topic}-{b.tp.partition}", self.txn.transactional_id))
                    self.fail_batch(b, fenced)
                elif idem.enabled and err in PRODUCER_STATE_ERRORS:
                    if idem.producer_state_error(b, err):
                        requeue.append(b)
                elif err in RETRIABLE:
                    if err == _REQUEST_TIMED_OUT:
                        b.ambiguous = True  # written, maybe, but not acknowledged by every replica
                    refresh = refresh or err in _STALE_METADATA
                    requeue.append(b)
                else:
                    msg = getattr(p, "error_message", None) or ""
                    self.fail_batch(b, KafkaError(f"produce to {b.tp.topic}-{b.tp.partition} failed {msg}", err))
        finally:
            self.in_flight_total -= 1
            self.in_flight_node[node] -= 1
            for b in batches:
                idem.parts[b.tp].in_flight -= 1
        if requeue:
            self.requeue(requeue)
            if refresh:
                self.metadata_needed = True
            await asyncio.sleep(self.backoff)
        self.wake()

    # -- resets, retries, failures ----------------------------------------------------------
    def reset_producer_state(self) -> None:
        """Bump the epoch (or get a new producer id) and restart every partition at sequence 0.

        Queued batches are re-sequenced, except those an earlier attempt of which may have been
        written (the request failed without an answer): re-sending one under the new epoch
        could write it twice, so it fails with an error saying so."""
        doomed: list[ProducerBatch] = []
        acc = self.acc
        with acc.lock:
            for q in acc.queues.values():
                if not any(b.encoded is not None for b in q):
                    continue
                keep = [b for b in q if not b.ambiguous]
                doomed.extend(b for b in q if b.ambiguous)
                q.clear()
                for b in keep:
                    b.encoded = None
                    b.base_sequence = -1
                    q.append(b)
        new_pid, reason = self.idem.reset()
        for b in doomed:
            acc.complete(b, -1, -1, KafkaError(
                f"produce to {b.tp.topic}-{b.tp.partition} failed: {reason}; the producer reset its sequence "
                "numbers, and an earlier attempt of this batch may or may not have been written, so it is not "
                "sent again (that could write it twice)"))
        if new_pid:
            self.idem.pid_requesting = True
            self.spawn(self._renew_producer_id())

    async def _renew_producer_id(self) -> None:
        try:
            while not self.closed:
                try:
                    pid, epoch = await init_producer_id(self.cluster, self.max_block, self.backoff)
                except KafkaError as exc:
                    log.warning("InitProducerId failed: %s", exc)
                    await asyncio.sleep(self.backoff)
                    continue
                self.idem.set_producer_id(pid, epoch)
                return
        finally:
            self.idem.pid_requesting = False
            self.wake()

    def requeue(self, batches: Sequence[ProducerBatch]) -> None:
        """Put batches back at the head of their queues, in drain order (before newer ones);
        those past their delivery deadline fail instead."""
        for b in self.acc.requeue(batches, time.monotonic()):
            self.fail_batch(b, self._expired(b))

    def fail_batch(self, b: ProducerBatch, exc: BaseException) -> None:
        """Complete ``b`` with an error; a batch that had a sequence leaves a hole in its
        partition's sequences, so the later batches are re-sequenced under a bumped epoch."""
        if b.result.done:
            return
        if self.idem.leaves_hole(b):
            self.idem.request_reset(1, f"a batch to {b.tp.topic}-{b.tp.partition} failed ({exc})")
        if self.txn is not None:
            self.txn.fail_abortable(TransactionAbortableError(
                f"the transaction cannot be committed: a batch to {b.tp.topic}-{b.tp.partition} failed ({exc})"))
        self.acc.complete(b, -1, -1, exc)

    def fail_all(self, exc: BaseException) -> int:
        """Fail every batch not yet completed (queued or in flight); return how many."""
        n = 0
        for b in self.acc.take_incomplete():
            if not b.result.done:
                n += 1
                self.acc.complete(b, -1, -1, exc)
        return n

    def fail_queued(self, exc: BaseException) -> int:
        """Fail every batch still in a queue (not in flight)."""
        batches = self.acc.take_queued()
        for b in batches:
            self.fail_batch(b, exc)
        return len(batches)

    def fail_pending(self, pending: Iterable[BatchResult], exc: BaseException) -> int:
        n = 0
        for b in self.acc.batches_of(list(pending)):
            if b is not None and not b.result.done:
                n += 1
                self.fail_batch(b, exc)
        return n

    # -- transactions -----------------------------------------------------------------------
    def fatal(self, exc: KafkaError) -> KafkaError:
        """Record a fatal transactional error; queued batches fail with it (they can never be sent)."""
        assert self.txn is not None
        err = self.txn.fail_fatal(exc)
        self.fail_queued(err)
        return err

    async def _add_partitions_to_txn(self) -> None:
        """AddPartitionsToTxn for the partitions the sender is holding batches back for."""
        txn = self.txn
        assert txn is not None and self.txn_requests is not None
        try:
            while txn.pending and txn.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
                tps = set(txn.pending)
                try:
                    await self.txn_requests.add_partitions(
                        self.idem.producer_id, self.idem.epoch, tps, time.monotonic() + self.request_timeout)
                except ProducerFencedError as exc:
                    self.fatal(exc)
                    return
                except KafkaTimeoutError:
                    continue  # retried while the transaction is open: batches expire by their own deadline
                except KafkaError as exc:
                    txn.fail_abortable(TransactionAbortableError(f"AddPartitionsToTxn failed: {exc}", exc.code))
                    return
                txn.partitions_added(tps)
        finally:
            self.adding = False
            self.wake()
