"""The client's connect tasks outlive no owner: a connect whose caller was cancelled, then failed
(its broker stopped), has its exception retrieved even when the client is never closed (an owner
cancelled inside ``start()`` never got the client to close: the console's sampler at broker
stop), and ``close`` cancels and awaits the connects still running. A real broker process, frozen with SIGSTOP so that its listener accepts the TCP
connection but never answers ApiVersions: the connect is then certainly in flight."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client.aio import AsyncAdmin
from odradek.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def frozen_broker() -> Iterator[BrokerProcess]:
    """A started broker, then stopped (SIGSTOP); killed at teardown."""
    with BrokerProcess() as broker:
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            yield broker
        finally:
            broker.kill()


async def _until(cond: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def _loop_errors() -> tuple[list[dict[str, Any]], Callable[[], None]]:
    """Collect what the running loop would report (e.g. "Task exception was never retrieved")."""
    loop = asyncio.get_running_loop()
    old = loop.get_exception_handler()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    return seen, lambda: loop.set_exception_handler(old)


async def _owner_cancelled_then_broker_gone(broker: BrokerProcess) -> None:
    admin = AsyncAdmin({"bootstrap.servers": broker.bootstrap_servers})
    start = asyncio.ensure_future(admin.start())
    await _until(lambda: admin._cluster._connecting)
    connecting = list(admin._cluster._connecting.values())
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    broker.kill()  # its sockets are reset: the connect fails with nobody waiting
    await asyncio.wait(connecting, timeout=20)
    assert all(t.done() and not t.cancelled() for t in connecting)
    # no close(): the cancelled owner never held the client


async def _closed_while_connecting(broker: BrokerProcess) -> None:
    admin = AsyncAdmin({"bootstrap.servers": broker.bootstrap_servers})
    start = asyncio.ensure_future(admin.start())
    await _until(lambda: admin._cluster._connecting)
    connecting = list(admin._cluster._connecting.values())
    await admin.close()
    assert all(t.done() for t in connecting)
    assert not admin._cluster._connecting
    with pytest.raises((asyncio.CancelledError, ConnectionError)):
        await start


async def test_connect_failing_after_its_caller_was_cancelled(frozen_broker: BrokerProcess) -> None:
    seen, restore = _loop_errors()
    try:
        await _owner_cancelled_then_broker_gone(frozen_broker)
        gc.collect()  # the client and its tasks are garbage now: unretrieved exceptions show
    finally:
        restore()
    assert [c.get("message") for c in seen] == []


async def test_close_cancels_and_awaits_a_running_connect(frozen_broker: BrokerProcess) -> None:
    seen, restore = _loop_errors()
    try:
        await _closed_while_connecting(frozen_broker)
        gc.collect()
    finally:
        restore()
    assert [c.get("message") for c in seen] == []
