"""DescribeConfigs (32): topic configs (override or the broker's current default), broker
configs (this broker's id: every config with its current value, source and read-only flag;
"": the cluster-wide dynamic defaults), group configs and client-metrics subscriptions, with synonyms on request (see
``_configs``). Unknown topic → UNKNOWN_TOPIC_OR_PARTITION; another broker id → INVALID_REQUEST."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._configs import (
    BROKER,
    BROKER_LOGGER,
    DEFAULT_CONFIG,
    GROUP,
    GROUP_CONFIGS_DISABLED,
    TOPIC,
    broker_entries,
    check_broker_logger_resource,
    check_broker_resource,
    group_entries,
    logger_entries,
    topic_entries,
)
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.client_telemetry import CLIENT_METRICS, DYNAMIC_CLIENT_METRICS_CONFIG

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeConfigsRequest, DescribeConfigsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    services = ctx.services
    types = response_types(request)
    synonyms_wanted = bool(request.include_synonyms)
    results = []
    for res in request.resources:
        keys = tuple(res.configuration_keys) if res.configuration_keys else None
        code, message, entries = ErrorCode.none, None, []
        refused = _authz.config_refusal(
            ctx, _authz.AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name
        )
        if refused is not None:
            code = refused
        elif res.resource_type == TOPIC:
            topic = services.metadata.topic(res.resource_name)
            if topic is None:
                code, message = (
                    ErrorCode.unknown_topic_or_partition,
                    f"topic {res.resource_name!r} does not exist",
                )
            else:
                entries = topic_entries(services, topic, keys)
        elif res.resource_type == BROKER:
            code, message = check_broker_resource(services.node_id, res.resource_name)
            if code == ErrorCode.none:
                entries = broker_entries(services, res.resource_name, keys)
        elif res.resource_type == BROKER_LOGGER:
            code, message = check_broker_logger_resource(services.node_id, res.resource_name)
            if code == ErrorCode.none:
                entries = logger_entries(keys)
        elif res.resource_type == GROUP:
            if not services.group_configs.enabled:
                code, message = ErrorCode.invalid_request, GROUP_CONFIGS_DISABLED
            elif not res.resource_name:
                code, message = ErrorCode.invalid_request, "Group name must not be empty"
            else:
                entries = group_entries(services, res.resource_name, keys)
        elif res.resource_type == CLIENT_METRICS:  # KIP-714 subscriptions
            entries = [
                (k, v, False, DYNAMIC_CLIENT_METRICS_CONFIG, [])
                for k, v in services.client_telemetry.describe(res.resource_name)
                if not keys or k in keys
            ]
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"unsupported resource type {res.resource_type}",
            )
        configs = tuple(
            make(
                types.DescribeConfigsResourceResult,
                name=name,
                value=value,
                read_only=read_only,
                config_source=source,
                is_default=source == DEFAULT_CONFIG,
                is_sensitive=False,
                synonyms=tuple(
                    make(types.DescribeConfigsSynonym, name=sn, value=sv, source=ss)
                    for sn, sv, ss in synonyms
                )
                if synonyms_wanted
                else (),
                config_type=0,
                documentation=None,
            )
            for name, value, read_only, source, synonyms in entries
        )
        results.append(
            make(
                types.DescribeConfigsResult,
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs,
            )
        )
    return cast(
        "DescribeConfigsResponse",
        make(types.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results)),
    )


API = ApiSpec(
    key=32,
    name="DescribeConfigs",
    min_version=0,
    max_version=4,
    handler=handle,
    min_request_version=1,
)
