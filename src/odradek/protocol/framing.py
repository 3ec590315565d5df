"""Kafka framing: every request and response is ``int32 size`` followed by ``size`` bytes.

:class:`FrameDecoder` splits a byte stream into frames. It is zero-copy where it can be:
when no partial frame is pending, the frames it returns are memoryviews into the very object
passed to :meth:`FrameDecoder.feed`, so a buffer holding many small pipelined requests costs
one slice per frame. Only a trailing partial frame is copied (and kept until it completes;
its chunks are joined once, when enough bytes have arrived).

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
    """

    __slots__ = ("_needed", "_pending", "_pending_size", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._pending: list[bytes] = []  # chunks of an incomplete frame (with its prefix)
        self._pending_size = 0
        self._needed = 4  # bytes the pending frame needs in total (prefix included)

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return self._pending_size

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add ``data``; return every frame it completes, in order, without the size prefix."""
        if self._pending:
            self._pending.append(bytes(data))
            self._pending_size += len(data)
            if self._pending_size < self._needed:
                return []
            data = b"".join(self._pending)
            self._pending = []
            self._pending_size = 0
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        end = len(view)
        max_size = self.max_frame_size
        unpack_from = _SIZE.unpack_from
        frames = []
        pos = 0
        while end - pos >= 4:
            (size,) = unpack_from(view, pos)
            if size < 0 or size > max_size:
                raise FrameTooLargeError(size, max_size)
            frame_end = pos + 4 + size
            if frame_end > end:
                self._needed = 4 + size
                break
            frames.append(view[pos + 4 : frame_end])
            pos = frame_end
        else:
            self._needed = 4
        if pos < end:
            rest = bytes(view[pos:])
            self._pending = [rest]
            self._pending_size = len(rest)
        return frames
