"""AlterPartition (56), from a partition leader, to the active controller: shrink or expand the
ISR (KIP-497). Versions 2-3 (topics by id; v3 carries the new ISR members' broker epochs).

The active controller decides in its event loop (``odradek.controller.alter_partition``);
any other broker, and a broker outside a cluster, answers NOT_CONTROLLER so that the leader
finds the new controller and retries.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import AlterPartitionRequest, AlterPartitionResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
    cluster = ctx.services.cluster
    controller = None if cluster is None else cluster.controller
    if controller is not None and controller.is_active:
        return await asyncio.wrap_future(controller.alter_partition_request(request))
    types = response_types(request)
    return cast(
        "AlterPartitionResponse",
        make(
            types.AlterPartitionResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.not_controller,
            topics=(),
        ),
    )


API = ApiSpec(
    key=56,
    name="AlterPartition",
    min_version=2,
    max_version=3,
    handler=handle,
    authorize=_authz.cluster_action(),
)
