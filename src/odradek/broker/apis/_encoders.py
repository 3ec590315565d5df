"""Hand-written encoders for the hot responses: Fetch (v4-v12) and Produce (v3-v10).

They return an ``EncodedResponse`` whose parts are small ``bytes`` for the fields and, for Fetch,
the stored record bytes untouched (``bytes`` or a storage ``FileRegion`` that the server sends
with os.sendfile). Layouts follow Kafka's FetchResponse.json / ProduceResponse.json; tagged
fields are never written (all at defaults), so older clients see nothing unexpected.

Fetch, per version (non-flexible < 12, flexible ≥ 12)::

    throttle_time_ms i32 · error_code i16 (v7+) · session_id i32 (v7+) · [topic:
      name string · [partition: partition_index i32 · error_code i16 · high_watermark i64 ·
        last_stable_offset i64 · log_start_offset i64 (v5+) · aborted_transactions null ·
        preferred_read_replica i32 (v11+) · records bytes (length 0 when none) · {tags}] · {tags}] · {tags}

Produce::

    [topic: name string · [partition: index i32 · error_code i16 · base_offset i64 ·
      log_append_time_ms i64 · log_start_offset i64 (v5+) · record_errors [] (v8+) ·
      error_message nullable string (v8+) · {tags}] · {tags}] · throttle_time_ms i32 · {tags}
"""

from __future__ import annotations

import struct
from typing import Any

from odradek.broker.registry import EncodedResponse

__all__ = ["encode_fetch_response", "encode_produce_response", "uvarint"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART4 = struct.Struct(">ihqq")  # index, error, hw, lso
_PART5 = struct.Struct(">ihqqq")  # + log_start_offset
_TOP7 = struct.Struct(">ihi")  # throttle, error, session
_PRODUCE_PART = struct.Struct(
    ">ihqqq"
)  # index, error, base_offset, log_append_time, log_start_offset
_NULL_ARRAY = b"\xff\xff\xff\xff"
_ZERO32 = b"\x00\x00\x00\x00"

_uvarint_cache = [bytes([i]) for i in range(128)]


def uvarint(value: int) -> bytes:
    if value < 128:
        return _uvarint_cache[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_name_cache: dict[tuple[str, bool], bytes] = {}


def _name(name: str, flexible: bool) -> bytes:
    key = (name, flexible)
    b = _name_cache.get(key)
    if b is None:
        raw = name.encode()
        b = uvarint(len(raw) + 1) + raw if flexible else _I16.pack(len(raw)) + raw
        if len(_name_cache) < 100_000:
            _name_cache[key] = b
    return b


def encode_fetch_response(
    request: Any, results: list[tuple[str, list[tuple[int, Any, int, int, int, Any]]]]
) -> EncodedResponse:
    """``results``: [(topic, [(partition, error_code, hw, lso, log_start, records|None)])]."""
    version = int(request.__version__)
    flexible = version >= 12
    parts: list[Any] = []
    head = bytearray()
    if version >= 7:
        head += _TOP7.pack(0, 0, 0)
    else:
        head += _ZERO32
    head += uvarint(len(results) + 1) if flexible else _I32.pack(len(results))
    size = 0
    pack5 = _PART5.pack
    pack4 = _PART4.pack
    for name, partitions in results:
        head += _name(name, flexible)
        head += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for index, code, hw, lso, start, records in partitions:
            if version >= 5:
                head += pack5(index, code, hw, lso, start)
            else:
                head += pack4(index, code, hw, lso)
            head += b"\x00" if flexible else _NULL_ARRAY
            if version >= 11:
                head += b"\xff\xff\xff\xff"
            n = 0 if records is None else len(records)
            if flexible:
                head += uvarint(n + 1)
            else:
                head += _I32.pack(n)
            if n:
                parts.append(bytes(head))
                size += len(head)
                head = bytearray()
                parts.append(records)
                size += n
            if flexible:
                head += b"\x00"
        if flexible:
            head += b"\x00"
    if flexible:
        head += b"\x00"
    parts.append(bytes(head))
    size += len(head)
    return EncodedResponse(parts, size)


_single_heads: dict[tuple[str, int], bytes] = {}


def _single_head(name: str, version: int) -> bytes:
    key = (name, version)
    head = _single_heads.get(key)
    if head is None:
        flexible = version >= 9
        one = b"\x02" if flexible else _I32.pack(1)
        head = one + _name(name, flexible) + one
        if len(_single_heads) < 100_000:
            _single_heads[key] = head
    return head


def _single_tail(version: int) -> bytes:
    """After the partition's fixed fields: record_errors, error_message (v8+), tags, throttle."""
    if version >= 9:
        return b"\x01\x00\x00" + b"\x00" + _ZERO32 + b"\x00"
    if version == 8:
        return _ZERO32 + b"\xff\xff" + _ZERO32
    return _ZERO32


def encode_produce_response(
    request: Any, results: list[tuple[str, list[tuple[int, Any, int, int, int, str | None]]]]
) -> EncodedResponse:
    """``results``: [(topic, [(partition, error_code, base_offset, log_append_time_ms, log_start_offset, error_message)])]."""
    version = int(request.__version__)
    flexible = version >= 9
    if len(results) == 1 and len(results[0][1]) == 1 and version >= 5:
        # the common case: one topic, one partition, no error message
        name, ((index, code, base, lat, start, msg),) = results[0]
        if msg is None:
            head = _single_head(name, version)
            body = head + _PRODUCE_PART.pack(index, code, base, lat, start) + _single_tail(version)
            return EncodedResponse((body,), len(body))
    out = bytearray()
    out += uvarint(len(results) + 1) if flexible else _I32.pack(len(results))
    pack = _PRODUCE_PART.pack
    for name, partitions in results:
        out += _name(name, flexible)
        out += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for index, code, base, lat, start, msg in partitions:
            if version >= 5:
                out += pack(index, code, base, lat, start)
            else:
                out += pack(index, code, base, lat, 0)[:-8]
            if version >= 8:
                if flexible:
                    out += b"\x01"  # empty record_errors
                    if msg is None:
                        out += b"\x00"
                    else:
                        raw = msg.encode()
                        out += uvarint(len(raw) + 1) + raw
                    out += b"\x00"
                else:
                    out += _ZERO32
                    if msg is None:
                        out += b"\xff\xff"
                    else:
                        raw = msg.encode()
                        out += _I16.pack(len(raw)) + raw
        if flexible:
            out += b"\x00"
    out += _ZERO32
    if flexible:
        out += b"\x00"
    body = bytes(out)
    return EncodedResponse((body,), len(body))
