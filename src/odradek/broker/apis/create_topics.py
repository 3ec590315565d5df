"""CreateTopics (19): create topics, or only validate (validate_only).

Per topic: a bad name → INVALID_TOPIC_EXCEPTION (legal: [a-zA-Z0-9._-], length ≤ 249, not
"." or ".."); an existing one (or the same name twice in the request) → TOPIC_ALREADY_EXISTS
(INVALID_REQUEST for a duplicate); num_partitions < 1 (-1 = num.partitions) →
INVALID_PARTITIONS; replication_factor > 1 (-1 = default.replication.factor) on a single
broker, or larger than the live brokers of a cluster → INVALID_REPLICATION_FACTOR; manual
assignments naming another broker (in a cluster: a broker that is not live, or one twice) →
INVALID_REPLICA_ASSIGNMENT; an unknown or invalid topic config → INVALID_CONFIG naming the key.

A broker of a cluster that has had no UpdateMetadata from the controller yet (just started: it
knows only itself and no controller) answers NOT_CONTROLLER, retriable, as Kafka's brokers answer
a CreateTopics they cannot decide: its view would call every other broker dead and every topic
new.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz, _quotas
from odradek.broker.apis._configs import topic_entries_from
from odradek.broker.apis._util import make, response_types, topic_name_error
from odradek.broker.config import ConfigError, ignored_topic_configs, validate_topic_configs
from odradek.broker.metadata_store import (
    InvalidPartitionsError,
    MetadataUnavailableError,
    TopicExistsError,
)
from odradek.broker.services import BrokerServices
from odradek.broker.topic_admin import InvalidReplicationFactorError

if TYPE_CHECKING:
    from odradek.protocol.api_types import CreateTopicsRequest, CreateTopicsResponse

__all__ = ["API", "handle"]

log = logging.getLogger("odradek.broker")


def _check(
    services: BrokerServices, topic: Any, seen: set[str]
) -> tuple[ErrorCode, str | None, int, int, dict[str, str]]:
    name = topic.name
    if services.cluster is not None and services.metadata.controller_id() < 0:
        return ErrorCode.not_controller, "this broker has no metadata from the controller yet", -1, -1, {}
    err = topic_name_error(name)
    if err is not None:
        return ErrorCode.invalid_topic_exception, err, -1, -1, {}
    if name in seen:
        return ErrorCode.invalid_request, f"topic {name!r} appears more than once", -1, -1, {}
    if services.metadata.topic(name) is not None:
        return ErrorCode.topic_already_exists, f"Topic '{name}' already exists.", -1, -1, {}
    assignments = tuple(topic.assignments or ())
    if assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return (
                ErrorCode.invalid_request,
                "give either assignments or num_partitions/replication_factor",
                -1,
                -1,
                {},
            )
        live = {b.node_id for b in services.metadata.live_brokers()} or {services.node_id}
        for a in assignments:
            if services.cluster is not None:
                ids = tuple(a.broker_ids)
                if not ids or len(set(ids)) != len(ids) or not set(ids) <= live:
                    return (
                        ErrorCode.invalid_replica_assignment,
                        f"partition {a.partition_index}: replicas {list(ids)} must be distinct "
                        f"live brokers ({sorted(live)})",
                        -1,
                        -1,
                        {},
                    )
                continue
            if tuple(a.broker_ids) != (services.node_id,):
                return (
                    ErrorCode.invalid_replica_assignment,
                    f"partition {a.partition_index}: only broker {services.node_id} exists",
                    -1,
                    -1,
                    {},
                )
        indexes = sorted(a.partition_index for a in assignments)
        if indexes != list(range(len(indexes))):
            return (
                ErrorCode.invalid_replica_assignment,
                "partitions must be numbered 0..n-1",
                -1,
                -1,
                {},
            )
        partitions, rf = len(assignments), len(tuple(assignments[0].broker_ids))
    else:
        partitions = (
            services.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        )
        rf = (
            services.config.default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
    if partitions < 1:
        return (
            ErrorCode.invalid_partitions,
            "Number of partitions must be larger than 0.",
            -1,
            -1,
            {},
        )
    if rf < 1:
        return (
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0.",
            -1,
            -1,
            {},
        )
    brokers = max(1, len(services.metadata.live_brokers()))
    if services.cluster is not None and rf > brokers and not assignments:
        return (
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {rf} larger than available brokers: {brokers}.",
            -1,
            -1,
            {},
        )
    if services.cluster is None and rf > 1:
        return (
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered.",
            -1,
            -1,
            {},
        )
    raw = {c.name: c.value for c in (topic.configs or ())}
    try:
        configs = validate_topic_configs(raw)
    except ConfigError as exc:
        return ErrorCode.invalid_config, str(exc), -1, -1, {}
    return ErrorCode.none, None, partitions, rf, configs


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    services = ctx.services
    types = response_types(request)
    results = []
    seen: set[str] = set()
    quota = _quotas.mutation_quota(ctx, request, strict_since=6)
    for topic in request.topics:
        code, message, partitions, rf, configs = _check(services, topic, seen)
        seen.add(topic.name)
        if code == ErrorCode.none and not _authz.may_create_topic(ctx, topic.name):
            # Kafka: CREATE on the cluster or the topic
            code, message = ErrorCode.topic_authorization_failed, "Authorization failed."
        if (
            code == ErrorCode.none
            and not request.validate_only
            and quota is not None
            and not quota.record(partitions)
        ):  # controller_mutation_rate (apis/_quotas.py)
            code, message = _quotas.QUOTA_EXCEEDED, _quotas.QUOTA_EXCEEDED_MESSAGE
        topic_id = None
        if code == ErrorCode.none and not request.validate_only:
            try:
                assignment = {
                    int(a.partition_index): [int(b) for b in a.broker_ids]
                    for a in (topic.assignments or ())
                }
                meta = await services.topic_admin.create_topic(
                    topic.name,
                    partitions,
                    configs,
                    replication_factor=rf,
                    assignment=assignment or None,
                )
                topic_id = meta.topic_id
                for warning in ignored_topic_configs(configs):
                    log.warning("topic %r: %s", topic.name, warning)
            except TopicExistsError as exc:
                code, message = ErrorCode.topic_already_exists, str(exc)
            except InvalidReplicationFactorError as exc:
                code, message = ErrorCode.invalid_replication_factor, str(exc)
            except InvalidPartitionsError as exc:
                code, message = ErrorCode.invalid_partitions, str(exc)
            except MetadataUnavailableError as exc:
                code, message = ErrorCode.request_timed_out, str(exc)
        config_entries = None
        if code == ErrorCode.none and hasattr(types, "CreatableTopicConfigs"):
            # the sources as DescribeConfigs gives them (override, dynamic or static broker
            # default, default)
            config_entries = tuple(
                make(
                    types.CreatableTopicConfigs,
                    name=k,
                    value=v,
                    read_only=read_only,
                    config_source=source,
                    is_sensitive=False,
                )
                for k, v, read_only, source, _synonyms in topic_entries_from(
                    services, configs, None
                )
            )
        results.append(
            make(
                types.CreatableTopicResult,
                name=topic.name,
                topic_id=topic_id,
                error_code=code,
                error_message=message,
                topic_config_error_code=0,
                num_partitions=partitions if code == ErrorCode.none else -1,
                replication_factor=rf if code == ErrorCode.none else -1,
                configs=config_entries,
            )
        )
    return cast(
        "CreateTopicsResponse",
        make(
            types.CreateTopicsResponse,
            throttle_time=_quotas.throttle(ctx, quota),
            topics=tuple(results),
        ),
    )


API = ApiSpec(
    key=19,
    name="CreateTopics",
    min_version=0,
    max_version=7,
    handler=handle,
    min_request_version=2,
)
