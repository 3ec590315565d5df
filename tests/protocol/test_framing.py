"""FrameDecoder: splitting a byte stream into frames, limits, zero-copy."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import FrameTooLargeError, ProtocolError
from odradek.protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, frame


@settings(max_examples=100, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=200), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=10),
)
def test_any_chunking_yields_the_same_frames(bodies: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(b) for b in bodies)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for start, end in itertools.pairwise(points):
        out.extend(bytes(f) for f in decoder.feed(stream[start:end]))
    assert out == bodies
    assert decoder.buffered == 0


def test_frames_are_views_into_the_fed_buffer() -> None:
    data = frame(b"abc") + frame(b"defg") + frame(b"")
    frames = FrameDecoder().feed(data)
    assert [bytes(f) for f in frames] == [b"abc", b"defg", b""]
    assert all(f.obj is data for f in frames)


def test_partial_frame_is_kept() -> None:
    decoder = FrameDecoder()
    data = frame(b"x" * 1000)
    assert decoder.feed(data[:2]) == []
    assert decoder.feed(data[2:500]) == []
    assert decoder.buffered == 500
    frames = decoder.feed(data[500:] + frame(b"y")[:3])
    assert [bytes(f) for f in frames] == [b"x" * 1000]
    assert decoder.buffered == 3
    assert [bytes(f) for f in decoder.feed(frame(b"y")[3:])] == [b"y"]


@pytest.mark.parametrize("size", [-1, -(2**31), 101, 2**31 - 1])
def test_bad_sizes_raise(size: int) -> None:
    decoder = FrameDecoder(max_frame_size=100)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(frame(b"ok") + struct.pack(">i", size))
    assert info.value.size == size
    assert isinstance(info.value, ProtocolError)


def test_limit_is_inclusive_and_default() -> None:
    assert FrameDecoder().max_frame_size == DEFAULT_MAX_FRAME_SIZE == 104857600
    decoder = FrameDecoder(max_frame_size=3)
    assert [bytes(f) for f in decoder.feed(frame(b"abc"))] == [b"abc"]


def test_bytearray_and_memoryview_input() -> None:
    decoder = FrameDecoder()
    data = bytearray(frame(b"one") + frame(b"two"))
    assert [bytes(f) for f in decoder.feed(memoryview(data))] == [b"one", b"two"]
    assert [bytes(f) for f in decoder.feed(data)] == [b"one", b"two"]


def test_frame_spanning_chunks_is_writable_and_owned() -> None:
    body = bytes(range(256)) * 40
    data = frame(body) + frame(b"next")
    decoder = FrameDecoder()
    got: list[memoryview] = []
    for i in range(0, len(data), 1000):  # the size prefix of the second frame is split too
        got += decoder.feed(data[i : i + 1000])
    assert [bytes(f) for f in got] == [body, b"next"]
    assert not got[0].readonly  # gathered into its own bytearray: the caller may stamp it
    assert decoder.buffered == 0


def test_split_size_prefix_then_empty_frame() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.buffered == 2
    assert [bytes(f) for f in decoder.feed(b"\x00\x00" + frame(b"x"))] == [b"", b"x"]
    small = FrameDecoder(10)
    assert small.feed(b"\x00\x00\x00") == []
    with pytest.raises(FrameTooLargeError):
        small.feed(b"\x0b")  # the split prefix says 11 > 10
