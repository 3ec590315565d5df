"""Columnar bulk append for the producer: ``send_batch`` takes whole columns.

Columns are pyarrow arrays (``Array``/``ChunkedArray``; string columns are sent UTF-8, binary as
is) or Python sequences, all of one length ``n``:

* ``values`` (required) and ``keys``: bytes/str/None per row (or anything the producer's
  ``value.serializer``/``key.serializer`` takes);
* ``partitions``: int or None per row (None: the partitioner chooses, exactly as ``send``);
* ``headers``: per row None or a list of ``(str, bytes)`` / a dict / Arrow's
  ``list<struct<key: string, value: binary>>`` rows (``{"key": ..., "value": ...}``);
* ``timestamps``: epoch ms (int or None: now) per row.

Invariant (tested): ``send_batch(topic, values, keys, partitions, headers, timestamps)`` puts
the same record tuples ``(key, value, headers, timestamp)`` into the same partitions, in the same
order and the same accumulator batches, as calling ``send`` for each row in turn would (the
sticky partitioner's state included), so the encoded batches — built by the same compiled
``encode_records`` or its pure-Python twin when the sender drains them — are byte-identical,
and idempotent sequences, retries and ordering are the producer's usual ones. What is saved is
the per-row Python call, size accounting, lock round trip and ``RecordFuture``: one
``BulkFuture`` covers the whole call.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections.abc import Callable, Generator, Sequence
from itertools import accumulate
from typing import Any

from ._futures import BatchResult
from .errors import KafkaError, KafkaTimeoutError
from .types import RecordMetadata

__all__ = ["BulkFuture", "Segment", "column_bytes", "column_headers", "column_ints", "prepare_rows", "slices"]

Segment = tuple[BatchResult, int, int, Sequence[int]]
"""(batch result, index of the first row in the batch, partition, input row numbers in batch order)."""


def _is_arrow(col: Any) -> bool:
    return hasattr(col, "to_pylist") and hasattr(col, "type")


def column_bytes(
    col: Any,
    serializer: Callable[[Any], bytes] | None,
    to_bytes: Callable[[Any, Any], bytes | None],
) -> list[Any]:
    """A key/value column as a list of ``bytes | None`` (what ``send`` would make of each row)."""
    if _is_arrow(col):
        # lazy: pyarrow (~26 MB RSS) only for Arrow columns
        import pyarrow as pa

        t = col.type
        if serializer is None and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            col = col.cast(pa.large_binary() if pa.types.is_large_string(t) else pa.binary())
        if serializer is None and (
            pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)
        ):
            return col.to_pylist()  # type: ignore[no-any-return,unused-ignore]  # bytes/None already
        col = col.to_pylist()
    if serializer is None:
        return [v if v is None or type(v) is bytes else to_bytes(v, None) for v in col]
    return [None if v is None else serializer(v) for v in col]


def column_headers(col: Any, to_bytes: Callable[[Any, Any], bytes | None]) -> list[Any]:
    """A headers column as a list of ``list[(str, bytes | None)] | None`` per row."""
    if _is_arrow(col):
        col = col.to_pylist()
    out: list[Any] = []
    for h in col:
        if not h:
            out.append(None)
        elif isinstance(h, dict):
            out.append([(k, to_bytes(v, None)) for k, v in h.items()])
        else:
            out.append(
                [
                    (e["key"], to_bytes(e["value"], None))
                    if isinstance(e, dict)
                    else (e[0], to_bytes(e[1], None))
                    for e in h
                ]
            )
    return out


def column_ints(col: Any) -> list[Any]:
    """A partitions/timestamps column as a list of ``int | None`` (Arrow timestamps as epoch ms)."""
    if _is_arrow(col):
        # lazy: pyarrow (~26 MB RSS) only for Arrow columns
        import pyarrow as pa

        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("ms", tz=col.type.tz)).cast(pa.int64())
        values: list[Any] = col.to_pylist()
        return values
    return list(col)


def slices(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """Cut rows of ``sizes`` bytes into ranges ``(lo, hi)`` of at most ``limit`` bytes each
    (at least one row per range), appended one range at a time."""
    cum = list(accumulate(sizes, initial=0))
    out: list[tuple[int, int]] = []
    lo, n = 0, len(sizes)
    while lo < n:
        hi = max(lo + 1, bisect_right(cum, cum[lo] + limit) - 1)
        out.append((lo, hi))
        lo = hi
    return out


def prepare_rows(
    topic: str,
    values: Any,
    keys: Any,
    partitions: Any,
    headers: Any,
    timestamps: Any,
    num_partitions: int,
    *,
    key_serializer: Callable[[Any], bytes] | None,
    value_serializer: Callable[[Any], bytes] | None,
    to_bytes: Callable[[Any, Any], bytes | None],
    record_overhead: int,
    max_request_size: int,
    strategy: str,
    ignore_keys: bool,
    choose: Callable[[str, bytes | None, int], int],
    key_partition: Callable[[bytes, int], int],
) -> tuple[list[Any], list[int], list[int] | None, list[bool] | None, list[int]]:
    """Rows of a ``send_batch`` call: (record tuples, sizes, partition per row or None when
    every row goes to the sticky partition, null key per row, timestamps).

    Partition -1: chosen by the sticky partitioner at append time (as ``send`` does for a
    null key, or any key under ``sticky``/``partitioner.ignore.keys``); ``choose`` places
    round-robin rows, ``key_partition`` keyed ones. Validates sizes and explicit partitions
    before anything is appended."""
    vals = column_bytes(values, value_serializer, to_bytes)
    n = len(vals)
    ks = None if keys is None else column_bytes(keys, key_serializer, to_bytes)
    hs = None if headers is None else column_headers(headers, to_bytes)
    ps = None if partitions is None else column_ints(partitions)
    ts_in = None if timestamps is None else column_ints(timestamps)
    for name, col in (("keys", ks), ("partitions", ps), ("headers", hs), ("timestamps", ts_in)):
        if col is not None and len(col) != n:
            raise ValueError(f"send_batch: {name} has {len(col)} rows, values has {n}")
    now = time.time_ns() // 1_000_000
    tss = [now] * n if ts_in is None else [now if t is None else t for t in ts_in]
    o = record_overhead
    if ks is None:
        sizes = [o if v is None else o + len(v) for v in vals]
    else:
        sizes = [o + (0 if k is None else len(k)) + (0 if v is None else len(v)) for k, v in zip(ks, vals, strict=True)]
    if hs is not None:
        for i, h in enumerate(hs):
            if h:
                sizes[i] += sum(len(k) + (len(v) if v else 0) + 4 for k, v in h)
    if n and max(sizes) > max_request_size:
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
    nokeys = ks is None or all(k is None for k in ks)
    if ps is None and nokeys and strategy != "round_robin":
        return recs, sizes, None, None, tss
    parts = [-1] * n if ps is None else [-1 if p is None else int(p) for p in ps]
    for p in parts:
        if not -1 <= p < num_partitions:
            raise KafkaError(f"partition {p} of topic {topic!r} does not exist", 3)
    null_key = [True] * n if ks is None else [k is None for k in ks]
    use_keys = not ignore_keys and strategy not in ("sticky", "round_robin")
    for i in range(n):
        if parts[i] >= 0:
            continue
        if strategy == "round_robin":
            parts[i] = choose(topic, None, num_partitions)
        elif use_keys and not null_key[i]:
            parts[i] = key_partition(recs[i][0], num_partitions)
    return recs, sizes, parts, null_key, tss


class BulkFuture:
    """The future of one ``send_batch`` call: done when every batch holding its rows is.

    ``result(timeout)`` returns the rows' ``RecordMetadata`` in input order (or raises the first
    delivery error); ``exception(timeout)`` returns that error or None; ``await`` works too.
    ``partitions`` lists the partition of every row (input order) without waiting.
    """

    __slots__ = ("_n", "_segments", "_timestamps", "topic")

    def __init__(
        self, topic: str, n: int, segments: list[Segment], timestamps: Sequence[int]
    ) -> None:
        self.topic = topic
        self._n = n
        self._segments = segments
        self._timestamps = timestamps

    def __len__(self) -> int:
        return self._n

    @property
    def partitions(self) -> list[int]:
        out = [0] * self._n
        for _r, _i, p, rows in self._segments:
            for row in rows:
                out[row] = p
        return out

    def done(self) -> bool:
        return all(s[0].done for s in self._segments)

    def _wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for r, _i, _p, _rows in self._segments:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not r.wait(left):
                raise KafkaTimeoutError("records not delivered within the timeout")

    def _error(self) -> BaseException | None:
        for r, _i, _p, _rows in self._segments:
            if r.exception is not None:
                return r.exception
        return None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error()

    def _metadata(self) -> list[RecordMetadata]:
        out: list[Any] = [None] * self._n
        ts = self._timestamps
        topic = self.topic
        for r, first, p, rows in self._segments:
            base = r.base_offset
            lat = r.log_append_time
            for k, row in enumerate(rows):
                off = base + first + k if base >= 0 else -1
                out[row] = RecordMetadata(topic, p, off, lat if lat >= 0 else ts[row])
        return out

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        self._wait(timeout)
        exc = self._error()
        if exc is not None:
            raise exc
        return self._metadata()

    get = result

    def __await__(self) -> Generator[Any, None, list[RecordMetadata]]:
        for r, _i, _p, _rows in self._segments:
            if r.done:
                continue
            loop = asyncio.get_running_loop()
            af = loop.create_future()
            if r._async_waiters is None:
                r._async_waiters = []
            r._async_waiters.append((loop, af))
            if r.done and not af.done():
                af.set_result(None)
            yield from af.__await__()
        exc = self._error()
        if exc is not None:
            raise exc
        return self._metadata()
