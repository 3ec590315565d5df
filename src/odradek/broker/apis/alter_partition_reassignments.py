"""AlterPartitionReassignments (45): move partitions' replicas to other brokers, data included (KIP-455); null replicas cancel.

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
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    )

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    return cast(
        "AlterPartitionReassignmentsResponse",
        await controller_call(ctx, request, "alter_partition_reassignments_request"),
    )


API = ApiSpec(
    key=45,
    name="AlterPartitionReassignments",
    min_version=0,
    max_version=0,
    handler=handle,
    authorize=_authz.cluster(_authz.AclOperation.ALTER, _authz.refusal),
)
