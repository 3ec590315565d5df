"""DeleteRecords (21, v0-v2): move partitions' log start offsets forward (Kafka's
``AdminClient.deleteRecords``).

Per partition, as Kafka's ``Partition.deleteRecordsOnLeader``:

* the requested offset -1 means the high watermark; any other negative offset, or an offset
  above the high watermark → OFFSET_OUT_OF_RANGE;
* a partition this broker does not lead → NOT_LEADER_OR_FOLLOWER, an unknown one →
  UNKNOWN_TOPIC_OR_PARTITION; an internal topic → INVALID_TOPIC_EXCEPTION; a topic whose
  ``cleanup.policy`` lacks ``delete`` → POLICY_VIOLATION;
* otherwise the log start offset moves up (never down) to the offset and the answer's
  ``low_watermark`` is the new log start offset.

Reads below the new start fail with OFFSET_OUT_OF_RANGE from then on and ListOffsets
earliest answers it. The segments wholly below it are deleted at once, the producer state
forgets batches below it, and the log-start-offset-checkpoint is written before the answer
(so the start survives a restart, even after a crash). A failed partition gets
low_watermark -1. With replication Kafka also waits until every follower's log start
offset reached the new start; here the leader's answer is immediate.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.services import BrokerServices
from odradek.storage import OffsetOutOfRangeError

if TYPE_CHECKING:
    from odradek.protocol.api_types import DeleteRecordsRequest, DeleteRecordsResponse

__all__ = ["API", "HIGH_WATERMARK", "handle"]

log = logging.getLogger("odradek.broker")

HIGH_WATERMARK = -1
"""The requested offset that means "up to the high watermark"."""


def _delete(
    services: BrokerServices, topic: str, partition: int, offset: int, now_ms: int
) -> tuple[ErrorCode, int, bool]:
    """(error, low watermark, moved) for one partition."""
    meta = services.metadata.topic(topic)
    if meta is not None and meta.internal:
        return ErrorCode.invalid_topic_exception, -1, False
    handle, code = services.replica_manager.leader_partition(topic, partition)
    if handle is None or code is not ErrorCode.none:
        return code, -1, False
    plog = handle.log
    if not handle.config.delete_enabled:
        return ErrorCode.policy_violation, -1, False
    target = plog.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        return ErrorCode.offset_out_of_range, -1, False
    try:
        moved = plog.increment_log_start_offset(target)
    except OffsetOutOfRangeError:
        return ErrorCode.offset_out_of_range, -1, False
    if moved:
        plog.delete_segments_below_log_start(now_ms)
        state = handle.loaded_producer_state()
        if state is not None:
            state.truncate_before(plog.log_start_offset)
        log.info("%s-%d: records below %d deleted", topic, partition, plog.log_start_offset)
    return ErrorCode.none, plog.log_start_offset, moved


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    services = ctx.services
    types = response_types(request)
    now_ms = services.clock.now_ms()
    any_moved = False
    topics = []
    # with an authorizer: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
    denied = _authz.denied(
        ctx, _authz.AclOperation.DELETE, _authz.ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            if t.name in denied:
                code, low, moved = ErrorCode.topic_authorization_failed, -1, False
            else:
                code, low, moved = _delete(
                    services, t.name, int(p.partition_index), int(p.offset), now_ms
                )
            any_moved |= moved
            partitions.append(
                make(
                    types.DeleteRecordsPartitionResult,
                    partition_index=p.partition_index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        topics.append(
            make(types.DeleteRecordsTopicResult, name=t.name, partitions=tuple(partitions))
        )
    if any_moved:
        log_manager = services.replica_manager.log_manager
        await asyncio.get_running_loop().run_in_executor(
            None, log_manager.checkpoint_log_start_offsets
        )
    return cast(
        "DeleteRecordsResponse",
        make(types.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)),
    )


API = ApiSpec(key=21, name="DeleteRecords", min_version=0, max_version=2, handler=handle)
