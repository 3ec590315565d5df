"""AlterPartitionReassignments (45): move partitions' replicas to other brokers, data included (KIP-455); null replicas cancel.

Answered by the active controller (``odradek.controller.admin``); other brokers answer
NOT_CONTROLLER.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._controller_admin import controller_call

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await controller_call(ctx, request, "alter_partition_reassignments_request")


API = ApiSpec(
    key=45, name="AlterPartitionReassignments", min_version=0, max_version=0, handler=handle
)
