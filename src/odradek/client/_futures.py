"""Delivery futures: one small object per record, one shared result per batch.

Like the Java client's ProduceRequestResult/FutureRecordMetadata: a batch completes once (base
offset and log append time, or an exception); each record's ``RecordFuture`` derives its
``RecordMetadata`` from the batch result and its index in the batch. ``RecordFuture`` works from
any thread (``result(timeout)``/``get``) and inside asyncio (``await future``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Generator
from typing import Any

from .errors import KafkaTimeoutError
from .types import RecordMetadata

__all__ = ["BatchResult", "RecordFuture"]

Callback = Callable[[RecordMetadata | None, BaseException | None], Any]


class BatchResult:
    __slots__ = ("_async_waiters", "_callbacks", "_event", "base_offset", "done", "exception", "log_append_time")

    def __init__(self) -> None:
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.exception: BaseException | None = None
        self._event: threading.Event | None = None
        self._callbacks: list[tuple[RecordFuture, Callback]] | None = None
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] | None = None

    def complete(self, base_offset: int, log_append_time: int = -1, exception: BaseException | None = None) -> None:
        if self.done:
            return
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.exception = exception
        self.done = True
        if self._event is not None:
            self._event.set()
        if self._callbacks:
            for fut, cb in self._callbacks:
                fut._run_callback(cb)
            self._callbacks = None
        if self._async_waiters:
            for loop, af in self._async_waiters:
                loop.call_soon_threadsafe(_set_async, af)
            self._async_waiters = None

    def wait(self, timeout: float | None) -> bool:
        if self.done:
            return True
        if self._event is None:
            self._event = threading.Event()
            if self.done:
                return True
        return self._event.wait(timeout)


def _set_async(af: asyncio.Future[Any]) -> None:
    if not af.done():
        af.set_result(None)


class RecordFuture:
    """The future of one produced record's ``RecordMetadata``."""

    __slots__ = ("_batch", "index", "partition", "timestamp", "topic")

    def __init__(self, batch: BatchResult, index: int, topic: str, partition: int, timestamp: int) -> None:
        self._batch = batch
        self.index = index
        self.topic = topic
        self.partition = partition
        self.timestamp = timestamp

    def done(self) -> bool:
        return self._batch.done

    def _metadata(self) -> RecordMetadata:
        b = self._batch
        offset = b.base_offset + self.index if b.base_offset >= 0 else -1
        ts = b.log_append_time if b.log_append_time >= 0 else self.timestamp
        return RecordMetadata(self.topic, self.partition, offset, ts)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Block until delivered; return its metadata or raise the delivery error."""
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError("record not delivered within the timeout")
        if self._batch.exception is not None:
            raise self._batch.exception
        return self._metadata()

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError("record not delivered within the timeout")
        return self._batch.exception

    def add_callback(self, fn: Callback) -> None:
        """``fn(metadata, exception)`` once delivered (on the client's I/O thread)."""
        b = self._batch
        if b.done:
            self._run_callback(fn)
            return
        if b._callbacks is None:
            b._callbacks = []
        b._callbacks.append((self, fn))
        if b.done:  # completed concurrently
            self._run_callback(fn)

    add_done_callback = add_callback

    def _run_callback(self, fn: Callback) -> None:
        b = self._batch
        try:
            if b.exception is not None:
                fn(None, b.exception)
            else:
                fn(self._metadata(), None)
        except Exception:  # a user callback must not break the sender
            logging.getLogger("odradek.client").exception("delivery callback raised")

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        b = self._batch
        if not b.done:
            loop = asyncio.get_running_loop()
            af = loop.create_future()
            if b._async_waiters is None:
                b._async_waiters = []
            b._async_waiters.append((loop, af))
            if b.done:
                _set_async(af)
            yield from af.__await__()
        if b.exception is not None:
            raise b.exception
        return self._metadata()
