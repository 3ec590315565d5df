"""AlterConfigs (33): replace the whole config of a resource (keys not given return to their
default): a topic's overrides (applied to the live logs), one level of dynamic broker configs
(the broker id, or "" for the cluster-wide default; persisted and applied at once), or a
group's configs. See ``_configs`` for the resources and their errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._configs import (
    BROKER,
    TOPIC,
    alter_broker,
    alter_group,
    alter_resources,
    alter_topic,
)
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import AlterConfigsRequest, AlterConfigsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    services = ctx.services

    async def alter(rtype: int, name: str, configs: Any) -> tuple[ErrorCode, str | None]:
        refused = _authz.config_refusal(ctx, _authz.AclOperation.ALTER_CONFIGS, rtype, name)
        if refused is not None:
            return refused, None
        values = {c.name: c.value for c in configs}
        if rtype == TOPIC:
            return await alter_topic(services, name, values, request.validate_only)
        if rtype == BROKER:
            return await alter_broker(services, name, values, request.validate_only)
        return await alter_group(services, name, values, request.validate_only)

    responses = await alter_resources(request, alter)
    return cast(
        "AlterConfigsResponse",
        make(
            response_types(request).AlterConfigsResponse,
            throttle_time=NO_THROTTLE,
            responses=responses,
        ),
    )


API = ApiSpec(key=33, name="AlterConfigs", min_version=0, max_version=2, handler=handle)
