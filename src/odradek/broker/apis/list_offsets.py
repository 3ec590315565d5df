"""ListOffsets (2): offsets by timestamp.

timestamp -2 (earliest) → log start offset; -1 (latest) → high watermark (consumers; the log
end offset for a follower); -3 (max timestamp, v7+) → offset and timestamp of the record with
the largest timestamp; -4 (earliest local) → log start offset; t ≥ 0 → the first offset whose
timestamp is ≥ t (offset -1 and timestamp -1 when there is none).
From v4 a request's current_leader_epoch (when ≥ 0) must be the partition's (older →
FENCED_LEADER_EPOCH, newer → UNKNOWN_LEADER_EPOCH). Advertised from v0, served from v1.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


def _lookup(
    broker: Any, name: str, index: int, timestamp: int, follower: bool, current_epoch: int = -1
) -> tuple[ErrorCode, int, int, int]:
    handle = broker.partition(name, index)
    if handle is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1, -1
    plog = handle.log
    epoch = handle.leader_epoch
    if current_epoch >= 0 and current_epoch != epoch:
        code = (
            ErrorCode.fenced_leader_epoch
            if current_epoch < epoch
            else ErrorCode.unknown_leader_epoch
        )
        return code, -1, -1, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return ErrorCode.none, -1, plog.log_start_offset, epoch
    if timestamp == LATEST:
        return ErrorCode.none, -1, plog.log_end_offset if follower else plog.high_watermark, epoch
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        if found is None:
            return ErrorCode.none, -1, -1, epoch
        return ErrorCode.none, found[1], found[0], epoch
    if timestamp < 0:
        return ErrorCode.invalid_request, -1, -1, -1
    found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return ErrorCode.none, -1, -1, epoch
    offset, ts = found
    return ErrorCode.none, ts, offset, epoch


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    types = response_types(request)
    follower = request.replica_id >= 0
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, ts, offset, epoch = _lookup(
                broker,
                t.name,
                p.partition_index,
                p.timestamp,
                follower,
                getattr(p, "current_leader_epoch", -1),
            )
            parts.append(
                make(
                    types.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                    old_style_offsets=(offset,) if offset >= 0 else (),
                )
            )
        topics.append(make(types.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return make(types.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = ApiSpec(
    key=2, name="ListOffsets", min_version=0, max_version=9, handler=handle, min_request_version=1
)
