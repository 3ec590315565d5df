"""A small HTTP/1.1 server on the running asyncio event loop, with h11 doing the protocol.

Why h11 and not aiohttp or another framework: the console serves a handful of routes to a few
browsers and a Prometheus scraper, and it shares the broker's event loop, so the server must be
small, never block, and add little memory. h11 is a pure-Python, sans-I/O HTTP/1.1 state machine
(the same design the broker's protocol layer follows) of about 2,000 lines with no dependencies;
the I/O here is an asyncio stream per connection. aiohttp or uvicorn+starlette would add several
MB of RSS and their own loops, workers and settings for no gain at this scale.

Rules: keep-alive; request bodies up to ``MAX_BODY`` bytes (413 beyond); a connection idle for
``IDLE_TIMEOUT_S`` is closed; a malformed request gets 400 and the connection is closed; a handler
exception gets 500. ``Handler`` is ``async (Request) -> Response``.

TLS: ``start(host, port, ssl_context=ctx)`` serves HTTPS (the handshake is asyncio's; one that does
not finish in ``TLS_HANDSHAKE_TIMEOUT_S`` is dropped). ``Request.client`` is the peer's address
(what the authorizer is told as the host).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import h11

from odradek.listener import close_listener

__all__ = ["Handler", "HttpServer", "Request", "Response"]

log = logging.getLogger("odradek.console")

MAX_BODY = 1 << 20
IDLE_TIMEOUT_S = 60.0
TLS_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    client: str = ""
    """The peer's IP address ("" when unknown)."""

    def cookies(self) -> dict[str, str]:
        """The ``Cookie`` header's name=value pairs."""
        out: dict[str, str] = {}
        for item in self.headers.get("cookie", "").split(";"):
            name, sep, value = item.strip().partition("=")
            if sep and name:
                out[name] = value
        return out

    def form(self) -> dict[str, str]:
        """An application/x-www-form-urlencoded body (last value of each key)."""
        return {k: v[-1] for k, v in parse_qs(self.body.decode("utf-8", "replace")).items()}


@dataclass(slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[Request], Awaitable[Response]]


class HttpServer:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(
        self, host: str, port: int, ssl_context: ssl.SSLContext | None = None
    ) -> int:
        """Listen on host:port (HTTPS with ``ssl_context``); returns the bound port."""
        self._server = await asyncio.start_server(
            self._serve,
            host or None,
            port,
            reuse_address=True,
            ssl=ssl_context,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if ssl_context is not None else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        # every connection accepted so far has its transport now: those being served are
        # aborted here, those whose _serve has not run yet abort themselves there
        await close_listener(server)
        for writer in list(self._writers):
            writer.transport.abort()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._server is None:  # accepted just before stop(), served only after it
            writer.transport.abort()
            return
        self._writers.add(writer)
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, reader, client)
                if request is None:
                    break
                if isinstance(request, Response):
                    await self._send(conn, writer, request, close=True)
                    break
                try:
                    response = await self.handler(request)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("console: %s %s failed", request.method, request.path)
                    response = Response(500, b"internal error\n", "text/plain; charset=utf-8")
                await self._send(conn, writer, response)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    break
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, client: str = ""
    ) -> Request | Response | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return Response(exc.error_status_hint, b"bad request\n", "text/plain")
            if event is h11.NEED_DATA:
                data = await asyncio.wait_for(reader.read(65536), IDLE_TIMEOUT_S)
                conn.receive_data(data)  # b"" marks end of stream
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return Response(413, b"request body too large\n", "text/plain")
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                target = head.target.decode("ascii", "replace")
                parts = urlsplit(target)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                headers = {k.decode().lower(): v.decode("latin-1") for k, v in head.headers}
                return Request(
                    head.method.decode(), parts.path, query, headers, bytes(body), client
                )

    async def _send(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        response: Response,
        close: bool = False,
    ) -> None:
        headers = [
            ("content-type", response.content_type),
            ("content-length", str(len(response.body))),
            *response.headers,
        ]
        if not any(k == "cache-control" for k, _v in response.headers):
            headers.append(("cache-control", "no-store"))
        if close:
            headers.append(("connection", "close"))
        if conn.our_state is not h11.SEND_RESPONSE:
            # the request line itself was bad: h11 has no request to answer, write it by hand
            head = f"HTTP/1.1 {response.status} Error\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in headers
            )
            writer.write(head.encode("latin-1") + b"\r\n" + response.body)
            await writer.drain()
            return
        writer.write(conn.send(h11.Response(status_code=response.status, headers=headers)))
        if response.body:
            writer.write(conn.send(h11.Data(data=response.body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
