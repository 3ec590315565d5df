"""ListPartitionReassignments (46): the reassignments in progress.

Answered by the active controller (``odradek.controller.admin``); other brokers answer
NOT_CONTROLLER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._controller_admin import controller_call

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    return cast(
        "ListPartitionReassignmentsResponse",
        await controller_call(ctx, request, "list_partition_reassignments_request"),
    )


API = ApiSpec(
    key=46,
    name="ListPartitionReassignments",
    min_version=0,
    max_version=0,
    handler=handle,
    authorize=_authz.cluster(_authz.AclOperation.DESCRIBE, _authz.refusal),
)
