"""ListOffsets (2): offsets by timestamp (Kafka's ``Partition.fetchOffsetForTimestamp``).

timestamp -2 (earliest) → log start offset; -1 (latest) → the last fetchable offset; -3 (max
timestamp, v7+) → offset and timestamp of the record with the largest timestamp; -4 (earliest
local) → log start offset; t ≥ 0 → the first offset whose timestamp is ≥ t, if it is below the
last fetchable offset (else offset -1 and timestamp -1). The constants are
``odradek.protocol.offsets``'.

The last fetchable offset: for a consumer, the high watermark (isolation_level 0) or the last
stable offset (1, read_committed); for a follower (replica_id ≥ 0), the log end offset.

A leader just elected may have a high watermark below the log end offset it took its epoch at
(``Partition.leader_epoch_start_offset``): it learns the real one from its followers' next
fetches. Until then its latest offset may be below what the previous leader already gave out,
so a consumer asking for the latest offset, or for a timestamp not found below the last
fetchable offset, gets OFFSET_NOT_AVAILABLE (78, retriable), as from Kafka.

A partition this broker does not lead → NOT_LEADER_OR_FOLLOWER; from v4 a request's
current_leader_epoch (when ≥ 0) must be the partition's (older → FENCED_LEADER_EPOCH, newer →
UNKNOWN_LEADER_EPOCH): ``ReplicaManager.leader_partition``. Advertised from v0, served from v1.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.replica_manager import ReplicaManager
from odradek.protocol.offsets import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)

__all__ = ["API", "handle"]

def _lookup(
    replicas: ReplicaManager,
    name: str,
    index: int,
    timestamp: int,
    follower: bool,
    current_epoch: int = -1,
    read_committed: bool = False,
) -> tuple[ErrorCode, int, int, int]:
    handle, code = replicas.leader_partition(name, index, current_epoch)
    if handle is None or code is not ErrorCode.none:
        return code, -1, -1, -1
    plog = handle.log
    epoch = handle.leader_epoch
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return ErrorCode.none, -1, plog.log_start_offset, epoch
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        if found is None:
            return ErrorCode.none, -1, -1, epoch
        return ErrorCode.none, found[1], found[0], epoch
    if timestamp < LATEST_TIMESTAMP:
        return ErrorCode.invalid_request, -1, -1, -1
    if follower:
        last_fetchable, lagging = plog.log_end_offset, False
    else:
        hw = plog.high_watermark
        last_fetchable = handle.producer_state().last_stable_offset(hw) if read_committed else hw
        lagging = hw < handle.leader_epoch_start_offset
    if timestamp == LATEST_TIMESTAMP:
        if lagging:
            return ErrorCode.offset_not_available, -1, -1, epoch
        return ErrorCode.none, -1, last_fetchable, epoch
    found = plog.offset_for_timestamp(timestamp)
    if found is not None and found[0] < last_fetchable:
        return ErrorCode.none, found[1], found[0], epoch
    if lagging:
        return ErrorCode.offset_not_available, -1, -1, epoch
    return ErrorCode.none, -1, -1, epoch


async def handle(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.services.replica_manager
    types = response_types(request)
    follower = request.replica_id >= 0
    check_epoch = int(request.__version__) >= 4
    read_committed = getattr(request, "isolation_level", 0) == 1
    if read_committed and not follower:
        await replicas.load_producer_states(
            (t.name, p.partition_index) for t in request.topics for p in t.partitions
        )
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, ts, offset, epoch = _lookup(
                replicas,
                t.name,
                p.partition_index,
                p.timestamp,
                follower,
                p.current_leader_epoch if check_epoch else -1,
                read_committed,
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
