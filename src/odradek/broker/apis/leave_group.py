"""LeaveGroup (13): v0-v2 one member (``member_id``); v3+ a batch of members, each by member
id and/or group.instance.id (an admin may remove static members by instance id alone)."""

from __future__ import annotations

from typing import Any

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.state import Errors

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(request)
    coord = coordinator(ctx)
    batched = hasattr(request, "members")
    if batched:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    top, errors = await coord.leave_group(request.group_id, leaving)
    if not batched:
        error = top if top is not Errors.NONE else errors[0]
        return make(types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=code(error))
    members = tuple(
        make(types.MemberResponse, member_id=mid, group_instance_id=iid, error_code=code(err))
        for (mid, iid), err in zip(leaving, errors, strict=True)
    )
    if top is not Errors.NONE:
        members = ()
    return make(
        types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=code(top), members=members
    )


API = ApiSpec(key=13, name="LeaveGroup", min_version=0, max_version=5, handler=handle)
