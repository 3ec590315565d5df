"""DeleteGroups (42): delete Empty groups and their offsets (tombstones in
``__consumer_offsets``). Unknown group: GROUP_ID_NOT_FOUND; group with members:
NON_EMPTY_GROUP."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import DeleteGroupsRequest, DeleteGroupsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    types = response_types(request)
    coord = coordinator(ctx)
    names = list(request.groups_names)
    # with an authorizer: DELETE on each group, else GROUP_AUTHORIZATION_FAILED
    denied = _authz.denied(ctx, _authz.AclOperation.DELETE, _authz.ResourceType.GROUP, names)
    deleted = iter(await coord.delete_groups([g for g in names if g not in denied]))
    errors = [30 if g in denied else next(deleted) for g in names]
    results = tuple(
        make(types.DeletableGroupResult, group_id=g, error_code=code(e))
        for g, e in zip(names, errors, strict=True)
    )
    return cast(
        "DeleteGroupsResponse",
        make(types.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=results),
    )


API = ApiSpec(key=42, name="DeleteGroups", min_version=0, max_version=2, handler=handle)
