"""AlterConfigs (33): replace a topic's config overrides (keys not given return to the
default), applied to the live logs. Broker configs are static here: INVALID_REQUEST."""

from __future__ import annotations

from typing import Any

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._configs import alter_resources, alter_topic
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    responses = await alter_resources(
        request,
        lambda name, configs: alter_topic(
            services, name, {c.name: c.value for c in configs}, request.validate_only
        ),
    )
    return make(
        response_types(request).AlterConfigsResponse,
        throttle_time=NO_THROTTLE,
        responses=responses,
    )


API = ApiSpec(key=33, name="AlterConfigs", min_version=0, max_version=2, handler=handle)
