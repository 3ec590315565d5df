"""LeaveGroup (13): v0-v2 one member (``member_id``); v3+ a batch of members, each by member
id and/or group.instance.id (an admin may remove static members by instance id alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.state import Errors

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        LeaveGroupRequest,
        LeaveGroupRequestV0,
        LeaveGroupRequestV1,
        LeaveGroupRequestV2,
        LeaveGroupRequestV3,
        LeaveGroupRequestV4,
        LeaveGroupRequestV5,
        LeaveGroupResponse,
    )

__all__ = ["API", "handle"]


def _batched(
    request: LeaveGroupRequest,
) -> TypeGuard[LeaveGroupRequestV3 | LeaveGroupRequestV4 | LeaveGroupRequestV5]:
    """v3+ names a batch of members (KIP-345); v0-v2 one member id."""
    return request.__version__ >= 3


def _single(
    request: LeaveGroupRequest,
) -> TypeGuard[LeaveGroupRequestV0 | LeaveGroupRequestV1 | LeaveGroupRequestV2]:
    return request.__version__ < 3


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    batched = _batched(request)
    leaving: list[tuple[str, str | None]]
    if _batched(request):
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    elif _single(request):
        leaving = [(request.member_id, None)]
    else:  # pragma: no cover - every version is one or the other
        raise AssertionError(request.__version__)
    top, errors = await coord.leave_group(request.group_id, leaving)
    if not batched:
        error = top if top is not Errors.NONE else errors[0]
        return cast(
            "LeaveGroupResponse",
            make(types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=code(error)),
        )
    members = tuple(
        make(types.MemberResponse, member_id=mid, group_instance_id=iid, error_code=code(err))
        for (mid, iid), err in zip(leaving, errors, strict=True)
    )
    if top is not Errors.NONE:
        members = ()
    return cast(
        "LeaveGroupResponse",
        make(
            types.LeaveGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=code(top),
            members=members,
        ),
    )


API = ApiSpec(
    key=13,
    name="LeaveGroup",
    min_version=0,
    max_version=5,
    handler=handle,
    authorize=_authz.group(_authz.AclOperation.READ),
)
