"""The broker's Kafka listener: its listening socket and the connections it accepted.

Lifecycle, as ``Broker`` drives it: ``bind()`` (the port is known, e.g. for the broker's
registration and FindCoordinator, but nothing is accepted yet), ``start_serving()`` once the
coordinators have loaded their state; at stop ``stop_accepting()`` (``odradek.listener.
close_listener``: no accepted socket is orphaned), ``abort_connections()``, ``wait_closed()``.
A failed start calls ``close_now()``.

The connections register themselves (``register`` / ``unregister``, called by
``KafkaConnection``); the listener knows them only as things that can be aborted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from odradek.listener import close_listener

__all__ = ["KafkaListener"]


class _Connection(Protocol):
    def abort(self, reason: str | None) -> None: ...


class Servers(Protocol):
    """What ``bind`` is handed: one or several listening sockets served and closed as one
    (``asyncio.Server``, or ``endpoints.ListenerGroup`` for one socket per listener)."""

    @property
    def sockets(self) -> tuple[Any, ...]: ...

    async def start_serving(self) -> None: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


C = TypeVar("C", bound=_Connection)


class KafkaListener(Generic[C]):
    """``host`` and ``port`` of the first listener (0: an ephemeral port, read ``bound_port``
    after ``bind()``)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.bound_port = port
        self._server: Servers | None = None
        self._connections: dict[int, C] = {}
        self._next_connection_id = 0

    async def bind(self, bind_servers: Callable[[], Awaitable[Servers]]) -> int:
        """Bind and listen through ``bind_servers`` (its sockets not accepting yet); returns
        the first socket's port."""
        self._server = await bind_servers()
        sockets = self._server.sockets
        if sockets:
            self.bound_port = sockets[0].getsockname()[1]
        return self.bound_port

    async def start_serving(self) -> None:
        assert self._server is not None, "bind() first"
        await self._server.start_serving()

    # -- the connections -----------------------------------------------------------------------

    def register(self, conn: C) -> int:
        """A new connection; returns its id (1, 2, ...)."""
        self._next_connection_id += 1
        self._connections[self._next_connection_id] = conn
        return self._next_connection_id

    def unregister(self, connection_id: int) -> None:
        self._connections.pop(connection_id, None)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def connections(self) -> list[C]:
        """The connections open now (a copy)."""
        return list(self._connections.values())

    # -- stop ------------------------------------------------------------------------------------

    async def stop_accepting(self) -> None:
        """Close the listening socket; every connection accepted until then has registered (or
        been refused, when its owner is stopping) when this returns. Call it before the first
        suspension point of a stop, so that no accept happens after the stop began."""
        if self._server is not None:
            await close_listener(self._server)

    def abort_connections(self) -> None:
        """Abort, not close, every connection: a client that stopped reading must not keep its
        socket (and the broker's stop) waiting for its write buffer to drain."""
        for conn in self.connections():
            conn.abort(None)

    async def wait_closed(self, timeout_s: float = 2.0) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout_s)

    def close_now(self) -> None:
        """A start that failed: close the listening socket (nothing was accepted)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
