"""Kafka's unsigned varints and tagged-field sections, shared by the hand-written codecs.

uvarint: 7 bits a byte, least significant group first, high bit set on every byte but the last
(compact lengths are written as length + 1, 0 meaning null). A tagged-field section is a uvarint
count, then per field a uvarint tag, a uvarint size and that many bytes.
"""

from __future__ import annotations

__all__ = ["read_uvarint", "skip_tagged_fields", "uvarint"]

_SMALL_UVARINTS = [bytes((i,)) for i in range(128)]


def uvarint(value: int) -> bytes:
    """The encoding of ``value`` (>= 0); one- to three-byte values without a loop."""
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it); ValueError when truncated or longer than 5 bytes."""
    result = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise ValueError("truncated unsigned varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("unsigned varint is too long")


def skip_tagged_fields(data: bytes | bytearray | memoryview, pos: int) -> int:
    """Skip a tagged-field section at ``pos``; return the position after it (ValueError if bad)."""
    if pos < len(data) and data[pos] == 0:  # no tagged fields: the usual case
        return pos + 1
    count, pos = read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        pos += size
        if pos > len(data):
            raise ValueError("truncated tagged field")
    return pos
