"""Shared by DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: resource types,
config sources, describing and altering topic, broker and group resources.

Resources, as Kafka serves them:

* TOPIC (2): overrides over the broker defaults (``TopicAdmin``), applied to live logs.
* BROKER (4): name = this broker's id (every config, current values, read-only flags) or
  ``""`` (the cluster-wide dynamic defaults only). Dynamic configs go through
  ``DynamicBrokerConfig``; another broker id or a non-integer name is INVALID_REQUEST; a
  read-only or unknown key, or a bad value, is INVALID_CONFIG.
* BROKER_LOGGER (8): name = this broker's id; the process's loggers and their levels,
  changed by IncrementalAlterConfigs (``broker/loggers.py``); AlterConfigs refuses it.
* GROUP (32): KIP-848 group configs (``GroupConfigManager``); an empty name is INVALID_REQUEST.

Describing: ``(name, value, read_only, source, synonyms)`` per config, ``synonyms`` being
``(name, value, source)`` highest precedence first, as Kafka's ConfigHelper builds them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from odradek.broker.apis._util import make, response_types
from odradek.broker.config import (
    BROKER_KEYS,
    TOPIC_KEYS,
    ConfigError,
    ignored_topic_configs,
    validate_topic_configs,
)
from odradek.broker.dynamic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    broker_config_synonyms,
)
from odradek.broker.loggers import DYNAMIC_BROKER_LOGGER_CONFIG, BrokerLoggers, LoggerError
from odradek.broker.metadata_store import MetadataUnavailableError, TopicMetadata
from odradek.broker.services import BrokerServices

if TYPE_CHECKING:
    from odradek.protocol.api_types import AlterConfigsRequest, IncrementalAlterConfigsRequest

__all__ = [
    "BROKER",
    "BROKER_LOGGER",
    "DEFAULT_CONFIG",
    "DYNAMIC_TOPIC_CONFIG",
    "GROUP",
    "GROUP_CONFIGS_DISABLED",
    "TOPIC",
    "Entry",
    "alter_broker",
    "alter_group",
    "alter_loggers",
    "alter_resources",
    "alter_topic",
    "broker_entries",
    "check_broker_logger_resource",
    "check_broker_resource",
    "group_entries",
    "logger_entries",
    "topic_entries",
    "topic_entries_from",
]

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32

_log = logging.getLogger("odradek.broker")

GROUP_CONFIGS_DISABLED = (
    "group configs need group.coordinator.rebalance.protocols to list consumer "
    "(Kafka 4.0's default)"
)

DYNAMIC_TOPIC_CONFIG = 1

Entry = tuple[str, str | None, bool, int, list[tuple[str, str | None, int]]]
"""(name, value, read_only, source, synonyms [(name, value, source)])."""


def _source(synonyms: list[tuple[str, str | None, int]]) -> int:
    return synonyms[0][2] if synonyms else DEFAULT_CONFIG


def topic_entries(
    services: BrokerServices, topic: TopicMetadata, keys: tuple[str, ...] | None
) -> list[Entry]:
    """Every config of a topic resource: its override, else the broker's current default."""
    return topic_entries_from(services, topic.configs, keys)


def topic_entries_from(
    services: BrokerServices, overrides: Mapping[str, str], keys: tuple[str, ...] | None
) -> list[Entry]:
    """``topic_entries`` of a topic with ``overrides`` (CreateTopics answers with them)."""
    effective = services.topic_admin.topic_configs_from(overrides)
    dynamic = services.dynamic_config
    out: list[Entry] = []
    for name, value in sorted(effective.items()):
        if keys and name not in keys:
            continue
        spec = TOPIC_KEYS.get(name)
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, value, DYNAMIC_TOPIC_CONFIG))
        if spec is not None and spec.broker_key is not None:
            bkey = spec.broker_key
            synonyms += dynamic.config_synonyms(bkey, broker_config_synonyms(bkey))
        out.append((name, value, False, _source(synonyms), synonyms))
    return out


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_broker_resource(node_id: int, name: str) -> tuple[ErrorCode, str | None]:
    """NONE for ``""`` (the cluster-wide default) or this broker's id; else INVALID_REQUEST."""
    if name == "":
        return ErrorCode.none, None
    try:
        broker_id = int(name)
    except ValueError:
        return ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
    if broker_id != node_id:
        return (
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}",
        )
    return ErrorCode.none, None


def broker_entries(
    services: BrokerServices, name: str, keys: tuple[str, ...] | None
) -> list[Entry]:
    """This broker's configs (``name`` = its id) or the dynamic cluster defaults (``""``)."""
    dynamic = services.dynamic_config
    config = services.config
    out: list[Entry] = []
    if name == "":
        for key, value in sorted(dynamic.dynamic_default_configs().items()):
            if keys and key not in keys:
                continue
            synonyms = [
                s
                for s in dynamic.config_synonyms(key, broker_config_synonyms(key))
                if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
            out.append((key, value, dynamic.is_read_only(key), _source(synonyms), list(synonyms)))
        return out
    for key in sorted(BROKER_KEYS):
        if keys and key not in keys:
            continue
        synonyms = list(dynamic.config_synonyms(key, broker_config_synonyms(key)))
        out.append(
            (key, _str(config.get(key)), dynamic.is_read_only(key), _source(synonyms), synonyms)
        )
    return out


def group_entries(
    services: BrokerServices, group: str, keys: tuple[str, ...] | None
) -> list[Entry]:
    return [
        (name, value, False, source, [(name, value, source)])
        for name, value, source in services.group_configs.describe(group)
        if not keys or name in keys
    ]


def check_broker_logger_resource(node_id: int, name: str) -> tuple[ErrorCode, str | None]:
    """BROKER_LOGGER needs this broker's id (Kafka: no cluster-wide loggers)."""
    if name == "":
        return ErrorCode.invalid_request, "Broker id must not be empty"
    return check_broker_resource(node_id, name)


def logger_entries(keys: tuple[str, ...] | None) -> list[Entry]:
    """The BROKER_LOGGER resource: every logger and its level (``broker.loggers``)."""
    return [
        (name, level, False, DYNAMIC_BROKER_LOGGER_CONFIG, [])
        for name, level in BrokerLoggers().levels().items()
        if not keys or name in keys
    ]


async def alter_loggers(
    services: BrokerServices, name: str, ops: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """IncrementalAlterConfigs on BROKER_LOGGER: SET / DELETE logger levels."""
    code, message = check_broker_logger_resource(services.node_id, name)
    if code != ErrorCode.none:
        return code, message
    try:
        BrokerLoggers().alter(
            [(op.name, int(op.config_operation), op.value) for op in ops], validate_only
        )
    except LoggerError as exc:
        return (
            ErrorCode.invalid_request if exc.invalid_request else ErrorCode.invalid_config,
            str(exc),
        )
    return ErrorCode.none, None


async def alter_topic(
    services: BrokerServices, name: str, new_configs: Mapping[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Replace the topic's overrides with ``new_configs`` (validated); apply to live logs."""
    if name == "":
        return ErrorCode.invalid_request, "Default topic resources are not allowed."
    topic = services.metadata.topic(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    try:
        configs = validate_topic_configs(new_configs)
        services.topic_admin.check_log_config(configs)
    except ValueError as exc:  # ConfigError, storage's InvalidConfigError
        return ErrorCode.invalid_config, str(exc)
    if not validate_only:
        await services.topic_admin.alter_topic_configs(name, configs)
        for warning in ignored_topic_configs(configs):
            _log.warning("topic %r: %s", name, warning)
    return ErrorCode.none, None


async def alter_broker(
    services: BrokerServices, name: str, new_configs: Mapping[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Replace one level of dynamic broker configs (``name`` = broker id or ``""``)."""
    code, message = check_broker_resource(services.node_id, name)
    if code != ErrorCode.none:
        return code, message
    nulls = sorted(k for k, v in new_configs.items() if v is None)
    if nulls:
        return ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"
    props = {k: v for k, v in new_configs.items() if v is not None}
    try:
        await services.dynamic_config.alter(
            props, per_broker=name != "", validate_only=validate_only
        )
    except ConfigError as exc:
        return ErrorCode.invalid_config, f"Invalid config value for resource BROKER {name!r}: {exc}"
    except MetadataUnavailableError as exc:  # cluster mode: ZooKeeper away
        return ErrorCode.request_timed_out, str(exc)
    return ErrorCode.none, None


async def alter_group(
    services: BrokerServices, name: str, new_configs: Mapping[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Replace a group's config overrides (KIP-848 group configs)."""
    if not services.group_configs.enabled:
        return ErrorCode.invalid_request, GROUP_CONFIGS_DISABLED
    if not name:
        return ErrorCode.invalid_request, "Group name must not be empty"
    nulls = sorted(k for k, v in new_configs.items() if v is None)
    if nulls:
        return ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}"
    props = {k: v for k, v in new_configs.items() if v is not None}
    try:
        await services.group_configs.alter(name, props, validate_only)
    except ConfigError as exc:
        return ErrorCode.invalid_config, str(exc)
    except MetadataUnavailableError as exc:  # cluster mode: ZooKeeper away
        return ErrorCode.request_timed_out, str(exc)
    return ErrorCode.none, None


Alter = Callable[[int, str, Any], Awaitable[tuple[ErrorCode, str | None]]]


async def alter_resources(
    request: AlterConfigsRequest | IncrementalAlterConfigsRequest,
    alter: Alter,
    types_served: tuple[int, ...] = (TOPIC, BROKER, GROUP),
) -> tuple[Any, ...]:
    """The per-resource answers of AlterConfigs / IncrementalAlterConfigs.

    ``alter(resource type, name, the resource's configs)`` changes one TOPIC, BROKER or GROUP
    resource. A resource named twice is INVALID_REQUEST for both (Kafka); other resource
    types are INVALID_REQUEST.
    """
    types = response_types(request)
    seen: dict[tuple[int, str], int] = {}
    for res in request.resources:
        key = (res.resource_type, res.resource_name)
        seen[key] = seen.get(key, 0) + 1
    out = []
    for res in request.resources:
        if seen[(res.resource_type, res.resource_name)] > 1:
            code: ErrorCode = ErrorCode.invalid_request
            message: str | None = "Each resource must appear at most once."
        elif res.resource_type in types_served:
            try:
                code, message = await alter(res.resource_type, res.resource_name, res.configs)
            except ValueError as exc:
                code, message = ErrorCode.invalid_request, str(exc)
        else:
            code, message = (
                ErrorCode.invalid_request,
                f"AlterConfigs is only supported for topics, brokers and groups, but resource "
                f"type is {res.resource_type}",
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
