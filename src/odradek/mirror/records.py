"""MM2's internal-topic records, byte for byte (sans-IO codec).

Kafka's ``OffsetSync``, ``Checkpoint`` and ``Heartbeat`` classes write Kafka ``Struct``s:
big-endian, ``STRING`` = int16 length + UTF-8 bytes (never null), ``INT16/32/64`` fixed width.

=============  ==========================================  ===========================================
record         key                                         value
=============  ==========================================  ===========================================
OffsetSync     topic STRING, partition INT32               upstreamOffset INT64, offset INT64
Checkpoint     group STRING, topic STRING, partition INT32 version INT16 (=0), upstreamOffset INT64,
                                                           offset INT64, metadata STRING
Heartbeat      sourceClusterAlias STRING,                  version INT16 (=0), timestamp INT64
               targetClusterAlias STRING
=============  ==========================================  ===========================================

OffsetSync keys name the *upstream* topic (in ``mm2-offset-syncs.<target>.internal``);
Checkpoint keys name the *remote* (downstream) topic (in ``<source>.checkpoints.internal``).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["Checkpoint", "Heartbeat", "OffsetSync", "RecordFormatError"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VERSION = 0


class RecordFormatError(ValueError):
    """Bytes that are not a record of the expected layout."""


def _str(s: str) -> bytes:
    b = s.encode()
    if len(b) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    return _I16.pack(len(b)) + b


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise RecordFormatError(f"truncated: needs {n} bytes at {self.pos}, has {len(self.buf) - self.pos}")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise RecordFormatError("null STRING")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"STRING is not UTF-8: {exc}") from None

    def version(self) -> int:
        v = self.i16()
        if v != _VERSION:
            raise RecordFormatError(f"unknown version {v}")
        return v


def _need(b: bytes | None, what: str) -> bytes:
    if b is None:
        raise RecordFormatError(f"null {what}")
    return b


class OffsetSync(NamedTuple):
    topic: str  # the upstream topic
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _str(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k, v = _Reader(_need(key, "key")), _Reader(_need(value, "value"))
        return cls(k.string(), k.i32(), v.i64(), v.i64())


class Checkpoint(NamedTuple):
    group: str
    topic: str  # the downstream (remote) topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _str(self.group) + _str(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return _I16.pack(_VERSION) + _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset) + _str(self.metadata)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        k, v = _Reader(_need(key, "key")), _Reader(_need(value, "value"))
        group, topic, partition = k.string(), k.string(), k.i32()
        v.version()
        return cls(group, topic, partition, v.i64(), v.i64(), v.string())


class Heartbeat(NamedTuple):
    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def key(self) -> bytes:
        return _str(self.source_cluster_alias) + _str(self.target_cluster_alias)

    def value(self) -> bytes:
        return _I16.pack(_VERSION) + _I64.pack(self.timestamp)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k, v = _Reader(_need(key, "key")), _Reader(_need(value, "value"))
        src, dst = k.string(), k.string()
        v.version()
        return cls(src, dst, v.i64())
