"""The producer's record accumulator and partitioner (Kafka's ``RecordAccumulator``).

Records wait here, per partition, in ``ProducerBatch`` queues until the sender drains them.
Appending is thread-safe (one lock), so the synchronous facade appends from the caller's
thread without a hop to the event loop. Invariants, all under ``lock``:

* ``used`` is the sum over incomplete batches of their record bytes (``size - BATCH_OVERHEAD``),
  never above ``buffer_memory`` after an append; ``release`` gives bytes back and wakes blocked
  appenders (``room``).
* ``incomplete`` maps every batch result not yet completed to its batch (queued or in flight).
* A queue's batches are in append order; only the last one, if not ``sealed`` (drained once),
  takes records. A batch is full when adding a record would pass ``batch_size`` (a batch holds
  at least one record).

Partitioning (``partitioner.class``): a keyed record goes to murmur2(key) (unless ``sticky`` or
``partitioner.ignore.keys``); ``round_robin`` cycles; otherwise the sticky partition of the
topic, which moves on (to a different random partition) when its open batch fills.
"""

from __future__ import annotations

import random
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

from .. import _bulk, _records
from .._futures import BatchResult, RecordFuture
from ..errors import KafkaError, KafkaTimeoutError, ProducerClosedError
from ..types import TopicPartition

try:  # compiled twin of murmur2
    from .. import _speedups  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # pragma: no cover - depends on the build
    _speedups = None

__all__ = ["BATCH_OVERHEAD", "RECORD_OVERHEAD", "ProducerBatch", "RecordAccumulator", "to_bytes"]

RECORD_OVERHEAD = 22  # rough per-record bytes beyond key and value (varints, attributes)
BATCH_OVERHEAD = 61  # the RecordBatch v2 header: the size of an empty batch

Record = tuple[bytes | None, bytes | None, Any, int]
"""(key, value, headers as [(str, bytes | None)] or None, timestamp in epoch ms)."""


def to_bytes(v: Any, serializer: Callable[[Any], bytes] | None) -> bytes | None:
    """A key, value or header value as the bytes sent (None stays None)."""
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


class ProducerBatch:
    """Records of one partition sent together; ``result`` completes once for all of them.

    ``size`` counts ``BATCH_OVERHEAD`` plus every record's estimated bytes. The sender sets
    ``order`` (drain order), ``base_sequence``/``epoch`` (idempotence) and ``encoded`` when it
    first drains the batch; a retry re-sends the same bytes unless a sequence reset cleared them."""

    __slots__ = (
        "ambiguous", "attempts", "base_sequence", "created", "deadline", "encoded", "epoch", "order", "records",
        "result", "sealed", "size", "tp",
    )  # fmt: skip

    def __init__(self, tp: TopicPartition, now: float, deadline: float) -> None:
        self.tp = tp
        self.records: list[Record] = []
        self.size = BATCH_OVERHEAD
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


class RecordAccumulator:
    """Per-partition queues of batches, the buffer-memory account and the partitioner.

    ``wake`` is called (from any thread) when a batch became ready to drain; ``check_send``, if
    given, runs before every append and raises when records may not be sent now (transactions).
    ``closed`` makes appends raise ProducerClosedError."""

    def __init__(
        self,
        config: dict[str, Any],
        wake: Callable[[], None],
        check_send: Callable[[], None] | None = None,
    ) -> None:
        c = config
        self.batch_size: int = c["batch.size"]
        self.buffer_memory: int = c["buffer.memory"]
        self.delivery_timeout: float = c["delivery.timeout.ms"] / 1000
        self.max_block: float = c["max.block.ms"] / 1000
        self.max_request_size: int = c["max.request.size"]
        self.key_serializer = c["key.serializer"]
        self.value_serializer = c["value.serializer"]
        self.strategy: str = c["partitioner.class"]
        self.ignore_keys: bool = c["partitioner.ignore.keys"]
        self.plain_sticky = self.strategy in ("default", "sticky", "murmur2")
        self.wake = wake
        self.check_send = check_send
        self.closed = False
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.used = 0
        self.incomplete: dict[BatchResult, ProducerBatch] = {}
        self.sticky: dict[str, int] = {}
        self.round_robin: dict[str, int] = {}
        self._tps: dict[str, list[TopicPartition]] = {}

    # -- partitioning -----------------------------------------------------------------------
    def choose_partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        strategy = self.strategy
        if strategy == "round_robin":
            p = self.round_robin.get(topic, random.randrange(num_partitions))
            self.round_robin[topic] = (p + 1) % num_partitions
            return p
        if key is not None and not self.ignore_keys and strategy != "sticky":
            return key_partition(key, num_partitions)
        sticky = self.sticky.get(topic)
        p = -1 if sticky is None else sticky
        if p < 0 or p >= num_partitions:
            p = random.randrange(num_partitions)
            self.sticky[topic] = p
        return p

    def next_sticky(self, topic: str, current: int, num_partitions: int) -> None:
        if num_partitions > 1:
            p = random.randrange(num_partitions - 1)
            self.sticky[topic] = p if p < current else p + 1

    def sticky_partition(self, topic: str, num_partitions: int) -> int:
        p = self.sticky.get(topic)
        if p is None or p >= num_partitions:
            p = self.choose_partition(topic, None, num_partitions)
        return p

    def _topic_partitions(self, topic: str, num_partitions: int) -> list[TopicPartition]:
        tps = self._tps.get(topic)
        if tps is None or len(tps) < num_partitions:
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(num_partitions)]
        return tps

    # -- appending --------------------------------------------------------------------------
    def append(
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
        """Append one record. Returns None when the buffer is full and ``block`` is False;
        with ``block`` waits up to ``max.block.ms`` for room (then KafkaTimeoutError)."""
        if self.closed:
            raise ProducerClosedError()
        if self.check_send is not None:
            self.check_send()
        # fast paths for the common types; to_bytes handles the rest
        kb = None if key is None else key if type(key) is bytes and self.key_serializer is None else to_bytes(key, self.key_serializer)
        vb = value if type(value) is bytes and self.value_serializer is None else to_bytes(value, self.value_serializer)
        hdrs = None
        size = RECORD_OVERHEAD + (0 if kb is None else len(kb)) + (0 if vb is None else len(vb))
        if headers:
            hdrs = [(k, to_bytes(v, None)) for k, v in (headers.items() if isinstance(headers, dict) else headers)]
            size += sum(len(k) + (len(v) if v else 0) + 4 for k, v in hdrs)
        if size > self.max_request_size:
            raise KafkaError(f"record of {size} bytes exceeds max.request.size", 10)
        if partition is None:
            if kb is None and self.plain_sticky:
                partition = self.sticky.get(topic)
                if partition is None or partition >= num_partitions:
                    partition = self.choose_partition(topic, kb, num_partitions)
            else:
                partition = self.choose_partition(topic, kb, num_partitions)
        elif not 0 <= partition < num_partitions:
            raise KafkaError(f"partition {partition} of topic {topic!r} does not exist", 3)
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        tps = self._tps.get(topic)
        if tps is None or len(tps) < num_partitions:
            tps = self._topic_partitions(topic, num_partitions)
        tp = tps[partition]
        wake = False
        with self.lock:
            if self.used + size > self.buffer_memory:
                if not block:
                    return None
                self._wait_for_room(size)
            self.used += size
            q = self.queues.get(tp)
            if q is None:
                q = self.queues[tp] = deque()
            batch = q[-1] if q else None
            if batch is None or batch.sealed or (batch.size + size > self.batch_size and batch.records):
                if batch is not None and not batch.sealed:
                    wake = True  # the previous batch is full
                    if kb is None and partition == self.sticky.get(topic):
                        self.next_sticky(topic, partition, num_partitions)
                now = time.monotonic()
                batch = ProducerBatch(tp, now, now + self.delivery_timeout)
                q.append(batch)
                self.incomplete[batch.result] = batch
                if len(q) == 1:
                    wake = True
            index = len(batch.records)
            batch.records.append((kb, vb, hdrs, ts))
            batch.size += size
            if batch.size >= self.batch_size:
                wake = True
        if wake:
            self.wake()
        return RecordFuture(batch.result, index, topic, partition, ts)

    def _wait_for_room(self, nbytes: int) -> None:
        """Under ``lock``: wait until ``nbytes`` more fit in ``buffer.memory`` (max.block.ms)."""
        deadline = time.monotonic() + self.max_block
        while self.used + nbytes > self.buffer_memory:
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                raise KafkaTimeoutError("buffer.memory is full: not freed within max.block.ms")
            self.room.wait(left)

    def slices(self, sizes: list[int]) -> list[tuple[int, int]]:
        """Row ranges of a ``send_batch`` call of at most a quarter of ``buffer.memory`` each."""
        return _bulk.slices(sizes, max(1, self.buffer_memory // 4))

    def prepare_columns(
        self,
        topic: str,
        values: Any,
        keys: Any,
        partitions: Any,
        headers: Any,
        timestamps: Any,
        num_partitions: int,
    ) -> tuple[list[Any], list[int], list[int] | None, list[bool] | None, list[int]]:
        """The rows of a ``send_batch`` call (see ``_bulk.prepare_rows``), keyed rows placed."""
        return _bulk.prepare_rows(
            topic, values, keys, partitions, headers, timestamps, num_partitions,
            key_serializer=self.key_serializer, value_serializer=self.value_serializer,
            to_bytes=to_bytes, record_overhead=RECORD_OVERHEAD, max_request_size=self.max_request_size,
            strategy=self.strategy, ignore_keys=self.ignore_keys,
            choose=self.choose_partition, key_partition=key_partition,
        )

    def append_rows(
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
        ``append`` row by row. None when the buffer is full and ``block`` is False."""
        if self.closed:
            raise ProducerClosedError()
        if self.check_send is not None:
            self.check_send()
        tps = self._topic_partitions(topic, num_partitions)
        bs = self.batch_size
        cum = list(accumulate(sizes[lo:hi], initial=0))
        total = cum[-1]
        segments: list[_bulk.Segment] = []
        wake = False

        def open_batch(tp: TopicPartition) -> tuple[deque[ProducerBatch], ProducerBatch | None]:
            q = self.queues.get(tp)
            if q is None:
                q = self.queues[tp] = deque()
            return q, (q[-1] if q and not q[-1].sealed else None)

        def new_batch(q: deque[ProducerBatch], tp: TopicPartition) -> ProducerBatch:
            nonlocal wake
            now = time.monotonic()
            b = ProducerBatch(tp, now, now + self.delivery_timeout)
            q.append(b)
            self.incomplete[b.result] = b
            if len(q) == 1:
                wake = True
            return b

        def put(b: ProducerBatch, rows: Sequence[int], chunk: list[Any], nbytes: int, p: int) -> None:
            nonlocal wake
            segments.append((b.result, len(b.records), p, rows))
            b.records.extend(chunk)
            b.size += nbytes
            if b.size >= bs:
                wake = True

        with self.lock:
            if self.used + total > self.buffer_memory:
                if not block:
                    return None
                self._wait_for_room(total)
            self.used += total
            if parts is None:
                # every row to the sticky partition: fill its open batch, then on overflow the
                # overflowing row starts a new batch there and the sticky partition moves on
                i = lo
                while i < hi:
                    p = self.sticky_partition(topic, num_partitions)
                    tp = tps[p]
                    q, b = open_batch(tp)
                    only_one = False
                    if b is None:
                        b = new_batch(q, tp)
                    elif b.records and b.size + sizes[i] > bs:
                        wake = True
                        self.next_sticky(topic, p, num_partitions)
                        only_one = self.sticky.get(topic) != p
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
                # resolve sticky rows by simulating append's batch fills, then fill per partition;
                # the simulation only matters when a row may use or move the sticky partition
                fill: dict[int, int] = {}
                resolved = parts[lo:hi]
                simulate = -1 in resolved or (topic in self.sticky and any(null_key[lo:hi]))
                for k in range(hi - lo) if simulate else ():
                    i = lo + k
                    p = resolved[k]
                    if p < 0:
                        p = resolved[k] = self.sticky_partition(topic, num_partitions)
                    f = fill.get(p)
                    if f is None:  # size of the open batch, -1: none
                        b0 = open_batch(tps[p])[1]
                        f = -1 if b0 is None else b0.size
                    if f < 0:
                        f = BATCH_OVERHEAD
                    elif f > BATCH_OVERHEAD and f + sizes[i] > bs:  # full: a new batch (sticky moves on)
                        if null_key[i] and p == self.sticky.get(topic):
                            self.next_sticky(topic, p, num_partitions)
                        f = BATCH_OVERHEAD
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
            self.wake()
        return segments

    # -- taking batches out -----------------------------------------------------------------
    def requeue(self, batches: Sequence[ProducerBatch], now: float) -> list[ProducerBatch]:
        """Put batches back at the head of their queues, in drain order (before newer ones);
        return those past their delivery deadline instead (not requeued)."""
        late: list[ProducerBatch] = []
        with self.lock:
            for b in batches:
                if b.result.done:
                    continue
                if now >= b.deadline:
                    late.append(b)
                    continue
                q = self.queues.setdefault(b.tp, deque())
                i = 0
                while i < len(q) and 0 <= q[i].order < b.order:
                    i += 1
                q.insert(i, b)
        return late

    def complete(self, b: ProducerBatch, base_offset: int, log_append_time: int, exc: BaseException | None) -> None:
        """Complete ``b`` (once) and give its bytes back to the buffer."""
        if b.result.done:
            return
        nbytes = b.size - BATCH_OVERHEAD
        b.result.complete(base_offset, log_append_time, exc)
        with self.lock:
            self.incomplete.pop(b.result, None)
            self.used -= nbytes
            self.room.notify_all()

    def take_queued(self) -> list[ProducerBatch]:
        """Empty every queue; return the batches that were in them (not those in flight)."""
        with self.lock:
            batches = [b for q in self.queues.values() for b in q]
            for q in self.queues.values():
                q.clear()
        return batches

    def take_incomplete(self) -> list[ProducerBatch]:
        """Empty every queue; return every batch not yet completed (queued or in flight)."""
        with self.lock:
            batches = list(self.incomplete.values())
            self.queues.clear()
        return batches

    def pending_results(self) -> list[BatchResult]:
        with self.lock:
            return list(self.incomplete)

    def has_incomplete(self) -> bool:
        with self.lock:
            return bool(self.incomplete)

    def batches_of(self, results: Sequence[BatchResult]) -> list[ProducerBatch | None]:
        with self.lock:
            return [self.incomplete.get(r) for r in results]


def key_partition(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition of a keyed record: murmur2(key) mod partitions."""
    if _speedups is not None:
        return (_speedups.murmur2(key) & 0x7FFFFFFF) % num_partitions
    return _records.murmur2_partition(key, num_partitions)
