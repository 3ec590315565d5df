"""IncrementalAlterConfigs (44): SET (0) / DELETE (1) / APPEND (2) / SUBTRACT (3) on a
topic's overrides, one level of dynamic broker configs (the broker id, or "" for the
cluster-wide default), a group's configs, a client-metrics subscription (CLIENT_METRICS,
KIP-714), or logger levels (BROKER_LOGGER: SET / DELETE). APPEND/SUBTRACT work on list configs
(``cleanup.policy``, ``log.cleanup.policy``); their base is the current value of the
resource's own level, else the default, as in Kafka. A key altered twice is INVALID_REQUEST."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._configs import (
    BROKER,
    BROKER_LOGGER,
    GROUP,
    TOPIC,
    alter_broker,
    alter_group,
    alter_loggers,
    alter_resources,
    alter_topic,
    check_broker_resource,
)
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.client_telemetry import CLIENT_METRICS
from odradek.broker.config import BROKER_KEYS
from odradek.broker.group_configs import GROUP_CONFIG_KEYS
from odradek.broker.services import BrokerServices

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

__all__ = ["API", "apply_operations", "handle"]

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_KEYS = frozenset(
    {
        "cleanup.policy",
        "log.cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)


def apply_operations(
    configs: Mapping[str, str], ops: Any, base: Mapping[str, str | None]
) -> tuple[dict[str, str], ErrorCode, str | None]:
    """``configs`` (one resource's stored overrides) after ``ops``; ``base`` gives the value
    APPEND/SUBTRACT start from when ``configs`` lacks the key. Pure."""
    out = dict(configs)
    seen: set[str] = set()
    for op in ops:
        key = op.name
        if key in seen:
            return out, ErrorCode.invalid_request, f"Error due to duplicate config keys: {key}"
        seen.add(key)
        if op.config_operation == SET:
            if op.value is None:
                return out, ErrorCode.invalid_request, f"Null value not supported for : {key}"
            out[key] = op.value
        elif op.config_operation == DELETE:
            out.pop(key, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if key not in LIST_KEYS:
                verb = "append" if op.config_operation == APPEND else "subtract"
                return (
                    out,
                    ErrorCode.invalid_config,
                    f"Config value {verb} is not allowed for config key: {key}",
                )
            start = out.get(key, base.get(key)) or ""
            current = [v.strip() for v in start.split(",") if v.strip()]
            values = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if op.config_operation == APPEND:
                current += [v for v in values if v not in current]
            else:
                current = [v for v in current if v not in values]
            out[key] = ",".join(current)
        else:
            return out, ErrorCode.invalid_request, f"{key}: unknown operation {op.config_operation}"
    return out, ErrorCode.none, None


async def _topic(
    services: BrokerServices, name: str, ops: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    topic = services.metadata.topic(name) if name else None
    if topic is None:
        return await alter_topic(services, name, {}, validate_only)  # the error
    base = services.topic_admin.topic_configs_from(topic.configs)
    configs, code, message = apply_operations(topic.configs, ops, base)
    if code != ErrorCode.none:
        return code, message
    return await alter_topic(services, name, configs, validate_only)


async def _broker(
    services: BrokerServices, name: str, ops: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    code, message = check_broker_resource(services.node_id, name)
    if code != ErrorCode.none:
        return code, message
    stored = services.dynamic_config.entity_props(per_broker=name != "")
    base = {
        k: None if spec.default is None else str(spec.default) for k, spec in BROKER_KEYS.items()
    }
    configs, code, message = apply_operations(stored, ops, base)
    if code != ErrorCode.none:
        return code, message
    return await alter_broker(services, name, configs, validate_only)


async def _group(
    services: BrokerServices, name: str, ops: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:

    stored = services.group_configs.overrides(name) if name else {}
    base = {k: None for k in GROUP_CONFIG_KEYS}
    configs, code, message = apply_operations(stored, ops, base)
    if code != ErrorCode.none:
        return code, message
    return await alter_group(services, name, configs, validate_only)


async def _client_metrics(
    services: BrokerServices, name: str, ops: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """A client-metrics resource (KIP-714 subscriptions: ``broker/client_telemetry.py``)."""
    telemetry = services.client_telemetry
    configs, code, message = apply_operations(dict(telemetry.describe(name)), ops, {})
    if code != ErrorCode.none:
        return code, message
    try:
        await telemetry.alter(name, configs, validate_only)
    except ValueError as exc:
        return (ErrorCode.invalid_request if not name else ErrorCode.invalid_config), str(exc)
    return ErrorCode.none, None


async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    services = ctx.services

    async def alter(rtype: int, name: str, ops: Any) -> tuple[ErrorCode, str | None]:
        refused = _authz.config_refusal(ctx, _authz.AclOperation.ALTER_CONFIGS, rtype, name)
        if refused is not None:
            return refused, None
        if rtype == TOPIC:
            return await _topic(services, name, ops, request.validate_only)
        if rtype == BROKER:
            return await _broker(services, name, ops, request.validate_only)
        if rtype == BROKER_LOGGER:
            return await alter_loggers(services, name, ops, request.validate_only)
        if rtype == CLIENT_METRICS:
            return await _client_metrics(services, name, ops, request.validate_only)
        return await _group(services, name, ops, request.validate_only)

    responses = await alter_resources(
        request, alter, (TOPIC, BROKER, BROKER_LOGGER, GROUP, CLIENT_METRICS)
    )
    return cast(
        "IncrementalAlterConfigsResponse",
        make(
            response_types(request).IncrementalAlterConfigsResponse,
            throttle_time=NO_THROTTLE,
            responses=responses,
        ),
    )


API = ApiSpec(key=44, name="IncrementalAlterConfigs", min_version=0, max_version=1, handler=handle)
