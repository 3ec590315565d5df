"""A Fetch < v4 response is down-converted as the socket drains, never ahead of it.

KafkaConnection writes a LazyDownConversion part chunk by chunk; when the transport says its
buffer is full (pause_writing, as asyncio's transports do above the high-water mark) the
conversion stops, later responses wait behind it in order, and the connection is not read
until everything drained. The transport here is a stand-in for asyncio's (a buffer counter
that calls pause_writing / resume_writing like the real one); the connection is the real one.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.connection import KafkaConnection
from odradek.protocol.legacy_records import LazyDownConversion
from odradek.protocol.records import build_batch

HIGH = 256 * 1024
CHUNK = 64 * 1024


class BufferTransport:
    """Counts unsent bytes; pause_writing above HIGH, resume_writing when drained."""

    def __init__(self) -> None:
        self.protocol: Any = None
        self.buffered = 0
        self.sent = bytearray()
        self.pending: list[bytes] = []
        self.writing_paused = False
        self.reading = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def write(self, data: Any) -> None:
        data = bytes(data)
        self.pending.append(data)
        self.buffered += len(data)
        if self.buffered > HIGH and not self.writing_paused:
            self.writing_paused = True
            self.protocol.pause_writing()

    def writelines(self, parts: Any) -> None:
        for part in parts:
            self.write(part)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def drain(self) -> None:
        """The peer read everything buffered."""
        for data in self.pending:
            self.sent += data
        self.pending.clear()
        self.buffered = 0
        if self.writing_paused:
            self.writing_paused = False
            self.protocol.resume_writing()

    def abort(self) -> None:
        raise AssertionError("the connection was aborted")


class Owner:
    registry: dict[int, Any] = {}
    metrics = None
    routes: dict[Any, Any] = {}
    stopping = False
    services: Any = None
    max_request_bytes = 1 << 20

    def register(self, conn: KafkaConnection) -> int:
        return 1

    def unregister(self, connection_id: int) -> None:
        pass


class CountingSource:
    """v2 batches read through ``read(position, size)``, remembering how far was read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.furthest = 0

    def __call__(self, position: int, size: int) -> bytes:
        self.furthest = max(self.furthest, position + size)
        return self.data[position : position + size]


def _v2_batches(count: int) -> bytes:
    out = []
    for b in range(count):
        rows = [(None, bytes([b]) * 1000, (), 1_700_000_000_000) for _ in range(16)]
        out.append(build_batch(rows, base_offset=b * 16))
    return b"".join(out)


def test_conversion_follows_the_socket_and_keeps_response_order() -> None:
    data = _v2_batches(160)  # 2.6 MB of v2 batches, ~16 KB each
    source = CountingSource(data)
    lazy = LazyDownConversion(source, len(data), 1, 0, chunk_bytes=CHUNK)
    expected = b"".join(LazyDownConversion(data, len(data), 1, 0, chunk_bytes=CHUNK).chunks())
    assert len(expected) == len(lazy) > 9 * HIGH

    transport = BufferTransport()
    conn = KafkaConnection(Owner())  # type: ignore[arg-type]
    transport.protocol = conn
    conn.connection_made(transport)  # type: ignore[arg-type]

    conn._write([b"HEAD", lazy, b"NEXT"])
    assert transport.writing_paused and not transport.reading
    conn._write([b"LATER"])  # another response: queued behind the stream
    drains = 0
    while transport.writing_paused:
        # the conversion never runs ahead of the socket by more than the buffer + a chunk
        assert source.furthest <= len(transport.sent) + HIGH + 2 * CHUNK
        assert not transport.reading
        transport.drain()
        drains += 1
        assert drains < 1000
    transport.drain()
    assert drains > 5
    assert bytes(transport.sent) == b"HEAD" + expected + b"NEXT" + b"LATER"
    assert transport.reading
    conn._write([b"AFTER"])  # nothing queued any more: written at once
    assert transport.pending == [b"AFTER"]
