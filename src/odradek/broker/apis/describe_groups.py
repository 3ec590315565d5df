"""DescribeGroups (15): state, protocol and members of groups.

An unknown group is described as Dead with no members (error NONE), as Kafka does below v6.
Member metadata and assignments are given only for Stable groups. authorized_operations is
INT32_MIN unless requested (kafka-python fails on -1); there are no ACLs, so when requested
every group operation is allowed: READ, DELETE, DESCRIBE, and DESCRIBE_CONFIGS, ALTER_CONFIGS
when groups have configs (``GroupConfigManager.enabled``, as Kafka 4.0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import (
    AUTHORIZED_OPERATIONS_NOT_REQUESTED,
    GROUP_OPERATIONS,
    GROUP_OPERATIONS_WITH_CONFIGS,
    code,
    coordinator,
)
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        DescribeGroupsRequest,
        DescribeGroupsRequestV3,
        DescribeGroupsRequestV4,
        DescribeGroupsRequestV5,
        DescribeGroupsResponse,
    )

__all__ = ["API", "handle"]


def _may_ask_operations(
    request: DescribeGroupsRequest,
) -> TypeGuard[DescribeGroupsRequestV3 | DescribeGroupsRequestV4 | DescribeGroupsRequestV5]:
    """v3+ may ask for the groups' authorized operations (KIP-430)."""
    return request.__version__ >= 3


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    wanted = list(request.groups)
    # with an authorizer: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED
    denied = _authz.denied(ctx, _authz.AclOperation.DESCRIBE, _authz.ResourceType.GROUP, wanted)
    described = coord.describe_groups([g for g in wanted if g not in denied])
    every_op = (
        GROUP_OPERATIONS_WITH_CONFIGS if ctx.services.group_configs.enabled else GROUP_OPERATIONS
    )
    asked = _may_ask_operations(request) and request.include_authorized_operations
    ops = every_op if asked else AUTHORIZED_OPERATIONS_NOT_REQUESTED
    groups = tuple(
        make(
            types.DescribedGroup,
            error_code=code(error),
            group_id=s.group_id,
            group_state=s.state,
            protocol_type=s.protocol_type,
            protocol_data=s.protocol_data,
            members=tuple(
                make(
                    types.DescribedGroupMember,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in s.members
            ),
            authorized_operations=(
                _authz.authorized_operations(ctx, _authz.ResourceType.GROUP, s.group_id, ops)
                if asked
                else ops
            ),
        )
        for error, s in described
    )
    if denied:
        refused = {
            g: make(
                types.DescribedGroup,
                error_code=ErrorCode.group_authorization_failed,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=AUTHORIZED_OPERATIONS_NOT_REQUESTED,
            )
            for g in denied
        }
        allowed = iter(groups)
        groups = tuple(refused[g] if g in refused else next(allowed) for g in wanted)
    return cast(
        "DescribeGroupsResponse",
        make(types.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=groups),
    )


API = ApiSpec(key=15, name="DescribeGroups", min_version=0, max_version=5, handler=handle)
