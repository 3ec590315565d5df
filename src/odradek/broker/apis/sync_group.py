"""SyncGroup (14): the leader hands in assignments; every member gets its own.

Followers are parked until the leader's assignment has been persisted (GroupMetadata record
in ``__consumer_offsets``). v5+ carries protocol type/name (checked:
INCONSISTENT_GROUP_PROTOCOL) and answers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        SyncGroupRequest,
        SyncGroupRequestV3,
        SyncGroupRequestV4,
        SyncGroupRequestV5,
        SyncGroupResponse,
    )

__all__ = ["API", "handle"]


def _names_instance(
    request: SyncGroupRequest,
) -> TypeGuard[SyncGroupRequestV3 | SyncGroupRequestV4 | SyncGroupRequestV5]:
    """v3+ carries the member's group.instance.id (KIP-345)."""
    return request.__version__ >= 3


def _names_protocol(request: SyncGroupRequest) -> TypeGuard[SyncGroupRequestV5]:
    """v5+ carries the protocol type and name (KIP-559)."""
    return request.__version__ >= 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    result = await coord.sync_group(
        request.group_id,
        int(request.generation_id),
        request.member_id,
        request.group_instance_id if _names_instance(request) else None,
        request.protocol_type if _names_protocol(request) else None,
        request.protocol_name if _names_protocol(request) else None,
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
    )
    return cast(
        "SyncGroupResponse",
        make(
            types.SyncGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=code(result.error),
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        ),
    )


API = ApiSpec(
    key=14,
    name="SyncGroup",
    min_version=0,
    max_version=5,
    handler=handle,
    authorize=_authz.group(_authz.AclOperation.READ),
)
