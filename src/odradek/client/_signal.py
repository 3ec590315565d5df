"""A wake-up signal for one waiting task at a time, with a timeout, built on plain futures.

(Python 3.11's ``asyncio.wait_for(event.wait(), t)`` can lose a cancellation when the timeout
fires at the same moment, leaving ``close()`` hanging; plain futures and ``call_later`` cannot.)
"""

from __future__ import annotations

import asyncio

__all__ = ["Signal"]


class Signal:
    def __init__(self) -> None:
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._flag = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def clear(self) -> None:
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until set (True) or ``timeout`` seconds passed (False)."""
        if self._flag:
            return True
        loop = asyncio.get_running_loop()
        w = self._waiter = loop.create_future()
        handle = None
        if timeout is not None:
            handle = loop.call_later(max(0.0, timeout), _expire, w)
        try:
            await w
        finally:
            if handle is not None:
                handle.cancel()
            if self._waiter is w:
                self._waiter = None
        return self._flag


def _expire(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_result(None)
