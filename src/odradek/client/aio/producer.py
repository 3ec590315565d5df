"""AsyncProducer: the asyncio producer core.

Records go into a per-partition accumulator (thread-safe, so the synchronous facade appends
from the caller's thread without a hop to the event loop). A sender task drains batches that
are full (``batch.size``), old enough (``linger.ms``) or flushed, groups them per leader into
Produce requests (at most one batch per partition per request, at most
``max.in.flight.requests.per.connection`` requests in flight per broker) and completes the
batches' futures from the responses.

Idempotence (default): InitProducerId once, then every batch gets the partition's next
sequence number when first sent; a retried batch is re-sent with the same bytes, and a
partition whose head batch is a retry sends nothing else until its in-flight batches are
answered, so order is kept and the broker drops duplicates.
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
from ..errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, ProducerClosedError
from ..types import RecordMetadata, TopicPartition

try:  # compiled twin of the batch encoder
    from .. import _speedups  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

__all__ = ["AsyncProducer"]

log = logging.getLogger("odradek.client.producer")

_RECORD_OVERHEAD = 22  # rough per-record bytes beyond key and value (varints, attributes)
_RETRIABLE = {2, 3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 45, 56, 74, 75}
_STALE_METADATA = {3, 5, 6, 74, 75}


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
        "attempts", "base_sequence", "created", "deadline", "encoded", "records", "result", "size", "tp",
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
        self.attempts = 0


class _Accumulator:
    """Per-partition queues of batches; safe to append from any thread."""

    def __init__(self, batch_size: int, buffer_memory: int) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)
        self.queues: dict[TopicPartition, deque[_Batch]] = {}
        self.used = 0
        self.incomplete: set[BatchResult] = set()

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
        self._next_seq: dict[TopicPartition, int] = {}
        self._in_flight_tp: dict[TopicPartition, int] = {}
        self._in_flight_node: dict[int, int] = {}
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

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self._wakeup = Signal()
        await self._cluster.refresh([])
        if self._idempotent:
            await self._init_producer_id()
        self._sender = asyncio.ensure_future(self._run())
        self._started = True

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (up to ``timeout`` seconds), then close connections."""
        if self._closed:
            return
        try:
            if self._started:
                await asyncio.wait_for(self.flush(), timeout)
        except (TimeoutError, KafkaError):
            pass
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
            self._fail_all(ProducerClosedError())
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
            if batch is None or batch.encoded is not None or (batch.size + size > acc.batch_size and batch.records):
                if batch is not None and batch.encoded is None:
                    wake = True  # the previous batch is full
                    if kb is None and partition == self._sticky.get(topic):
                        self._next_sticky(topic, partition, num_partitions)
                now = time.monotonic()
                batch = _Batch(tp, now, now + self._delivery_timeout)
                q.append(batch)
                acc.incomplete.add(batch.result)
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
            return q, (q[-1] if q and q[-1].encoded is None else None)

        def new_batch(q: deque[_Batch], tp: TopicPartition) -> _Batch:
            nonlocal wake
            now = time.monotonic()
            b = _Batch(tp, now, now + self._delivery_timeout)
            q.append(b)
            acc.incomplete.add(b.result)
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

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged (or failed)."""
        with self._acc.lock:
            pending = list(self._acc.incomplete)
        if not pending:
            return
        self._flushing += 1
        try:
            self._wake_threadsafe()
            deadline = None if timeout is None else time.monotonic() + timeout
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
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    await asyncio.wait_for(af, left)
                except TimeoutError:
                    raise KafkaTimeoutError("flush timed out") from None
        finally:
            self._flushing -= 1

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

    def _send_ready(self) -> float | None:
        """Drain ready batches into requests; return seconds until the next linger expiry."""
        acc = self._acc
        now = time.monotonic()
        next_delay: float | None = None
        per_node: dict[int, list[_Batch]] = {}
        expired: list[_Batch] = []
        cluster = self._cluster
        with acc.lock:
            for tp, q in acc.queues.items():
                if not q:
                    continue
                batch = q[0]
                if now > batch.deadline:
                    expired.append(q.popleft())
                    continue
                in_flight = self._in_flight_tp.get(tp, 0)
                if batch.attempts and in_flight:
                    continue  # retry waits until the partition's in-flight batches are answered
                if self._idempotent and in_flight >= 5:
                    continue
                ready = (
                    len(q) > 1
                    or batch.size >= acc.batch_size
                    or now - batch.created >= self._linger
                    or self._flushing
                    or self._closed
                    or acc.used >= acc.buffer_memory * 0.9
                )
                if not ready:
                    wait = batch.created + self._linger - now
                    next_delay = wait if next_delay is None else min(next_delay, wait)
                    continue
                leader = cluster.leader_for(tp)
                if leader < 0:
                    self._metadata_needed = True
                    next_delay = 0.05 if next_delay is None else min(next_delay, 0.05)
                    continue
                if self._in_flight_node.get(leader, 0) >= self._max_in_flight:
                    continue
                nodes = per_node.setdefault(leader, [])
                nodes.append(batch)
        for b in expired:
            self._complete(b, -1, -1, KafkaTimeoutError("record expired: not delivered within delivery.timeout.ms"))
        for node, batches in per_node.items():
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
                    chosen.append(b)
                    size += b.size
            for b in chosen:
                self._encode(b)
            if chosen:
                self._in_flight_node[node] = self._in_flight_node.get(node, 0) + 1
                for b in chosen:
                    self._in_flight_tp[b.tp] = self._in_flight_tp.get(b.tp, 0) + 1
                self._spawn(self._send_request(node, chosen))
        if per_node:
            return 0
        return next_delay

    def _encode(self, b: _Batch) -> None:
        if b.encoded is not None:
            return
        pid, epoch, seq = -1, -1, -1
        if self._idempotent:
            pid, epoch = self._producer_id, self._producer_epoch
            seq = self._next_seq.get(b.tp, 0)
            self._next_seq[b.tp] = (seq + len(b.records)) & 0x7FFFFFFF
            b.base_sequence = seq
        recs = b.records
        base_ts = recs[0][3]
        if _speedups is not None:
            data, count, max_ts = _speedups.encode_records(recs, base_ts)
        else:
            data, count, max_ts = _records.encode_records(recs, base_ts)
        b.encoded = _records.finish_batch(
            data, count, base_ts, max_ts, codec=self._codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq
        )

    async def _send_request(self, node: int, batches: list[_Batch]) -> None:
        requeue: list[_Batch] = []
        refresh = False
        try:
            conn = await self._cluster.connection(node)
            version = conn.version(0)
            topic_data: dict[str, list[tuple[int, bytes | memoryview]]] = {}
            for b in batches:
                assert b.encoded is not None
                topic_data.setdefault(b.tp.topic, []).append((b.tp.partition, b.encoded))
                b.attempts += 1
            corr = conn.next_correlation_id()
            parts = proto.encode_produce_request(
                version, corr, conn.client_id, self._acks, self.config["request.timeout.ms"], topic_data
            )
            fut = conn.send_frame(0, version, parts, corr, expect_response=self._acks != 0)
            if fut is None:
                for b in batches:
                    self._complete(b, -1, -1, None)
                return
            resp = await conn.wait(fut, corr)
            by_tp = {
                (str(t.name), int(p.index)): p for t in resp.responses for p in t.partition_responses
            }
            for b in batches:
                p = by_tp.get((b.tp.topic, b.tp.partition))
                if p is None:
                    requeue.append(b)
                    continue
                err = int(p.error_code)
                if err == 0:
                    self._complete(b, int(p.base_offset), _ms(getattr(p, "log_append_time", None)), None)
                elif err == 46 and self._idempotent:  # DUPLICATE_SEQUENCE_NUMBER: already written
                    self._complete(b, -1, -1, None)
                elif err in _RETRIABLE and (err != 45 or self._idempotent):
                    refresh = refresh or err in _STALE_METADATA
                    requeue.append(b)
                else:
                    msg = getattr(p, "error_message", None) or ""
                    self._complete(b, -1, -1, KafkaError(f"produce to {b.tp.topic}-{b.tp.partition} failed {msg}", err))
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("produce to node %s failed: %s", node, exc)
            requeue = [b for b in batches if not b.result.done]
            refresh = True
        except Exception as exc:
            for b in batches:
                self._complete(b, -1, -1, exc)
        finally:
            self._in_flight_node[node] -= 1
            for b in batches:
                self._in_flight_tp[b.tp] -= 1
        if requeue:
            self._requeue(requeue)
            if refresh:
                self._metadata_needed = True
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        self._wake_threadsafe()

    def _requeue(self, batches: Iterable[_Batch]) -> None:
        now = time.monotonic()
        with self._acc.lock:
            for b in batches:
                if now > b.deadline:
                    continue
                q = self._acc.queues.setdefault(b.tp, deque())
                # keep sequence order: retried batches go before newer ones
                i = 0
                while i < len(q) and q[i].encoded is not None and q[i].base_sequence < b.base_sequence:
                    i += 1
                q.insert(i, b)
        for b in batches:
            if now > b.deadline:
                self._complete(b, -1, -1, KafkaTimeoutError("record expired: not delivered within delivery.timeout.ms"))

    def _complete(self, b: _Batch, base_offset: int, log_append_time: int, exc: BaseException | None) -> None:
        if b.result.done:
            return
        nbytes = b.size - 61
        b.result.complete(base_offset, log_append_time, exc)
        acc = self._acc
        with acc.lock:
            acc.incomplete.discard(b.result)
            acc.used -= nbytes
            acc.room.notify_all()

    def _fail_all(self, exc: BaseException) -> None:
        with self._acc.lock:
            batches = [b for q in self._acc.queues.values() for b in q]
            self._acc.queues.clear()
        for b in batches:
            self._complete(b, -1, -1, exc)
