"""Hand-written Produce request encoder (v3..v9) that does not copy record bytes.

The client's hot path: a Produce request is returned as a list of buffers (size prefix,
header and field bytes, and every partition's record batches as given) for
``transport.writelines``, so the batches are never joined into one frame. The decoding
direction (the broker's) is :mod:`odradek.protocol.produce_request`; the cold request
encoders are kio's, through :func:`odradek.protocol.messages.encode_request`.

Frame (big-endian; "flexible" = v9+: compact strings/arrays/bytes with uvarint length+1 and
an empty tagged-field section after every struct)::

    size int32 · request header v1 (v2 when flexible, see odradek.protocol.headers) ·
    transactional_id nullable string (null unless transactional) · acks int16 · timeout_ms int32 ·
    topic_data [name string ·
                partition_data [index int32 · records bytes]]

v10+ (not written here) only add tagged fields; v3 is the first with record batch v2.
"""

from __future__ import annotations

import struct

from odradek.protocol._primitives import uvarint
from odradek.protocol.headers import encode_request_header

__all__ = ["PRODUCE_ENCODER_VERSIONS", "encode_produce_request"]

PRODUCE_API_KEY = 0
PRODUCE_ENCODER_VERSIONS = range(3, 10)
"""Produce versions :func:`encode_produce_request` writes (v9 is the first flexible one)."""

_ACKS_TIMEOUT = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def encode_produce_request(
    version: int,
    correlation_id: int,
    client_id: str | None,
    acks: int,
    timeout_ms: int,
    topic_data: dict[str, list[tuple[int, bytes | memoryview]]],
    transactional_id: str | None = None,
) -> list[bytes | memoryview]:
    """Produce request ``version`` as a list of buffers whose first 4 bytes are the size
    prefix; each partition's records (``topic_data``: topic -> [(partition, batches)]) is
    one element of the list, not copied. ``transactional_id``: set by a transactional
    producer (the broker verifies its batches with the transaction coordinator). ValueError
    for a version outside v3..v9."""
    if version not in PRODUCE_ENCODER_VERSIONS:
        raise ValueError(f"Produce v{version} is not written by this encoder (v3..v9)")
    flexible = version >= 9
    parts: list[bytes | memoryview] = []
    cur = bytearray(encode_request_header(PRODUCE_API_KEY, version, correlation_id, client_id))
    if transactional_id is None:
        cur += b"\x00" if flexible else b"\xff\xff"  # transactional_id: null
    else:
        tid = transactional_id.encode()
        cur += uvarint(len(tid) + 1) + tid if flexible else _I16.pack(len(tid)) + tid
    cur += _ACKS_TIMEOUT.pack(acks, timeout_ms)
    cur += uvarint(len(topic_data) + 1) if flexible else _I32.pack(len(topic_data))
    for topic, partitions in topic_data.items():
        name = topic.encode()
        if flexible:
            cur += uvarint(len(name) + 1) + name + uvarint(len(partitions) + 1)
        else:
            cur += _I16.pack(len(name)) + name + _I32.pack(len(partitions))
        for index, records in partitions:
            cur += _I32.pack(index)
            n = len(records)
            cur += uvarint(n + 1) if flexible else _I32.pack(n)
            parts.append(bytes(cur))
            parts.append(records)
            cur = bytearray(b"\x00" if flexible else b"")  # partition tagged fields
        if flexible:
            cur += b"\x00"  # topic tagged fields
    if flexible:
        cur += b"\x00"  # request tagged fields
    parts.append(bytes(cur))
    parts.insert(0, _I32.pack(sum(len(p) for p in parts)))
    return parts
