"""Heartbeat (12): keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        HeartbeatRequest,
        HeartbeatRequestV3,
        HeartbeatRequestV4,
        HeartbeatResponse,
    )

__all__ = ["API", "handle"]


def _names_instance(
    request: HeartbeatRequest,
) -> TypeGuard[HeartbeatRequestV3 | HeartbeatRequestV4]:
    """v3+ carries the member's group.instance.id (KIP-345)."""
    return request.__version__ >= 3


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    error = await coord.heartbeat(
        request.group_id,
        int(request.generation_id),
        request.member_id,
        request.group_instance_id if _names_instance(request) else None,
    )
    return cast(
        "HeartbeatResponse",
        make(types.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=code(error)),
    )


API = ApiSpec(
    key=12,
    name="Heartbeat",
    min_version=0,
    max_version=4,
    handler=handle,
    authorize=_authz.group(_authz.AclOperation.READ),
)
