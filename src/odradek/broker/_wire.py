"""The broker's seam to the wire format: read request headers, decode bodies with kio,
encode response headers and kio bodies (framing is protocol.framing.FrameDecoder).

Everything here is sans-IO and per-(api key, version) cached so that the per-request path does
only what it must: one struct unpack for the header prefix, one kio native decode for the body.

Request header (v1 non-flexible, v2 flexible)::

    api_key i16 · api_version i16 · correlation_id i32 · client_id nullable string (i16 length)
    [v2: tagged fields (uvarint count, then tag/size/bytes)]

Response header: correlation_id i32 [v1: an empty tagged-field section, one 0x00 byte].
ApiVersions responses always use header v0.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

__all__ = [
    "RequestDecodeError",
    "VersionInfo",
    "encode_entity",
    "parse_header",
    "version_info",
]

_HDR = struct.Struct(">hhih")
_I32 = struct.Struct(">i")


class RequestDecodeError(ValueError):
    """A request header or body that does not decode: log it and close the connection."""


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """What the broker needs to decode a request and encode its response header."""

    api_key: int
    version: int
    flexible: bool
    reader: Callable[[Any, int], tuple[Any, int]]
    response_header: bytes
    """b"" for header v0, b"\\x00" (empty tagged fields) appended after correlation id for v1."""


_versions: dict[tuple[int, int], VersionInfo | None] = {}


def version_info(api_key: int, version: int) -> VersionInfo | None:
    """Decoding info for (api key, version), or None when kio does not know that version."""
    key = (api_key, version)
    try:
        return _versions[key]
    except KeyError:
        pass
    try:
        cls = load_request_schema(api_key, version)
    except Exception:
        info = None
    else:
        flexible = bool(cls.__flexible__)
        tail = b"\x00" if flexible and api_key != 18 else b""
        info = VersionInfo(api_key, version, flexible, entity_reader(cls), tail)
    _versions[key] = info
    return info


def _skip_tagged(buf: memoryview, pos: int) -> int:
    def uvarint(p: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if p >= len(buf):
                raise RequestDecodeError("truncated tagged fields")
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, p
            shift += 7
            if shift > 35:
                raise RequestDecodeError("varint too long")

    count, pos = uvarint(pos)
    for _ in range(count):
        _tag, pos = uvarint(pos)
        size, pos = uvarint(pos)
        pos += size
    if pos > len(buf):
        raise RequestDecodeError("truncated tagged fields")
    return pos


def parse_header(frame: memoryview) -> tuple[int, int, int, str | None, int]:
    """(api_key, api_version, correlation_id, client_id, offset after client_id).

    The tagged fields of header v2 are not skipped here (the caller knows if the version is
    flexible); use ``body_offset``.
    """
    if len(frame) < 10:
        raise RequestDecodeError(f"request header too short ({len(frame)} bytes)")
    api_key, version, correlation_id, n = _HDR.unpack_from(frame, 0)
    pos = 10
    client_id: str | None
    if n < 0:
        client_id = None
    else:
        end = pos + n
        if end > len(frame):
            raise RequestDecodeError("truncated client_id")
        try:
            client_id = bytes(frame[pos:end]).decode()
        except UnicodeDecodeError:
            raise RequestDecodeError("client_id is not UTF-8") from None
        pos = end
    return api_key, version, correlation_id, client_id, pos


def body_offset(frame: memoryview, pos: int, flexible: bool) -> int:
    if not flexible:
        return pos
    if pos < len(frame) and frame[pos] == 0:  # no tagged fields: the usual case
        return pos + 1
    return _skip_tagged(frame, pos)


_writers: dict[type, Callable[[Any, Any], None]] = {}


def encode_entity(entity: Any) -> bytes:
    """Encode a kio entity (response body) to bytes."""
    cls = type(entity)
    writer = _writers.get(cls)
    if writer is None:
        writer = entity_writer(cls)
        _writers[cls] = writer
    out = io.BytesIO()
    writer(out, entity)
    return out.getvalue()
