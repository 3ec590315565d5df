"""JoinGroup (11): join (or rejoin) a classic group; parked until the rebalance completes.

v4+ two-step join: an unknown member gets MEMBER_ID_REQUIRED (79) with a member id to come
back with. v0 has no rebalance timeout (it is the session timeout). v5+ group.instance.id
(static membership). v7+ answers protocol_type. The leader's answer lists every member's
metadata for the chosen protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator, ms
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.group_manager import JoinParams

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        JoinGroupRequest,
        JoinGroupRequestV1,
        JoinGroupRequestV2,
        JoinGroupRequestV3,
        JoinGroupRequestV4,
        JoinGroupRequestV5,
        JoinGroupRequestV6,
        JoinGroupRequestV7,
        JoinGroupRequestV8,
        JoinGroupRequestV9,
        JoinGroupResponse,
    )

__all__ = ["API", "handle"]


def _names_instance(
    request: JoinGroupRequest,
) -> TypeGuard[
    JoinGroupRequestV5
    | JoinGroupRequestV6
    | JoinGroupRequestV7
    | JoinGroupRequestV8
    | JoinGroupRequestV9
]:
    """v5+ carries the member's group.instance.id (KIP-345)."""
    return request.__version__ >= 5


def _has_rebalance_timeout(
    request: JoinGroupRequest,
) -> TypeGuard[
    JoinGroupRequestV1
    | JoinGroupRequestV2
    | JoinGroupRequestV3
    | JoinGroupRequestV4
    | JoinGroupRequestV5
    | JoinGroupRequestV6
    | JoinGroupRequestV7
    | JoinGroupRequestV8
    | JoinGroupRequestV9
]:
    """v1+ carries a rebalance timeout (v0's is the session timeout)."""
    return request.__version__ >= 1


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    types = response_types(request)
    version = int(request.__version__)
    coord = coordinator(ctx)
    session_ms = ms(request.session_timeout)
    rebalance_ms = ms(request.rebalance_timeout) if _has_rebalance_timeout(request) else -1
    if rebalance_ms < 0:
        rebalance_ms = session_ms
    params = JoinParams(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if _names_instance(request) else None,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id=ctx.header.client_id or "",
        client_host=ctx.client_host,
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    )
    result = await coord.join_group(params)
    members = tuple(
        make(types.JoinGroupResponseMember, member_id=mid, group_instance_id=iid, metadata=md)
        for mid, iid, md in result.members
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return cast(
        "JoinGroupResponse",
        make(
            types.JoinGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=code(result.error),
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=protocol_name,
            leader=result.leader_id,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=members,
        ),
    )


API = ApiSpec(
    key=11,
    name="JoinGroup",
    min_version=0,
    max_version=9,
    handler=handle,
    authorize=_authz.group(_authz.AclOperation.READ),
)
