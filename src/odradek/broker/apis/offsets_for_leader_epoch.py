"""OffsetsForLeaderEpoch (23): the end offset of a leader epoch (KIP-101, KIP-279, KIP-320).

For each partition: the largest epoch ≤ the requested one that the log knows and the offset
where it ends (the start offset of the next epoch, or the log end offset for the latest),
from ``PartitionLog.end_offset_for_epoch``; (-1, -1) when the log knows no such epoch.
Followers use it to truncate before they fetch; consumers to detect log truncation.
The partition must be led here with the request's current_leader_epoch (when ≥ 0):
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH as Kafka answers
(``Partition.last_offset_for_leader_epoch`` through the replica manager),
UNKNOWN_TOPIC_OR_PARTITION for an unknown one.
Served v0-v4: v2-v4 from kio's schemas, v0/v1 (which predate current_leader_epoch) upgraded
to v2 by ``protocol.legacy_versions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]

if TYPE_CHECKING:
    # Only for the checker: importing every kio version costs the broker's start-up (the
    # one a request uses is imported when it is first decoded).
    from kio.schema.offset_for_leader_epoch.v2.request import (
        OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV2,
    )
    from kio.schema.offset_for_leader_epoch.v2.response import (
        OffsetForLeaderEpochResponse as OffsetForLeaderEpochResponseV2,
    )
    from kio.schema.offset_for_leader_epoch.v3.request import (
        OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV3,
    )
    from kio.schema.offset_for_leader_epoch.v3.response import (
        OffsetForLeaderEpochResponse as OffsetForLeaderEpochResponseV3,
    )
    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV4,
    )
    from kio.schema.offset_for_leader_epoch.v4.response import (
        OffsetForLeaderEpochResponse as OffsetForLeaderEpochResponseV4,
    )

    AnyOffsetForLeaderEpochRequest = (
        OffsetForLeaderEpochRequestV2
        | OffsetForLeaderEpochRequestV3
        | OffsetForLeaderEpochRequestV4
    )
    AnyOffsetForLeaderEpochResponse = (
        OffsetForLeaderEpochResponseV2
        | OffsetForLeaderEpochResponseV3
        | OffsetForLeaderEpochResponseV4
    )


async def handle(
    ctx: RequestContext, request: AnyOffsetForLeaderEpochRequest
) -> AnyOffsetForLeaderEpochResponse:
    replicas = ctx.services.replica_manager
    types = response_types(request)
    topics = []
    # with an authorizer (Kafka): a follower needs CLUSTER_ACTION, a client DESCRIBE per topic
    names: list[str] = [t.topic for t in request.topics]
    if getattr(request, "replica_id", -1) >= 0:
        follower_ok = _authz.cluster_allowed(ctx, _authz.AclOperation.CLUSTER_ACTION)
        denied: frozenset[str] = frozenset() if follower_ok else frozenset(names)
    else:
        denied = _authz.denied(ctx, _authz.AclOperation.DESCRIBE, _authz.ResourceType.TOPIC, names)
    for t in request.topics:
        results = []
        for p in t.partitions:
            if t.topic in denied:
                code, epoch, end_offset = ErrorCode.topic_authorization_failed, -1, -1
            else:
                code, epoch, end_offset = replicas.last_offset_for_leader_epoch(
                    t.topic, p.partition, p.current_leader_epoch, p.leader_epoch
                )
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
    response: AnyOffsetForLeaderEpochResponse = make(
        types.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)
    )
    return response


def error_response(
    request: AnyOffsetForLeaderEpochRequest, code: ErrorCode
) -> AnyOffsetForLeaderEpochResponse:
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
    response: AnyOffsetForLeaderEpochResponse = make(
        types.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=topics
    )
    return response


API = ApiSpec(
    key=23,
    name="OffsetForLeaderEpoch",
    min_version=0,
    max_version=4,
    min_request_version=2,
    handler=handle,
    error_response=error_response,
)
