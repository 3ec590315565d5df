"""Hand-written Fetch response encoder (v4..v17) that passes record bytes through untouched.

Fetch response body (big-endian; "flexible" = v12+: compact strings/arrays, uvarint lengths
+1, a tagged-field section after every struct, empty unless said below)::

    throttle_time_ms int32
    error_code int16                      (v7+)
    session_id int32                      (v7+)
    responses [topic string (v4-v12) | topic_id uuid (v13+: 16 bytes, KIP-516) ·
               partitions [partition_index int32 · error_code int16 · high_watermark int64 ·
                           last_stable_offset int64 · log_start_offset int64 (v5+) ·
                           aborted_transactions nullable [producer_id int64 · first_offset int64] ·
                           preferred_read_replica int32 (v11+) · records nullable bytes]]

Tagged fields, each only when set: a partition's ``diverging_epoch`` (tag 0: epoch int32 ·
end_offset int64 · tagged fields; a fetcher whose last fetched epoch diverges from the
leader's log, KIP-320); from v16 a partition's ``current_leader`` (tag 1: leader_id int32 ·
leader_epoch int32 · tagged fields) and the response's ``node_endpoints`` (tag 0: compact
array of node_id int32 · host compact string · port int32 · rack compact nullable string ·
tagged fields), KIP-951's leader discovery for a partition answered NOT_LEADER_OR_FOLLOWER
or FENCED_LEADER_EPOCH. ``current_leader`` is not written below v16 and snapshot_id never:
older librdkafka fails on tagged fields it does not expect.

``records`` of a partition is any object with ``__len__`` (bytes, memoryview, or a storage
``FileRegion``): it becomes one element of the returned parts, never copied or inspected.
None is written as empty records (length 0), as Kafka does.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from odradek.protocol._primitives import uvarint

__all__ = ["FETCH_VERSIONS", "FetchPartitionResponse", "NodeEndpoint", "encode_fetch_response"]

FETCH_VERSIONS = range(4, 18)
"""Versions this encoder writes."""

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_TOP_V7 = struct.Struct(">ihi")  # throttle, error_code, session_id
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log start offset
_ABORTED = struct.Struct(">qq")
_NULL_ARRAY = b"\xff\xff\xff\xff"


class FetchPartitionResponse(NamedTuple):
    """One partition of a Fetch response; ``records`` passes through as-is."""

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    """(producer_id, first_offset) pairs; None (the default) is written as a null array."""
    preferred_read_replica: int = -1
    diverging_epoch: tuple[int, int] | None = None
    """(epoch, end offset) for a fetcher to truncate to (written in v12+), else None."""
    current_leader: tuple[int, int] | None = None
    """(leader id, leader epoch) the client should fetch from (written in v16+), else None."""


NodeEndpoint = tuple[int, str, int, "str | None"]
"""(node_id, host, port, rack) of a broker named by a ``current_leader`` (v16+)."""


_DIVERGING = struct.Struct(">iqb")  # epoch, end offset, empty tagged fields
_DIVERGING_TAG = uvarint(0) + uvarint(_DIVERGING.size)  # tag 0, its size
_LEADER = struct.Struct(">iib")  # leader id, leader epoch, empty tagged fields
_LEADER_TAG = uvarint(1) + uvarint(_LEADER.size)  # tag 1, its size


def _string(value: str) -> bytes:
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def _node_endpoints(nodes: Sequence[NodeEndpoint]) -> bytes:
    """The response's tagged fields holding ``node_endpoints`` (tag 0)."""
    body = bytearray(uvarint(len(nodes) + 1))
    for node_id, host, port, rack in nodes:
        body += _I32.pack(node_id)
        body += _string(host)
        body += _I32.pack(port)
        body += b"\x00" if rack is None else _string(rack)
        body += b"\x00"
    return b"\x01" + uvarint(0) + uvarint(len(body)) + bytes(body)


def encode_fetch_response(
    version: int,
    responses: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionResponse]]],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> tuple[list[Any], int]:
    """Encode a Fetch response body (no size prefix, no response header).

    ``responses`` holds (topic, partitions) pairs: the topic's name up to v12, its id (a
    ``uuid.UUID``) from v13. ``node_endpoints`` is written from v16 when not empty. Returns ``(parts, size)``: bytes chunks
    interleaved with each partition's ``records`` object (the very object passed in), and
    the body's total size — what ``odradek.broker.registry.EncodedResponse`` holds.
    """
    if version not in FETCH_VERSIONS:
        raise ValueError(f"Fetch response version {version} is not supported by this encoder")
    flexible = version >= 12
    parts: list[Any] = []
    size = 0
    out = bytearray()
    if version >= 7:
        out += _TOP_V7.pack(throttle_time_ms, error_code, session_id)
    else:
        out += _I32.pack(throttle_time_ms)
    partition_struct = _PARTITION_V5 if version >= 5 else _PARTITION_V4
    with_log_start = version >= 5
    with_replica = version >= 11
    by_id = version >= 13
    with_leader = version >= 16
    out += uvarint(len(responses) + 1) if flexible else _I32.pack(len(responses))
    for topic, partitions in responses:
        if by_id:
            assert isinstance(topic, uuid.UUID)
            out += topic.bytes
            out += uvarint(len(partitions) + 1)
        elif flexible:
            name = str(topic).encode()
            out += uvarint(len(name) + 1)
            out += name
            out += uvarint(len(partitions) + 1)
        else:
            name = str(topic).encode()
            out += _I16.pack(len(name))
            out += name
            out += _I32.pack(len(partitions))
        for p in partitions:
            if with_log_start:
                out += partition_struct.pack(
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            else:
                out += partition_struct.pack(
                    p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                )
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else _NULL_ARRAY
            else:
                out += uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out += b"\x00"
            if with_replica:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            length = 0 if records is None else len(records)
            out += uvarint(length + 1) if flexible else _I32.pack(length)
            if length:
                parts.append(bytes(out))
                size += len(out)
                parts.append(records)
                size += length
                out = bytearray()
            if flexible:
                diverging = p.diverging_epoch
                leader = p.current_leader if with_leader else None
                if diverging is None and leader is None:
                    out += b"\x00"  # partition tagged fields
                else:
                    out += uvarint((diverging is not None) + (leader is not None))
                    if diverging is not None:
                        out += _DIVERGING_TAG
                        out += _DIVERGING.pack(diverging[0], diverging[1], 0)
                    if leader is not None:
                        out += _LEADER_TAG
                        out += _LEADER.pack(leader[0], leader[1], 0)
        if flexible:
            out += b"\x00"  # topic tagged fields
    if with_leader and node_endpoints:
        out += _node_endpoints(node_endpoints)
    elif flexible:
        out += b"\x00"  # response tagged fields
    if out:
        parts.append(bytes(out))
        size += len(out)
    return parts, size
