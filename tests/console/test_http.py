"""The console's h11 server: keep-alive, bad requests, body limit, handler errors."""

from __future__ import annotations

import asyncio

import pytest

from odradek.console.http import MAX_BODY, HttpServer, Request, Response

pytestmark = pytest.mark.timeout(30)


async def handler(req: Request) -> Response:
    if req.path == "/boom":
        raise RuntimeError("boom")
    return Response(200, f"{req.method} {req.path} {sorted(req.query.items())} {len(req.body)}".encode(), "text/plain")


async def exchange(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)  # until the server closes
    writer.close()
    return data


async def test_keep_alive_two_requests_then_close() -> None:
    server = HttpServer(handler)
    port = await server.start("127.0.0.1", 0)
    try:
        raw = (
            b"GET /a?x=1 HTTP/1.1\r\nHost: t\r\n\r\n"
            b"POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
        )
        data = await exchange(port, raw)
        assert data.count(b"HTTP/1.1 200") == 2
        assert b"GET /a [('x', '1')] 0" in data and b"POST /b [] 3" in data
    finally:
        await server.stop()


async def test_malformed_request_gets_400() -> None:
    server = HttpServer(handler)
    port = await server.start("127.0.0.1", 0)
    try:
        data = await exchange(port, b"NOT HTTP\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 400")
    finally:
        await server.stop()


async def test_body_limit_and_handler_error() -> None:
    server = HttpServer(handler)
    port = await server.start("127.0.0.1", 0)
    try:
        size = MAX_BODY + 1
        head = f"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n".encode()
        data = await exchange(port, head + b"x" * size)
        assert data.startswith(b"HTTP/1.1 413")
        data = await exchange(port, b"GET /boom HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 500")
    finally:
        await server.stop()
