"""Forwarding a write to the registry that writes: one HTTP/1.1 request with h11 over an
asyncio connection (no thread, no blocking of the broker's event loop).

``forward(url, method, target, body, timeout_s)`` -> (status, content type, body); raises
``OSError``/``TimeoutError`` when the writer cannot be reached or answers nothing valid. An
``https`` writer is reached over TLS with ``ssl_context`` (the broker's client context: its
``ssl.truststore.*``); ``extra_headers`` go with the request (the client's ``Authorization``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from urllib.parse import urlsplit

import h11

__all__ = ["forward"]

MAX_ANSWER = 8 << 20


async def forward(
    url: str,
    method: str,
    target: str,
    body: bytes,
    content_type: str,
    timeout_s: float,
    extra_headers: list[tuple[str, str]] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[int, str, bytes]:
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80)
    context = None
    if tls:
        context = ssl_context if ssl_context is not None else ssl.create_default_context()

    async def run() -> tuple[int, str, bytes]:
        reader, writer = await asyncio.open_connection(host, port, ssl=context)
        try:
            conn = h11.Connection(h11.CLIENT)
            headers = [
                ("host", f"{host}:{port}"),
                ("content-type", content_type),
                ("content-length", str(len(body))),
                ("connection", "close"),
                *(extra_headers or []),
            ]
            writer.write(conn.send(h11.Request(method=method, target=target, headers=headers)))
            if body:
                writer.write(conn.send(h11.Data(data=body)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            status, ctype, out = 0, "", bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                    continue
                if isinstance(event, h11.Response):
                    status = event.status_code
                    for k, v in event.headers:
                        if k.lower() == b"content-type":
                            ctype = v.decode("latin-1")
                elif isinstance(event, h11.Data):
                    out += event.data
                    if len(out) > MAX_ANSWER:
                        raise OSError("answer too large")
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
            if status == 0:
                raise OSError("no answer")
            return status, ctype, bytes(out)
        except h11.ProtocolError as exc:
            raise OSError(f"bad answer: {exc}") from None
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    return await asyncio.wait_for(run(), timeout_s)
