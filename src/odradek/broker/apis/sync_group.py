"""SyncGroup (14): the leader hands in assignments; every member gets its own.

Followers are parked until the leader's assignment has been persisted (GroupMetadata record
in ``__consumer_offsets``). v5+ carries protocol type/name (checked:
INCONSISTENT_GROUP_PROTOCOL) and answers them.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(request)
    coord = coordinator(ctx)
    result = await coord.sync_group(
        request.group_id,
        int(request.generation_id),
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
    )
    return make(
        types.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=code(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


API = ApiSpec(key=14, name="SyncGroup", min_version=0, max_version=5, handler=handle)
