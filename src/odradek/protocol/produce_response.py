"""Hand-written Produce response encoder (v3..v10).

Produce response body (big-endian; "flexible" = v9+: compact strings/arrays with uvarint
length+1 and an empty tagged-field section after every struct)::

    responses [name string ·
               partition_responses [index int32 · error_code int16 · base_offset int64 ·
                                    log_append_time_ms int64 · log_start_offset int64 (v5+) ·
                                    record_errors [batch_index int32 ·
                                                   batch_index_error_message nullable string] (v8+) ·
                                    error_message nullable string (v8+)]]
    throttle_time_ms int32

Tagged fields (current_leader, node_endpoints in v10) are never written.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PRODUCE_VERSIONS", "ProducePartitionResponse", "encode_produce_response"]

PRODUCE_VERSIONS = range(3, 11)
"""Versions this encoder writes."""

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log start offset


@dataclass(slots=True)
class ProducePartitionResponse:
    """One partition of a Produce response (Kafka's PartitionProduceResponse)."""

    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()
    """(batch_index, message) pairs: the records that made a batch INVALID_RECORD (v8+)."""
    error_message: str | None = None


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(value: str | None, flexible: bool) -> bytes:
    """Nullable string: int16 length (-1 = null) or compact (uvarint length+1, 0 = null)."""
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def encode_produce_response(
    version: int,
    responses: Sequence[tuple[str, Sequence[ProducePartitionResponse]]],
    *,
    throttle_time_ms: int = 0,
) -> bytes:
    """Encode a Produce response body (no size prefix, no response header).

    ``responses`` holds (topic, partitions) pairs.
    """
    if version not in PRODUCE_VERSIONS:
        raise ValueError(f"Produce response version {version} is not supported by this encoder")
    flexible = version >= 9
    with_log_start = version >= 5
    with_errors = version >= 8
    out = bytearray()
    out += _uvarint(len(responses) + 1) if flexible else _I32.pack(len(responses))
    for topic, partitions in responses:
        out += _string(topic, flexible)
        out += _uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if with_log_start:
                out += _PARTITION_V5.pack(
                    p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset
                )
            else:
                out += _PARTITION_V3.pack(
                    p.index, p.error_code, p.base_offset, p.log_append_time_ms
                )
            if with_errors:
                errors = p.record_errors
                out += _uvarint(len(errors) + 1) if flexible else _I32.pack(len(errors))
                for batch_index, message in errors:
                    out += _I32.pack(batch_index)
                    out += _string(message, flexible)
                    if flexible:
                        out += b"\x00"
                out += _string(p.error_message, flexible)
            if flexible:
                out += b"\x00"  # partition tagged fields
        if flexible:
            out += b"\x00"  # topic tagged fields
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out += b"\x00"  # response tagged fields
    return bytes(out)
