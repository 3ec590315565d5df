"""AsyncProducer: the asyncio producer core.

Records go into a per-partition accumulator (thread-safe, so the synchronous facade appends
from the caller's thread without a hop to the event loop). A sender task drains batches that
are full (``batch.size``), old enough (``linger.ms``) or flushed, groups them per leader into
Produce requests (at most one batch per partition per request, at most
``max.in.flight.requests.per.connection`` requests in flight per broker and batches in flight
per partition) and writes each request at once, on an open connection, so requests reach the
broker in drain order; tasks only await the responses and complete the batches' futures.

Idempotence (default), as Kafka's Java producer (Sender, RecordAccumulator, TransactionManager):
InitProducerId once; a batch gets the partition's next sequence when first drained, so
sequences follow send order. The first batch of a partition under an epoch goes alone (a
broker with no state for the producer takes any first sequence). A batch failing with a
retriable error goes back to the head of its queue in drain order and is re-sent, with the same
sequence, once the partition has nothing in flight. OUT_OF_ORDER_SEQUENCE_NUMBER for a batch
that is not the next one expected is such a retry; for the next expected one (a gap: the broker
lost acknowledged state) and for UNKNOWN_PRODUCER_ID the epoch is bumped and the batch retried; INVALID_PRODUCER_EPOCH gets a new producer id and retries. A batch that
failed after getting a sequence (expired, fatal error) leaves a hole, which also bumps the
epoch. A bump waits until nothing is in flight, then restarts every partition at sequence 0;
queued batches are re-sequenced, except those an earlier attempt of which may have been
written (the request got no answer): they fail with an error saying so (re-sending could write
them twice).

Transactions (``transactional.id``; the state machine and requests in ``_txn``): no producer
id at start — ``init_transactions()`` gets it from the transaction coordinator; ``send`` only
inside ``begin_transaction()``; the sender holds back a partition's batches until
AddPartitionsToTxn added it to the transaction, and marks batches transactional. A batch that
fails makes the transaction abortable; sequence trouble (which the idempotent producer repairs
with an epoch bump) also does, and the bump happens after ``abort_transaction()`` (a new
InitProducerId); PRODUCER_FENCED / INVALID_PRODUCER_EPOCH is fatal.

``delivery.timeout.ms`` bounds every batch: a queued one expires at its deadline, a request
never waits past the earliest deadline of its batches. ``flush()``/``close()`` without a
timeout return within delivery.timeout.ms + request.timeout.ms and fail what is left.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import Any

from .. import _bulk, _records
from .. import _protocol as proto
from .._cluster import Cluster
from .._config import PRODUCER, parse_config
from .._futures import BatchResult, RecordFuture
from .._signal import Signal
from ..errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    TransactionAbortableError,
)
from ..types import OffsetAndMetadata, RecordMetadata, TopicPartition
from ._txn import ConsumerGroupMetadata, TransactionManager, TxnRequests, TxnState, error_for

try:  # compiled twin of the batch encoder
    from .. import _speedups  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

__all__ = ["AsyncProducer"]

log = logging.getLogger("odradek.client.producer")

_RECORD_OVERHEAD = 22  # rough per-record bytes beyond key and value (varints, attributes)
_RETRIABLE = {2, 3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 56, 74, 75}
_STALE_METADATA = {3, 5, 6, 74, 75}
_REQUEST_TIMED_OUT = 7
_OUT_OF_ORDER = 45
_DUPLICATE_SEQUENCE = 46
_INVALID_PRODUCER_EPOCH = 47
_UNKNOWN_PRODUCER_ID = 59
_PRODUCER_STATE_ERRORS = {_OUT_OF_ORDER, _INVALID_PRODUCER_EPOCH, _UNKNOWN_PRODUCER_ID}
_PRODUCER_FENCED = 90
_TXN_FATAL = {_INVALID_PRODUCER_EPOCH, _PRODUCER_FENCED, 53}  # 53: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
_SEQ_MAX = 0x7FFFFFFF


def _to_bytes(v: Any, serializer: Callable[[Any], bytes] | None) -> bytes | None:
    if v is None:
        return None
    if serializer is not None:
        return serializer(v)
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"cannot send {type(v).__name__} without a serializer (give bytes or str)")


def _ms(v: Any) -> int:
    """A kio datetime/int/None timestamp as epoch milliseconds (-1 when absent)."""
    if v is None:
        return -1
    if isinstance(v, int):
        return v
    return int(v.timestamp() * 1000)


class _Batch:
    __slots__ = (
        "ambiguous", "attempts", "base_sequence", "created", "deadline", "encoded", "epoch", "order", "records",
        "result", "sealed", "size", "tp",
    )  # fmt: skip

    def __init__(self, tp: TopicPartition, now: float, deadline: float) -> None:
        self.tp = tp
        self.records: list[tuple[bytes | None, bytes | None, Any, int]] = []
        self.size = 61
        self.created = now
        self.deadline = deadline
        self.result = BatchResult()
        self.encoded: bytes | None = None
        self.base_sequence = -1
        self.epoch = -1
        self.attempts = 0
        self.order = -1  # drain order (set when first sent)
        self.sealed = False  # drained once: takes no more records
        self.ambiguous = False  # an attempt failed without an answer: it may have been written


class _PartitionState:
    """The sender's view of one partition: next sequence, last acknowledged, batches in flight."""

    __slots__ = ("in_flight", "last_acked", "next_seq")

    def __init__(self) -> None:
        self.next_seq = 0
        self.last_acked = -1
        self.in_flight = 0


class _Accumulator:
    """Per-partition queues of batches; safe to append from any thread."""

    def __init__(self, batch_size: int, buffer_memory: int) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)
        self.queues: dict[TopicPartition, deque[_Batch]] = {}
        self.used = 0
        self.incomplete: dict[BatchResult, _Batch] = {}

    def release(self, nbytes: int) -> None:
        with self.lock:
            self.used -= nbytes
            self.room.notify_all()


class AsyncProducer:
    """Asyncio Kafka producer. ``config`` uses the Java producer's keys.

    ``await producer.start()`` (or ``async with``), then ``fut = await producer.send(...)`` and
    ``metadata = await fut`` (or ``await producer.send_and_wait(...)``).
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = parse_config(config, PRODUCER, "producer")
        c = self.config
        self._cluster = Cluster(c)
        self._acks: int = c["acks"]
        self._linger = c["linger.ms"] / 1000
        self._codec = _records.CODECS[c["compression.type"]]
        self._idempotent: bool = c["enable.idempotence"]
        self._max_in_flight: int = c["max.in.flight.requests.per.connection"]
        self._delivery_timeout = c["delivery.timeout.ms"] / 1000
        self._max_block = c["max.block.ms"] / 1000
        self._max_request_size: int = c["max.request.size"]
        self._key_serializer = c["key.serializer"]
        self._value_serializer = c["value.serializer"]
        self._acc = _Accumulator(c["batch.size"], c["buffer.memory"])
        self._sticky: dict[str, int] = {}
        self._tps: dict[str, list[TopicPartition]] = {}
        self._plain_sticky = c["partitioner.class"] in ("default", "sticky", "murmur2")
        self._round_robin: dict[str, int] = {}
        self._producer_id = -1
        self._producer_epoch = -1
        self._request_timeout = c["request.timeout.ms"] / 1000
        self._parts: dict[TopicPartition, _PartitionState] = {}
        self._in_flight_node: dict[int, int] = {}
        self._in_flight_total = 0
        self._drained = 0
        self._connecting: set[int] = set()
        self._reset_pending = 0  # 1: bump the epoch, 2: get a new producer id
        self._reset_reason = ""
        self._pid_requesting = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: Signal | None = None
        self._sender: asyncio.Task[None] | None = None
        self._flushing = 0
        self._closed = False
        self._started = False
        self._pending_wakeup = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._metadata_needed = False
        self._refreshing = False
        tid = c["transactional.id"]
        self._txn = None if tid is None else TransactionManager(tid, c["transaction.timeout.ms"])
        self._txn_requests = None if tid is None else TxnRequests(self._cluster, tid, c["retry.backoff.ms"] / 1000)
        self._adding = False  # an AddPartitionsToTxn is in flight

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self._wakeup = Signal()
        await self._cluster.refresh([])
        if self._idempotent and self._txn is None:
            await self._init_producer_id()
        self._sender = asyncio.ensure_future(self._run())
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
        try:
            if self._txn is not None and self._txn.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
                self._fail_queued(ProducerClosedError("producer closed: the transaction of this record cannot complete"))
            if self._started:
                await self.flush(timeout)
        except (TimeoutError, KafkaError) as exc:
            log.warning("producer close: %s", exc)
        finally:
            self._closed = True
            if self._sender is not None:
                self._sender.cancel()
                try:
                    await self._sender
                except (asyncio.CancelledError, Exception):
                    pass
            for t in list(self._tasks):
                t.cancel()
            n = self._fail_all(ProducerClosedError("producer closed before this record was delivered"))
            if n:
                log.warning("producer closed with %d batches not delivered: they are failed", n)
            await self._cluster.close()

    async def _init_producer_id(self) -> None:
        deadline = time.monotonic() + self._max_block
        while True:
            conn = await self._cluster.any_connection()
            try:
                version = conn.version(22)
            except KafkaError:
                raise KafkaError("broker does not support InitProducerId: set enable.idempotence=false", 35) from None
            mod = proto.request_module(22, version)
            resp = await conn.request(
                proto.build(mod.InitProducerIdRequest, transactional_id=None, transaction_timeout=60000,
                            producer_id=-1, producer_epoch=-1)
            )
            err = int(resp.error_code)
            if not err:
                self._producer_id = int(resp.producer_id)
                self._producer_epoch = int(resp.producer_epoch)
                return
            if err not in _RETRIABLE or time.monotonic() > deadline:
                raise KafkaError("InitProducerId failed", err)
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    # -- partitioning -----------------------------------------------------------------------
    def _choose_partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        strategy = self.config["partitioner.class"]
        if strategy == "round_robin":
            p = self._round_robin.get(topic, random.randrange(num_partitions))
            self._round_robin[topic] = (p + 1) % num_partitions
            return p
        if key is not None and not self.config["partitioner.ignore.keys"] and strategy != "sticky":
            if _speedups is not None:
                return (_speedups.murmur2(key) & 0x7FFFFFFF) % num_partitions
            return _records.murmur2_partition(key, num_partitions)
        sticky = self._sticky.get(topic)
        p = -1 if sticky is None else sticky
        if p < 0 or p >= num_partitions:
            p = random.randrange(num_partitions)
            self._sticky[topic] = p
        return p

    def _next_sticky(self, topic: str, current: int, num_partitions: int) -> None:
        if num_partitions > 1:
            p = random.randrange(num_partitions - 1)
            self._sticky[topic] = p if p < current else p + 1

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
    def _append(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: Any,
        partition: int | None,
        timestamp: int | None,
        num_partitions: int,
        block: bool,
    ) -> RecordFuture | None:
        """Append one record. Returns None when the buffer is full and ``block`` is False."""
        if self._closed:
            raise ProducerClosedError()
        if self._txn is not None:
            self._txn.check_send()
        # fast paths for the common types; _to_bytes handles the rest
        kb = None if key is None else key if type(key) is bytes and self._key_serializer is None else _to_bytes(key, self._key_serializer)
        vb = value if type(value) is bytes and self._value_serializer is None else _to_bytes(value, self._value_serializer)
        hdrs = None
        size = _RECORD_OVERHEAD + (0 if kb is None else len(kb)) + (0 if vb is None else len(vb))
        if headers:
            hdrs = [(k, _to_bytes(v, None)) for k, v in (headers.items() if isinstance(headers, dict) else headers)]
            size += sum(len(k) + (len(v) if v else 0) + 4 for k, v in hdrs)
        if size > self._max_request_size:
            raise KafkaError(f"record of {size} bytes exceeds max.request.size", 10)
        if partition is None:
            if kb is None and self._plain_sticky:
                partition = self._sticky.get(topic)
                if partition is None or partition >= num_partitions:
                    partition = self._choose_partition(topic, kb, num_partitions)
            else:
                partition = self._choose_partition(topic, kb, num_partitions)
        elif not 0 <= partition < num_partitions:
            raise KafkaError(f"partition {partition} of topic {topic!r} does not exist", 3)
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        tps = self._tps.get(topic)
        if tps is None or len(tps) < num_partitions:
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(num_partitions)]
        tp = tps[partition]
        acc = self._acc
        wake = False
        with acc.lock:
            if acc.used + size > acc.buffer_memory:
                if not block:
                    return None
                deadline = time.monotonic() + self._max_block
                while acc.used + size > acc.buffer_memory:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._closed:
                        raise KafkaTimeoutError("buffer.memory is full: not freed within max.block.ms")
                    acc.room.wait(left)
            acc.used += size
            q = acc.queues.get(tp)
            if q is None:
                q = acc.queues[tp] = deque()
            batch = q[-1] if q else None
            if batch is None or batch.sealed or (batch.size + size > acc.batch_size and batch.records):
                if batch is not None and not batch.sealed:
                    wake = True  # the previous batch is full
                    if kb is None and partition == self._sticky.get(topic):
                        self._next_sticky(topic, partition, num_partitions)
                now = time.monotonic()
                batch = _Batch(tp, now, now + self._delivery_timeout)
                q.append(batch)
                acc.incomplete[batch.result] = batch
                if len(q) == 1:
                    wake = True
            index = len(batch.records)
            batch.records.append((kb, vb, hdrs, ts))
            batch.size += size
            if batch.size >= acc.batch_size:
                wake = True
        if wake:
            self._wake_threadsafe()
        return RecordFuture(batch.result, index, topic, partition, ts)

    def _wake_threadsafe(self) -> None:
        loop = self._loop
        if loop is None or self._pending_wakeup:
            return
        self._pending_wakeup = True
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._do_wake()
        else:
            loop.call_soon_threadsafe(self._do_wake)

    def _do_wake(self) -> None:
        self._pending_wakeup = False
        if self._wakeup is not None:
            self._wakeup.set()

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

    def _slices(self, sizes: list[int]) -> list[tuple[int, int]]:
        limit = max(1, self._acc.buffer_memory // 4)
        cum = list(accumulate(sizes, initial=0))
        out: list[tuple[int, int]] = []
        lo, n = 0, len(sizes)
        while lo < n:
            hi = max(lo + 1, bisect_right(cum, cum[lo] + limit) - 1)
            out.append((lo, hi))
            lo = hi
        return out

    def _prepare_columns(
        self,
        topic: str,
        values: Any,
        keys: Any,
        partitions: Any,
        headers: Any,
        timestamps: Any,
        num_partitions: int,
    ) -> tuple[list[Any], list[int], list[int] | None, list[bool] | None, list[int]]:
        """Rows of a ``send_batch`` call: (record tuples, sizes, partition per row or None when
        every row goes to the sticky partition, null key per row, timestamps).

        Partition -1: chosen by the sticky partitioner at append time (as ``send`` does for a
        null key, or any key under ``sticky``/``partitioner.ignore.keys``). Validates sizes and
        explicit partitions before anything is appended."""
        vals = _bulk.column_bytes(values, self._value_serializer, _to_bytes)
        n = len(vals)
        ks = None if keys is None else _bulk.column_bytes(keys, self._key_serializer, _to_bytes)
        hs = None if headers is None else _bulk.column_headers(headers, _to_bytes)
        ps = None if partitions is None else _bulk.column_ints(partitions)
        ts_in = None if timestamps is None else _bulk.column_ints(timestamps)
        for name, col in (("keys", ks), ("partitions", ps), ("headers", hs), ("timestamps", ts_in)):
            if col is not None and len(col) != n:
                raise ValueError(f"send_batch: {name} has {len(col)} rows, values has {n}")
        now = time.time_ns() // 1_000_000
        tss = [now] * n if ts_in is None else [now if t is None else t for t in ts_in]
        o = _RECORD_OVERHEAD
        if ks is None:
            sizes = [o if v is None else o + len(v) for v in vals]
        else:
            sizes = [o + (0 if k is None else len(k)) + (0 if v is None else len(v)) for k, v in zip(ks, vals, strict=True)]
        if hs is not None:
            for i, h in enumerate(hs):
                if h:
                    sizes[i] += sum(len(k) + (len(v) if v else 0) + 4 for k, v in h)
        if n and max(sizes) > self._max_request_size:
            raise KafkaError(f"record of {max(sizes)} bytes exceeds max.request.size", 10)
        # (a comprehension: list(zip(...)) of fresh tuples costs ~2x, mostly in the cyclic GC)
        recs: list[Any]
        if ks is None and hs is None and ts_in is None:
            recs = [(None, v, None, now) for v in vals]
        else:
            none_col = [None] * n
            kcol = none_col if ks is None else ks
            hcol = none_col if hs is None else hs
            recs = [(k, v, h, t) for k, v, h, t in zip(kcol, vals, hcol, tss, strict=True)]
        strategy = self.config["partitioner.class"]
        nokeys = ks is None or all(k is None for k in ks)
        if ps is None and nokeys and strategy != "round_robin":
            return recs, sizes, None, None, tss
        parts = [-1] * n if ps is None else [-1 if p is None else int(p) for p in ps]
        for p in parts:
            if not -1 <= p < num_partitions:
                raise KafkaError(f"partition {p} of topic {topic!r} does not exist", 3)
        null_key = [True] * n if ks is None else [k is None for k in ks]
        use_keys = not self.config["partitioner.ignore.keys"] and strategy not in ("sticky", "round_robin")
        for i in range(n):
            if parts[i] >= 0:
                continue
            if strategy == "round_robin":
                parts[i] = self._choose_partition(topic, None, num_partitions)
            elif use_keys and not null_key[i]:
                k = recs[i][0]
                if _speedups is not None:
                    parts[i] = (_speedups.murmur2(k) & 0x7FFFFFFF) % num_partitions
                else:
                    parts[i] = _records.murmur2_partition(k, num_partitions)
        return recs, sizes, parts, null_key, tss

    def _sticky_partition(self, topic: str, num_partitions: int) -> int:
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self._choose_partition(topic, None, num_partitions)
        return p

    def _append_rows(
        self,
        topic: str,
        recs: list[Any],
        sizes: list[int],
        parts: list[int] | None,
        null_key: list[bool] | None,
        lo: int,
        hi: int,
        num_partitions: int,
        block: bool,
    ) -> list[_bulk.Segment] | None:
        """Append rows ``lo:hi`` under one lock, batch boundaries and sticky switches exactly as
        ``_append`` row by row. None when the buffer is full and ``block`` is False."""
        if self._closed:
            raise ProducerClosedError()
        if self._txn is not None:
            self._txn.check_send()
        tps = self._tps.get(topic)
        if tps is None or len(tps) < num_partitions:
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(num_partitions)]
        acc = self._acc
        bs = acc.batch_size
        cum = list(accumulate(sizes[lo:hi], initial=0))
        total = cum[-1]
        segments: list[_bulk.Segment] = []
        wake = False

        def open_batch(tp: TopicPartition) -> tuple[deque[_Batch], _Batch | None]:
            q = acc.queues.get(tp)
            if q is None:
                q = acc.queues[tp] = deque()
            return q, (q[-1] if q and not q[-1].sealed else None)

        def new_batch(q: deque[_Batch], tp: TopicPartition) -> _Batch:
            nonlocal wake
            now = time.monotonic()
            b = _Batch(tp, now, now + self._delivery_timeout)
            q.append(b)
            acc.incomplete[b.result] = b
            if len(q) == 1:
                wake = True
            return b

        def put(b: _Batch, rows: Sequence[int], chunk: list[Any], nbytes: int, p: int) -> None:
            nonlocal wake
            segments.append((b.result, len(b.records), p, rows))
            b.records.extend(chunk)
            b.size += nbytes
            if b.size >= bs:
                wake = True

        with acc.lock:
            if acc.used + total > acc.buffer_memory:
                if not block:
                    return None
                deadline = time.monotonic() + self._max_block
                while acc.used + total > acc.buffer_memory:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._closed:
                        raise KafkaTimeoutError("buffer.memory is full: not freed within max.block.ms")
                    acc.room.wait(left)
            acc.used += total
            if parts is None:
                # every row to the sticky partition: fill its open batch, then on overflow the
                # overflowing row starts a new batch there and the sticky partition moves on
                i = lo
                while i < hi:
                    p = self._sticky_partition(topic, num_partitions)
                    tp = tps[p]
                    q, b = open_batch(tp)
                    only_one = False
                    if b is None:
                        b = new_batch(q, tp)
                    elif b.records and b.size + sizes[i] > bs:
                        wake = True
                        self._next_sticky(topic, p, num_partitions)
                        only_one = self._sticky.get(topic) != p
                        b = new_batch(q, tp)
                    if only_one:
                        j = i + 1
                    else:
                        j = bisect_right(cum, cum[i - lo] + bs - b.size, i - lo, hi - lo + 1) - 1 + lo
                        if j <= i:
                            j = i + 1
                    put(b, range(i, j), recs[i:j], cum[j - lo] - cum[i - lo], p)
                    i = j
            else:
                assert null_key is not None
                # resolve sticky rows by simulating _append's batch fills, then fill per partition;
                # the simulation only matters when a row may use or move the sticky partition
                fill: dict[int, int] = {}
                resolved = parts[lo:hi]
                simulate = -1 in resolved or (topic in self._sticky and any(null_key[lo:hi]))
                for k in range(hi - lo) if simulate else ():
                    i = lo + k
                    p = resolved[k]
                    if p < 0:
                        p = resolved[k] = self._sticky_partition(topic, num_partitions)
                    f = fill.get(p)
                    if f is None:  # size of the open batch, -1: none
                        b0 = open_batch(tps[p])[1]
                        f = -1 if b0 is None else b0.size
                    if f < 0:
                        f = 61
                    elif f > 61 and f + sizes[i] > bs:  # full: a new batch (sticky moves on)
                        if null_key[i] and p == self._sticky.get(topic):
                            self._next_sticky(topic, p, num_partitions)
                        f = 61
                    fill[p] = f + sizes[i]
                by_part: dict[int, list[int]] = {}
                for k, p in enumerate(resolved):
                    rows = by_part.get(p)
                    if rows is None:
                        rows = by_part[p] = []
                    rows.append(lo + k)
                for p, rows in by_part.items():
                    tp = tps[p]
                    q, b = open_batch(tp)
                    pcum = list(accumulate((sizes[r] for r in rows), initial=0))
                    k, m = 0, len(rows)
                    while k < m:
                        if b is None:
                            b = new_batch(q, tp)
                        elif b.records and b.size + sizes[rows[k]] > bs:
                            wake = True
                            b = new_batch(q, tp)
                        j = bisect_right(pcum, pcum[k] + bs - b.size, k, m + 1) - 1
                        if j <= k:
                            j = k + 1
                        chunk = rows[k:j]
                        put(b, chunk, [recs[r] for r in chunk], pcum[j] - pcum[k], p)
                        k = j
                        b = q[-1]
        if wake:
            self._wake_threadsafe()
        return segments

    def _give_up_after(self) -> float:
        """How long flush()/close() without a timeout wait: delivery.timeout.ms bounds every
        batch in a queue, request.timeout.ms one in flight (plus a second of slack)."""
        return self._delivery_timeout + self._request_timeout + 1.0

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged (or failed).

        ``timeout`` None: wait at most delivery.timeout.ms + request.timeout.ms (every batch is
        completed by then); whatever is still not done then is failed, and KafkaTimeoutError
        says how many batches that was. A given ``timeout`` only stops the waiting."""
        with self._acc.lock:
            pending = list(self._acc.incomplete)
        if not pending:
            return
        self._flushing += 1
        try:
            self._wake_threadsafe()
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
                    n = self._fail_pending(pending, KafkaTimeoutError(
                        f"not delivered within delivery.timeout.ms + request.timeout.ms ({limit:g} s): failed by flush()"))
                    raise KafkaTimeoutError(
                        f"flush gave up after {limit:g} s (delivery.timeout.ms + request.timeout.ms): "
                        f"{n} batches were not delivered and are failed") from None
        finally:
            self._flushing -= 1

    def _fail_pending(self, pending: Iterable[BatchResult], exc: BaseException) -> int:
        with self._acc.lock:
            batches = [self._acc.incomplete.get(r) for r in pending]
        n = 0
        for b in batches:
            if b is not None and not b.result.done:
                n += 1
                self._fail_batch(b, exc)
        return n

    # -- sender -----------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wakeup is not None
        while not self._closed:
            try:
                delay = self._send_ready()
            except Exception:  # keep the sender alive
                log.exception("producer sender failed")
                delay = 0.1
            if (self._metadata_needed or self._cluster.metadata_stale()) and not self._refreshing:
                self._metadata_needed = False
                self._refreshing = True
                self._spawn(self._refresh_metadata())
            self._wakeup.clear()
            if delay is None:
                await self._wakeup.wait()
            elif delay > 0:
                await self._wakeup.wait(delay)
            else:
                await asyncio.sleep(0)

    def _spawn(self, coro: Any) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _refresh_metadata(self) -> None:
        try:
            await self._cluster.refresh()
        except KafkaError as exc:
            log.debug("metadata refresh failed: %s", exc)
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        finally:
            self._refreshing = False
        self._wake_threadsafe()

    async def _open_connection(self, node: int) -> None:
        try:
            await self._cluster.connection(node)
        except KafkaError as exc:
            log.debug("connection to node %s failed: %s", node, exc)
        finally:
            self._connecting.discard(node)
        self._wake_threadsafe()

    def _part(self, tp: TopicPartition) -> _PartitionState:
        st = self._parts.get(tp)
        if st is None:
            st = self._parts[tp] = _PartitionState()
        return st

    def _send_ready(self) -> float | None:
        """Drain ready batches into Produce requests and write them; return seconds until the
        sender must look again (a linger or delivery deadline), None to wait for a wake-up.

        Frames are written here, synchronously, in drain order, so a partition's batches reach
        the broker in sequence order; only the responses are awaited in tasks."""
        acc = self._acc
        now = time.monotonic()
        if self._reset_pending and not self._in_flight_total and not self._pid_requesting:
            self._reset_producer_state()
        resetting = self._reset_pending or self._pid_requesting
        next_delay: float | None = None
        per_node: dict[int, list[_Batch]] = {}
        expired: list[_Batch] = []
        cluster = self._cluster
        parts = self._parts
        max_in_flight = self._max_in_flight
        idempotent = self._idempotent
        txn = self._txn
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
                    or now - batch.created >= self._linger
                    or self._flushing
                    or self._closed
                    or acc.used >= acc.buffer_memory * 0.9
                ):
                    wait = min(wait, batch.created + self._linger - now)
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                leader = cluster.leader_for(tp)
                if leader < 0:
                    self._metadata_needed = True
                    wait = min(wait, 0.05)
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                if self._in_flight_node.get(leader, 0) >= max_in_flight:
                    next_delay = wait if next_delay is None or wait < next_delay else next_delay
                    continue
                per_node.setdefault(leader, []).append(batch)
        if txn is not None and txn.pending and not self._adding:
            self._adding = True
            self._spawn(self._add_partitions_to_txn())
        for b in expired:
            self._fail_batch(b, KafkaTimeoutError(
                f"record expired: not delivered to {b.tp.topic}-{b.tp.partition} within delivery.timeout.ms "
                f"({self._delivery_timeout:g} s, {b.attempts} attempts)"
            ))
        sent = False
        for node, batches in per_node.items():
            conn = cluster.ready_connection(node)
            if conn is None:
                if node not in self._connecting:
                    self._connecting.add(node)
                    self._spawn(self._open_connection(node))
                continue
            size = 0
            chosen: list[_Batch] = []
            with acc.lock:
                for b in batches:
                    if chosen and size + b.size > self._max_request_size:
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

    def _write_request(self, node: int, conn: Any, batches: list[_Batch]) -> None:
        for b in batches:
            self._encode(b)
        topic_data: dict[str, list[tuple[int, bytes | memoryview]]] = {}
        for b in batches:
            assert b.encoded is not None
            topic_data.setdefault(b.tp.topic, []).append((b.tp.partition, b.encoded))
        try:
            version = conn.version(0)
            corr = conn.next_correlation_id()
            frame = proto.encode_produce_request(
                version, corr, conn.client_id, self._acks, self.config["request.timeout.ms"], topic_data,
                None if self._txn is None else self._txn.transactional_id,
            )
            fut = conn.send_frame(0, version, frame, corr, expect_response=self._acks != 0)
        except KafkaConnectionError:  # not written: back to the queues as they were
            self._requeue(batches)
            return
        except KafkaError as exc:
            for b in batches:
                self._fail_batch(b, exc)
            return
        for b in batches:
            b.attempts += 1
        if fut is None:  # acks=0: nothing comes back
            for b in batches:
                self._complete(b, -1, -1, None)
            return
        self._in_flight_total += 1
        self._in_flight_node[node] = self._in_flight_node.get(node, 0) + 1
        for b in batches:
            self._part(b.tp).in_flight += 1
        # a request never outlives the earliest delivery deadline of its batches
        left = min(b.deadline for b in batches) - time.monotonic()
        timeout = max(0.001, min(self._request_timeout, left))
        self._spawn(self._await_response(node, conn, fut, corr, batches, timeout))

    def _encode(self, b: _Batch) -> None:
        if b.encoded is not None:
            return
        if b.order < 0:
            b.order = self._drained
            self._drained += 1
        pid, epoch, seq = -1, -1, -1
        if self._idempotent:
            pid, epoch = self._producer_id, self._producer_epoch
            st = self._part(b.tp)
            seq = st.next_seq
            st.next_seq = (seq + len(b.records)) & _SEQ_MAX
            b.base_sequence = seq
            b.epoch = epoch
        recs = b.records
        base_ts = recs[0][3]
        if _speedups is not None:
            data, count, max_ts = _speedups.encode_records(recs, base_ts)
        else:
            data, count, max_ts = _records.encode_records(recs, base_ts)
        b.encoded = _records.finish_batch(
            data, count, base_ts, max_ts, codec=self._codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
            transactional=self._txn is not None,
        )

    async def _await_response(
        self, node: int, conn: Any, fut: asyncio.Future[Any], corr: int, batches: list[_Batch], timeout: float
    ) -> None:
        requeue: list[_Batch] = []
        refresh = False
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
                self._fail_batch(b, exc)
        else:
            by_tp = {(str(t.name), int(p.index)): p for t in resp.responses for p in t.partition_responses}
            for b in batches:
                p = by_tp.get((b.tp.topic, b.tp.partition))
                if p is None:
                    b.ambiguous = True
                    requeue.append(b)
                    continue
                err = int(p.error_code)
                if err == 0 or err == _DUPLICATE_SEQUENCE:
                    self._acked(b)
                    if err:
                        self._complete(b, -1, -1, None)  # already written by an earlier attempt
                    else:
                        self._complete(b, int(p.base_offset), _ms(getattr(p, "log_append_time", None)), None)
                elif self._txn is not None and err in _TXN_FATAL:
                    fenced = self._txn.fail_fatal(error_for(err, f"produce to {b.tp.topic}-{b.tp.partition}", self._txn.transactional_id))
                    self._fail_batch(b, fenced)
                elif self._idempotent and err in _PRODUCER_STATE_ERRORS:
                    if self._producer_state_error(b, err):
                        requeue.append(b)
                elif err in _RETRIABLE:
                    if err == _REQUEST_TIMED_OUT:
                        b.ambiguous = True  # written, maybe, but not acknowledged by every replica
                    refresh = refresh or err in _STALE_METADATA
                    requeue.append(b)
                else:
                    msg = getattr(p, "error_message", None) or ""
                    self._fail_batch(b, KafkaError(f"produce to {b.tp.topic}-{b.tp.partition} failed {msg}", err))
        finally:
            self._in_flight_total -= 1
            self._in_flight_node[node] -= 1
            for b in batches:
                self._parts[b.tp].in_flight -= 1
        if requeue:
            self._requeue(requeue)
            if refresh:
                self._metadata_needed = True
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        self._wake_threadsafe()

    def _acked(self, b: _Batch) -> None:
        if b.base_sequence >= 0 and b.epoch == self._producer_epoch:
            st = self._part(b.tp)
            st.last_acked = (b.base_sequence + len(b.records) - 1) & _SEQ_MAX

    def _producer_state_error(self, b: _Batch, err: int) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH for a batch
        (as Kafka's TransactionManager does for an idempotent producer, KIP-360). True: retry it.

        * OUT_OF_ORDER for a batch that is not the next the partition expects: an earlier batch
          failed, and this one is retried after it (with its own sequence).
        * OUT_OF_ORDER for the next expected batch: a real gap (the broker's state for this
          producer lost batches it had acknowledged): bump the epoch and retry the batch (it was
          not written) from sequence 0, as the Java client does.
        * UNKNOWN_PRODUCER_ID (the broker has no state for the producer, e.g. removed with old
          segments): bump the epoch, retry the batch (it was not written).
        * INVALID_PRODUCER_EPOCH: the broker knows a newer epoch; get a new producer id and retry.
        """
        if b.result.done or b.epoch != self._producer_epoch:
            return not b.result.done  # an attempt from before a reset: re-sequenced and retried
        if err == _OUT_OF_ORDER:
            st = self._part(b.tp)
            expected = 0 if st.last_acked < 0 else (st.last_acked + 1) & _SEQ_MAX
            if b.base_sequence != expected:
                return True
            self._request_reset(1, f"OUT_OF_ORDER_SEQUENCE_NUMBER for {b.tp.topic}-{b.tp.partition} at sequence "
                                   f"{b.base_sequence}, the next one expected (a gap in the broker's state)")
            return True
        if err == _UNKNOWN_PRODUCER_ID:
            self._request_reset(1, f"UNKNOWN_PRODUCER_ID for {b.tp.topic}-{b.tp.partition}")
        else:
            self._request_reset(2, f"INVALID_PRODUCER_EPOCH for {b.tp.topic}-{b.tp.partition}")
        return True

    def _request_reset(self, level: int, reason: str) -> None:
        """Ask for an epoch bump (1) or a new producer id (2): done by the sender once no request
        is in flight; until then nothing is drained. A transactional producer cannot bump its
        epoch in the middle of a transaction: the transaction becomes abortable, and
        ``abort_transaction()`` gets a new epoch."""
        if self._txn is not None:
            self._txn.fail_abortable(TransactionAbortableError(f"the transaction cannot complete: {reason}"), bump_epoch=True)
            return
        if level > self._reset_pending:
            self._reset_pending = level
        if self._reset_reason:
            return
        self._reset_reason = reason
        log.warning("producer id %s epoch %s: %s; resetting sequences", self._producer_id, self._producer_epoch, reason)

    def _reset_producer_state(self) -> None:
        """Bump the epoch (or get a new producer id) and restart every partition at sequence 0.

        Queued batches are re-sequenced, except those an earlier attempt of which may have been
        written (the request failed without an answer): re-sending one under the new epoch
        could write it twice, so it fails with an error saying so."""
        reason = self._reset_reason
        doomed: list[_Batch] = []
        acc = self._acc
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
        self._parts.clear()
        for b in doomed:
            self._complete(b, -1, -1, KafkaError(
                f"produce to {b.tp.topic}-{b.tp.partition} failed: {reason}; the producer reset its sequence "
                "numbers, and an earlier attempt of this batch may or may not have been written, so it is not "
                "sent again (that could write it twice)"))
        level = self._reset_pending
        self._reset_pending = 0
        self._reset_reason = ""
        if level >= 2 or self._producer_epoch >= 32767:
            self._pid_requesting = True
            self._spawn(self._renew_producer_id())
        else:
            self._producer_epoch += 1

    async def _renew_producer_id(self) -> None:
        try:
            while not self._closed:
                try:
                    await self._init_producer_id()
                    return
                except KafkaError as exc:
                    log.warning("InitProducerId failed: %s", exc)
                    await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        finally:
            self._pid_requesting = False
            self._wake_threadsafe()

    def _requeue(self, batches: Iterable[_Batch]) -> None:
        """Put batches back at the head of their queues, in drain order (before newer ones)."""
        now = time.monotonic()
        late: list[_Batch] = []
        with self._acc.lock:
            for b in batches:
                if b.result.done:
                    continue
                if now >= b.deadline:
                    late.append(b)
                    continue
                q = self._acc.queues.setdefault(b.tp, deque())
                i = 0
                while i < len(q) and 0 <= q[i].order < b.order:
                    i += 1
                q.insert(i, b)
        for b in late:
            self._fail_batch(b, KafkaTimeoutError(
                f"record expired: not delivered to {b.tp.topic}-{b.tp.partition} within delivery.timeout.ms "
                f"({self._delivery_timeout:g} s, {b.attempts} attempts)"
            ))

    def _fail_batch(self, b: _Batch, exc: BaseException) -> None:
        """Complete ``b`` with an error; a batch that had a sequence leaves a hole in its
        partition's sequences, so the later batches are re-sequenced under a bumped epoch."""
        if b.result.done:
            return
        if self._idempotent and b.base_sequence >= 0 and b.epoch == self._producer_epoch:
            self._request_reset(1, f"a batch to {b.tp.topic}-{b.tp.partition} failed ({exc})")
        if self._txn is not None:
            self._txn.fail_abortable(TransactionAbortableError(
                f"the transaction cannot be committed: a batch to {b.tp.topic}-{b.tp.partition} failed ({exc})"))
        self._complete(b, -1, -1, exc)

    def _complete(self, b: _Batch, base_offset: int, log_append_time: int, exc: BaseException | None) -> None:
        if b.result.done:
            return
        nbytes = b.size - 61
        b.result.complete(base_offset, log_append_time, exc)
        acc = self._acc
        with acc.lock:
            acc.incomplete.pop(b.result, None)
            acc.used -= nbytes
            acc.room.notify_all()

    def _fail_all(self, exc: BaseException) -> int:
        """Fail every batch not yet completed (queued or in flight); return how many."""
        with self._acc.lock:
            batches = list(self._acc.incomplete.values())
            self._acc.queues.clear()
        n = 0
        for b in batches:
            if not b.result.done:
                n += 1
                self._complete(b, -1, -1, exc)
        return n

    # -- transactions (see _txn) ----------------------------------------------------------------
    def _txn_manager(self) -> TransactionManager:
        if self._txn is None:
            raise KafkaError("this producer has no transactional.id: transactions are not available")
        return self._txn

    def _txn_deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self._max_block if timeout is None else timeout)

    def _fatal(self, exc: KafkaError) -> KafkaError:
        """Record a fatal transactional error; queued batches fail with it (they can never be sent)."""
        err = self._txn_manager().fail_fatal(exc)
        self._fail_queued(err)
        return err

    def _fail_queued(self, exc: BaseException) -> int:
        """Fail every batch still in a queue (not in flight)."""
        with self._acc.lock:
            batches = [b for q in self._acc.queues.values() for b in q]
            for q in self._acc.queues.values():
                q.clear()
        for b in batches:
            self._fail_batch(b, exc)
        return len(batches)

    async def _add_partitions_to_txn(self) -> None:
        """AddPartitionsToTxn for the partitions the sender is holding batches back for."""
        txn = self._txn_manager()
        assert self._txn_requests is not None
        try:
            while txn.pending and txn.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
                tps = set(txn.pending)
                try:
                    await self._txn_requests.add_partitions(
                        self._producer_id, self._producer_epoch, tps, time.monotonic() + self._request_timeout)
                except ProducerFencedError as exc:
                    self._fatal(exc)
                    return
                except KafkaTimeoutError:
                    continue  # retried while the transaction is open: batches expire by their own deadline
                except KafkaError as exc:
                    txn.fail_abortable(TransactionAbortableError(f"AddPartitionsToTxn failed: {exc}", exc.code))
                    return
                txn.partitions_added(tps)
        finally:
            self._adding = False
            self._wake_threadsafe()

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
            raise self._fatal(exc) from None
        self._producer_id, self._producer_epoch = pid, epoch
        self._parts.clear()  # sequences start at 0 under the new epoch
        txn.epoch_bump_needed = False
        txn.transition(TxnState.READY)

    def producer_id_and_epoch(self) -> tuple[int, int]:
        """(producer id, epoch); (-1, -1) before InitProducerId."""
        return self._producer_id, self._producer_epoch

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
        (confluent-kafka's TopicPartition); ``group_metadata``: ``consumer.consumer_group_metadata()``
        or a group id."""
        txn = self._txn_manager()
        assert self._txn_requests is not None
        txn.check_send()
        group = _group_metadata(group_metadata)
        md = _offsets_map(offsets)
        deadline = self._txn_deadline(timeout)
        try:
            await self._txn_requests.add_offsets(self._producer_id, self._producer_epoch, group.group_id, deadline)
            txn.offsets_added = True
            await self._txn_requests.txn_offset_commit(self._producer_id, self._producer_epoch, group, md, deadline)
        except (ProducerFencedError, KafkaTimeoutError) as exc:
            if isinstance(exc, ProducerFencedError):
                raise self._fatal(exc) from None
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
                await self._txn_requests.end_txn(self._producer_id, self._producer_epoch, True, deadline)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                raise self._fatal(exc) from None
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
            self._fail_queued(aborted)
            with self._acc.lock:
                busy = bool(self._acc.incomplete)
            if not busy:
                break
            if time.monotonic() > deadline:
                raise KafkaTimeoutError("abort_transaction timed out waiting for in-flight requests")
            await asyncio.sleep(0.005)
        if txn.anything_to_end:
            try:
                await self._txn_requests.end_txn(self._producer_id, self._producer_epoch, False, deadline)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                raise self._fatal(exc) from None
        if txn.epoch_bump_needed:  # sequences broke during the transaction: a new epoch
            try:
                pid, epoch = await self._txn_requests.init_producer_id(txn.timeout_ms, deadline)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                raise self._fatal(exc) from None
            self._producer_id, self._producer_epoch = pid, epoch
            self._parts.clear()
            txn.epoch_bump_needed = False
        txn.transition(TxnState.READY)


def _group_metadata(g: Any) -> ConsumerGroupMetadata:
    if isinstance(g, ConsumerGroupMetadata):
        return g
    if isinstance(g, str):
        return ConsumerGroupMetadata(g)
    group_id = getattr(g, "group_id", None)
    if not isinstance(group_id, str):
        raise TypeError("group_metadata must be consumer.consumer_group_metadata() or a group id")
    return ConsumerGroupMetadata(group_id, int(getattr(g, "generation_id", -1)), str(getattr(g, "member_id", "")),
                                 getattr(g, "group_instance_id", None))


def _offsets_map(offsets: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    if isinstance(offsets, dict):
        for tp, o in offsets.items():
            out[TopicPartition(*tp)] = o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
        return out
    for item in offsets:
        out[TopicPartition(item.topic, item.partition)] = OffsetAndMetadata(int(item.offset), getattr(item, "metadata", None) or "")
    return out
