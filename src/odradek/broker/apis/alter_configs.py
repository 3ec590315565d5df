"""AlterConfigs (33): replace a topic's config overrides (keys not given return to the
default), applied to the live logs. Broker configs are static here: INVALID_REQUEST."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.apis._configs import BROKER, TOPIC, alter_topic
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.registry import ApiSpec, RequestContext

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    types = response_types(request)
    out = []
    for res in request.resources:
        if res.resource_type == TOPIC:
            code, message = alter_topic(
                broker,
                res.resource_name,
                {c.name: c.value for c in res.configs},
                request.validate_only,
            )
        elif res.resource_type == BROKER:
            code, message = (
                ErrorCode.invalid_request,
                "broker configs are static in odradek; restart with --set",
            )
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"unsupported resource type {res.resource_type}",
            )
        out.append(
            make(
                types.AlterConfigsResourceResponse,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return make(types.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(out))


API = ApiSpec(key=33, name="AlterConfigs", min_version=0, max_version=2, handler=handle)
