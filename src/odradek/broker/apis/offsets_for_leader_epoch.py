"""OffsetsForLeaderEpoch (23): the end offset of a leader epoch (KIP-101, KIP-279, KIP-320).

For each partition: the largest epoch ≤ the requested one that the log knows and the offset
where it ends (the start offset of the next epoch, or the log end offset for the latest),
from ``PartitionLog.end_offset_for_epoch``; (-1, -1) when the log knows no such epoch.
Followers use it to truncate before they fetch; consumers to detect log truncation.
The partition must be led here with the request's current_leader_epoch (when ≥ 0):
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH as Kafka answers
(``ReplicaManager.leader_partition``), UNKNOWN_TOPIC_OR_PARTITION for an unknown one.
Served v0-v4: v2-v4 from kio's schemas, v0/v1 (which predate current_leader_epoch) upgraded
to v2 by ``protocol.legacy_versions``.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.services.replica_manager
    types = response_types(request)
    topics = []
    for t in request.topics:
        results = []
        for p in t.partitions:
            handle_, code = replicas.leader_partition(t.topic, p.partition, p.current_leader_epoch)
            epoch, end_offset = -1, -1
            if handle_ is not None and code is ErrorCode.none:
                epoch, end_offset = handle_.log.end_offset_for_epoch(p.leader_epoch)
            results.append(
                make(
                    types.EpochEndOffset,
                    error_code=code,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(
            make(types.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(results))
        )
    return make(types.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def error_response(request: Any, code: ErrorCode) -> Any:
    types = response_types(request)
    topics = tuple(
        make(
            types.OffsetForLeaderTopicResult,
            topic=t.topic,
            partitions=tuple(
                make(types.EpochEndOffset, error_code=code, partition=p.partition)
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return make(types.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiSpec(
    key=23,
    name="OffsetForLeaderEpoch",
    min_version=0,
    max_version=4,
    min_request_version=2,
    handler=handle,
    error_response=error_response,
)
