"""ElectLeaders (43): preferred or unclean leader election for the given partitions (all when null).

Answered by the active controller (``odradek.controller.admin``); other brokers answer
NOT_CONTROLLER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._controller_admin import controller_call

if TYPE_CHECKING:
    from odradek.protocol.api_types import ElectLeadersRequest, ElectLeadersResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    return cast(
        "ElectLeadersResponse", await controller_call(ctx, request, "elect_leaders_request")
    )


API = ApiSpec(
    key=43,
    name="ElectLeaders",
    min_version=0,
    max_version=2,
    handler=handle,
    authorize=_authz.cluster(_authz.AclOperation.ALTER, _authz.refusal),
)
