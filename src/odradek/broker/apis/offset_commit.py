"""OffsetCommit (8): store committed offsets (+ metadata string) in ``__consumer_offsets``.

Generation -1 with an empty member id commits for a group that only stores offsets (allowed
while the group is Empty). Members commit with their generation (Stable or
PreparingRebalance). The answer is sent after the records were written (see
odradek.coordinator.coordinator on durability). v0/v1 are advertised but not served (kio
starts at v2); v2-v4 retention_time is ignored (offsets.retention.minutes applies).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.registry import ApiSpec, RequestContext
from odradek.coordinator._api import code, coordinator
from odradek.coordinator.group_manager import OffsetCommitEntry
from odradek.coordinator.state import Errors

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(request)
    coord = coordinator(ctx)
    entries = [
        OffsetCommitEntry(
            topic.name,
            int(p.partition_index),
            int(p.committed_offset),
            int(getattr(p, "committed_leader_epoch", -1)),
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]
    if coord is None:
        errors = [Errors.COORDINATOR_NOT_AVAILABLE] * len(entries)
    else:
        errors = await coord.commit_offsets(
            request.group_id,
            int(request.generation_id_or_member_epoch),
            request.member_id,
            getattr(request, "group_instance_id", None),
            entries,
        )
    it = iter(errors)
    topics = tuple(
        make(
            types.OffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    types.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=code(next(it)),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return make(types.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


API = ApiSpec(
    key=8, name="OffsetCommit", min_version=0, max_version=9, handler=handle, min_request_version=2
)
