"""Shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: resource types,
config sources and applying topic config changes to the live logs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.apis._util import make, response_types
from odradek.broker.config import (
    BROKER_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    validate_topic_configs,
)
from odradek.broker.metadata_store import TopicMetadata
from odradek.broker.services import BrokerServices

__all__ = [
    "BROKER",
    "BROKER_LOGGER",
    "TOPIC",
    "alter_resources",
    "alter_topic",
    "broker_entries",
    "check_broker_resource",
    "topic_entries",
]

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# config sources (DescribeConfigs v1+)
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


def topic_entries(
    services: BrokerServices, topic: TopicMetadata, keys: tuple[str, ...] | None
) -> list[tuple[str, str | None, bool, int, list[tuple[str, str | None, int]]]]:
    """[(name, value, read_only, source, synonyms)] for a topic resource."""
    effective = services.topic_admin.topic_configs_from(topic.configs)
    config = services.config
    out: list[tuple[str, str | None, bool, int, list[tuple[str, str | None, int]]]] = []
    for name, value in sorted(effective.items()):
        if keys and name not in keys:
            continue
        spec = TOPIC_KEYS.get(name)
        synonyms: list[tuple[str, str | None, int]] = []
        if name in topic.configs:
            source = DYNAMIC_TOPIC_CONFIG
            synonyms.append((name, value, DYNAMIC_TOPIC_CONFIG))
        else:
            source = DEFAULT_CONFIG
        if spec is not None and spec.broker_key is not None:
            bkey = spec.broker_key
            bsource = STATIC_BROKER_CONFIG if config.is_explicit(bkey) else DEFAULT_CONFIG
            if name not in topic.configs and bsource == STATIC_BROKER_CONFIG:
                source = STATIC_BROKER_CONFIG
            synonyms.append((bkey, spec.default_from(config), bsource))
        out.append((name, value, False, source, synonyms))
    return out


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_entries(
    config: BrokerConfig, keys: tuple[str, ...] | None
) -> list[tuple[str, str | None, bool, int, list[tuple[str, str | None, int]]]]:
    out = []
    for name in sorted(BROKER_KEYS):
        if keys and name not in keys:
            continue
        source = STATIC_BROKER_CONFIG if config.is_explicit(name) else DEFAULT_CONFIG
        value = _str(config.get(name))
        out.append((name, value, True, source, [(name, value, source)]))
    return out


def check_broker_resource(node_id: int, name: str) -> tuple[ErrorCode, str | None]:
    if name not in ("", str(node_id)):
        return ErrorCode.invalid_request, f"unknown broker {name!r}"
    return ErrorCode.none, None


async def alter_topic(
    services: BrokerServices, name: str, new_configs: Mapping[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Replace the topic's overrides with ``new_configs`` (validated); apply to live logs."""
    topic = services.metadata.topic(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
    try:
        configs = validate_topic_configs(new_configs)
        services.topic_admin.check_log_config(configs)
    except ConfigError as exc:
        return ErrorCode.invalid_config, str(exc)
    except ValueError as exc:
        return ErrorCode.invalid_config, str(exc)
    if not validate_only:
        await services.topic_admin.alter_topic_configs(name, configs)
    return ErrorCode.none, None


async def alter_resources(
    request: Any, alter: Callable[[str, Any], Awaitable[tuple[ErrorCode, str | None]]]
) -> tuple[Any, ...]:
    """The per-resource answers of AlterConfigs / IncrementalAlterConfigs.

    ``alter(topic name, the resource's configs)`` changes one topic; broker resources are
    refused (broker configs are static), other resource types too.
    """
    types = response_types(request)
    out = []
    for res in request.resources:
        if res.resource_type == TOPIC:
            code, message = await alter(res.resource_name, res.configs)
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
    return tuple(out)
