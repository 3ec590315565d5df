"""The console's HTTP server closes, at stop, a connection accepted in the loop turn before."""

from __future__ import annotations

import asyncio
import gc
import socket

import pytest

from odradek.console.http import HttpServer, Request, Response

pytestmark = pytest.mark.timeout(30)


async def handler(req: Request) -> Response:
    return Response(200, b"ok", "text/plain")


async def test_a_connection_accepted_in_the_loop_turn_before_stop_sees_eof() -> None:
    """asyncio accepts in the listener's callback and builds the transport (and starts the
    connection's handler) later. A stop() scheduled in the same turn as the accept callback,
    but before it, runs first in the next turn: the connection must still be closed when
    stop() returns, without help from the cyclic garbage collector and without waiting for the
    server's idle timeout. Deterministic on selector loops: the connection waits in the listen
    backlog until the accept callback runs."""
    server = HttpServer(handler)
    port = await server.start("127.0.0.1", 0)
    loop = asyncio.get_running_loop()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # an orphaned socket must not be rescued by a lucky collection
    client = socket.create_connection(("127.0.0.1", port))  # in the backlog now
    try:
        stopping: asyncio.Future[asyncio.Task[None]] = loop.create_future()
        loop.call_soon(lambda: stopping.set_result(loop.create_task(server.stop())))
        await asyncio.wait_for(await stopping, 10)
        for _ in range(5):  # an abort closes its socket a loop turn later
            await asyncio.sleep(0)
        client.settimeout(3)
        try:
            data = client.recv(1)
        except ConnectionResetError:
            data = b""
        assert data == b"", "the connection got data instead of EOF"
    except TimeoutError:
        pytest.fail("the connection accepted just before stop() is still open after stop()")
    finally:
        client.close()
        if gc_was_enabled:
            gc.enable()
