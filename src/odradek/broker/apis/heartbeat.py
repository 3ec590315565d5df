"""Heartbeat (12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import Any

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(request)
    coord = coordinator(ctx)
    error = await coord.heartbeat(
        request.group_id,
        int(request.generation_id),
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    return make(types.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code(error))


API = ApiSpec(key=12, name="Heartbeat", min_version=0, max_version=4, handler=handle)
