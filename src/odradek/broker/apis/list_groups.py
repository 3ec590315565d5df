"""ListGroups (16): every group of this coordinator; v4+ filter by state, v5+ by type
("classic" is the only type served)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        ListGroupsRequest,
        ListGroupsRequestV4,
        ListGroupsRequestV5,
        ListGroupsResponse,
    )

__all__ = ["API", "handle"]


def _filters_states(
    request: ListGroupsRequest,
) -> TypeGuard[ListGroupsRequestV4 | ListGroupsRequestV5]:
    """v4+ may filter by group state (KIP-518)."""
    return request.__version__ >= 4


def _filters_types(request: ListGroupsRequest) -> TypeGuard[ListGroupsRequestV5]:
    """v5+ may filter by group type (KIP-848)."""
    return request.__version__ >= 5


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    error, groups = coord.list_groups(
        tuple(request.states_filter) if _filters_states(request) else (),
        tuple(request.types_filter) if _filters_types(request) else (),
    )
    # with an authorizer (Kafka): DESCRIBE on the cluster lists all, else the describable groups
    everything = _authz.cluster_allowed(ctx, _authz.AclOperation.DESCRIBE)

    def listable(group_id: str) -> bool:
        return everything or _authz.allowed(
            ctx, _authz.AclOperation.DESCRIBE, _authz.ResourceType.GROUP, group_id
        )

    listed = tuple(
        make(
            types.ListedGroup,
            group_id=gid,
            protocol_type=ptype,
            group_state=state,
            group_type=gtype,
        )
        for gid, ptype, state, gtype in groups
        if listable(gid)
    )
    return cast(
        "ListGroupsResponse",
        make(
            types.ListGroupsResponse,
            throttle_time=NO_THROTTLE,
            error_code=code(error),
            groups=listed,
        ),
    )


API = ApiSpec(key=16, name="ListGroups", min_version=0, max_version=5, handler=handle)
