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
from collections.abc import Callable, Generator, Sequence
from typing import Any

from ._futures import BatchResult
from .errors import KafkaTimeoutError
from .types import RecordMetadata

__all__ = ["BulkFuture", "Segment", "column_bytes", "column_headers", "column_ints"]

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
        return col.to_pylist()
    return list(col)


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
