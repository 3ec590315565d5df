"""IncrementalAlterConfigs (44): SET (0) / DELETE (1) / APPEND (2) / SUBTRACT (3) on a
topic's config overrides, applied to the live logs. APPEND/SUBTRACT work on list configs
(cleanup.policy)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._configs import alter_resources, alter_topic
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.services import BrokerServices

__all__ = ["API", "handle"]

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LIST_KEYS = {"cleanup.policy"}


async def _apply(
    services: BrokerServices, name: str, ops: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    topic = services.metadata.topic(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
    configs: dict[str, str | None] = dict(topic.configs)
    effective = services.topic_admin.topic_configs_from(topic.configs)
    seen: set[str] = set()
    for op in ops:
        key = op.name
        if key in seen:
            return ErrorCode.invalid_request, f"{key}: altered more than once"
        seen.add(key)
        if op.config_operation == SET:
            configs[key] = op.value
        elif op.config_operation == DELETE:
            configs.pop(key, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if key not in _LIST_KEYS:
                return (
                    ErrorCode.invalid_config,
                    f"{key}: APPEND/SUBTRACT only apply to list configs",
                )
            current = [v for v in (effective.get(key) or "").split(",") if v]
            values = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if op.config_operation == APPEND:
                current += [v for v in values if v not in current]
            else:
                current = [v for v in current if v not in values]
            configs[key] = ",".join(current)
        else:
            return ErrorCode.invalid_request, f"{key}: unknown operation {op.config_operation}"
    return await alter_topic(services, name, configs, validate_only)


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    responses = await alter_resources(
        request, lambda name, ops: _apply(services, name, ops, request.validate_only)
    )
    return make(
        response_types(request).IncrementalAlterConfigsResponse,
        throttle_time=NO_THROTTLE,
        responses=responses,
    )


API = ApiSpec(key=44, name="IncrementalAlterConfigs", min_version=0, max_version=1, handler=handle)
