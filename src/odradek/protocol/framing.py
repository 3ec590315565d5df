"""Kafka framing: every request and response is ``int32 size`` followed by ``size`` bytes.

:class:`FrameDecoder` splits a byte stream into frames. It is zero-copy where it can be:
frames lying wholly inside the object passed to :meth:`FrameDecoder.feed` are memoryviews into
it, so a buffer holding many small pipelined requests costs one slice per frame. A frame that
spans chunks is copied once, chunk by chunk, into a ``bytearray`` of its own: its memoryview is
writable and belongs to the caller.

Invariant for callers: do not mutate an object passed to ``feed`` while frames from it are in
use (asyncio's ``data_received`` hands over fresh ``bytes``, which is always safe).
"""

from __future__ import annotations

import struct

from odradek.protocol.errors import FrameTooLargeError

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "FrameDecoder", "frame"]

DEFAULT_MAX_FRAME_SIZE = 104857600
"""Kafka's socket.request.max.bytes default (100 MiB)."""

_SIZE = struct.Struct(">i")


def frame(body: bytes | bytearray | memoryview) -> bytes:
    """``body`` with its 4-byte size prefix."""
    return _SIZE.pack(len(body)) + bytes(body)


class FrameDecoder:
    """Incremental frame splitter: ``feed(data)`` returns the frames completed by ``data``.

    A size prefix below 0 or above ``max_frame_size`` raises FrameTooLargeError; the decoder
    is then unusable (the connection must be closed).

    A frame that spans chunks is gathered into a ``bytearray`` of its own (each byte copied
    once, no join at the end), so the memoryview returned for it is writable and owned by the
    caller: the broker stamps offsets into a Produce request's record batches in place and
    writes them to the log without another copy. Frames lying wholly inside one chunk are
    read-only views into that chunk.
    """

    __slots__ = ("_body", "_head", "_needed", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._head = b""  # 1-3 bytes of a size prefix not yet complete
        self._body: bytearray | None = None  # the incomplete frame's body (size known)
        self._needed = 0  # the incomplete frame's body size

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (its size prefix included)."""
        if self._body is not None:
            return 4 + len(self._body)
        return len(self._head)

    def _start(self, size: int) -> None:
        if size < 0 or size > self.max_frame_size:
            raise FrameTooLargeError(size, self.max_frame_size)
        self._body = bytearray()
        self._needed = size

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add ``data``; return every frame it completes, in order, without the size prefix."""
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        end = len(view)
        frames: list[memoryview] = []
        pos = 0
        if self._head:
            pos = 4 - len(self._head)
            head = self._head + bytes(view[:pos])
            if len(head) < 4:
                self._head = head
                return frames
            self._head = b""
            self._start(_SIZE.unpack(head)[0])
        body = self._body
        if body is not None:
            take = min(self._needed - len(body), end - pos)
            body += view[pos : pos + take]
            pos += take
            if len(body) < self._needed:
                return frames
            frames.append(memoryview(body))
            self._body = None
        max_size = self.max_frame_size
        unpack_from = _SIZE.unpack_from
        while end - pos >= 4:
            (size,) = unpack_from(view, pos)
            if size < 0 or size > max_size:
                raise FrameTooLargeError(size, max_size)
            frame_end = pos + 4 + size
            if frame_end > end:
                self._start(size)
                self._body += view[pos + 4 :]  # type: ignore[operator]
                return frames
            frames.append(view[pos + 4 : frame_end])
            pos = frame_end
        if pos < end:
            self._head = bytes(view[pos:])
        return frames
