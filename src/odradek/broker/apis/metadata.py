"""Metadata (3): brokers, topics, partitions, leaders; auto-creates topics when allowed.

Everything comes from the ``MetadataStore``: every live broker with an endpoint on the
listener the request came in on (its address there; a broker without that listener is left
out, as Kafka's MetadataCache does), the controller id, and per
partition the leader, leader epoch, replicas, ISR and offline replicas (replicas on brokers
that are not live, and those the controller's UpdateMetadata lists as offline: on a failed log
dir). A partition whose leader is not a live broker is answered with
LEADER_NOT_AVAILABLE and leader -1; one whose live leader lacks the request's listener with
LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before) and leader -1.

Topics are auto-created when the request allows it (``allow_auto_topic_creation``, implicit
before v4) and ``auto.create.topics.enable`` is true, with ``num.partitions`` partitions.

With an authorizer (Kafka's rules): a request for all topics lists those the principal may
DESCRIBE; a named topic it may not describe is answered TOPIC_AUTHORIZATION_FAILED, and so is
a missing topic it may not CREATE (on the cluster or the topic) when auto-creation would
apply; authorized operations, when asked for, are the principal's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._listeners import endpoint_for
from odradek.broker.apis._util import (
    AUTHORIZED_OPERATIONS_NOT_REQUESTED,
    CLUSTER_OPERATIONS,
    NO_THROTTLE,
    TOPIC_OPERATIONS,
    make,
    response_types,
    topic_name_error,
)
from odradek.broker.metadata_store import PartitionState
from odradek.security.acls import CLUSTER_NAME

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        MetadataRequest,
        MetadataRequestV4,
        MetadataRequestV5,
        MetadataRequestV6,
        MetadataRequestV7,
        MetadataRequestV8,
        MetadataRequestV9,
        MetadataRequestV10,
        MetadataRequestV11,
        MetadataRequestV12,
        MetadataResponse,
    )

    V4Up: TypeAlias = (
        MetadataRequestV4
        | MetadataRequestV5
        | MetadataRequestV6
        | MetadataRequestV7
        | MetadataRequestV8
        | MetadataRequestV9
        | MetadataRequestV10
        | MetadataRequestV11
        | MetadataRequestV12
    )
    V8Up: TypeAlias = (
        MetadataRequestV8
        | MetadataRequestV9
        | MetadataRequestV10
        | MetadataRequestV11
        | MetadataRequestV12
    )
    V10Up: TypeAlias = MetadataRequestV10 | MetadataRequestV11 | MetadataRequestV12

__all__ = ["API", "handle"]

_NOT_REQUESTED = AUTHORIZED_OPERATIONS_NOT_REQUESTED
_DENIED = ErrorCode.topic_authorization_failed
_TOPIC = _authz.ResourceType.TOPIC
_CLUSTER = _authz.ResourceType.CLUSTER
_DESCRIBE = _authz.AclOperation.DESCRIBE


def _partition_entry(types: Any, p: PartitionState, live: frozenset[int], listed: _Listed) -> Any:
    leader = p.leader if p.leader in listed.reachable else -1
    if leader >= 0:
        code = ErrorCode.none
    elif p.leader in live and listed.version >= 6:
        # a live leader without the request's listener (Kafka: v6+; LEADER_NOT_AVAILABLE before)
        code = ErrorCode.listener_not_found
    else:
        code = ErrorCode.leader_not_available
    return make(
        types.MetadataResponsePartition,
        error_code=code,
        partition_index=p.partition,
        leader_id=leader,
        leader_epoch=p.leader_epoch,
        replica_nodes=tuple(p.replicas),
        isr_nodes=tuple(p.isr),
        offline_replicas=tuple(r for r in p.replicas if r not in live or r in p.offline_replicas),
    )


@dataclass(frozen=True, slots=True)
class _Listed:
    """The brokers a Metadata answer names: those with an endpoint on the request's listener
    (``reachable``), and the request's version."""

    reachable: frozenset[int]
    version: int


def _topic_entry(
    ctx: RequestContext,
    types: Any,
    name: str,
    live: frozenset[int],
    listed: _Listed,
    ops: int = _NOT_REQUESTED,
) -> Any:

    topic = ctx.services.metadata.topic(name)
    if topic is None:
        return None
    partitions = tuple(_partition_entry(types, p, live, listed) for p in topic.partitions)
    return make(
        types.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=ops,
    )


def _error_entry(types: Any, name: str | None, code: ErrorCode, ops: int = _NOT_REQUESTED) -> Any:
    return make(
        types.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=None,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=ops,
    )


def _allows_auto_creation(request: MetadataRequest) -> TypeGuard[V4Up]:
    """v4+ says whether topics may be auto-created (before: always)."""
    return request.__version__ >= 4


def _asks_topic_operations(request: MetadataRequest) -> TypeGuard[V8Up]:
    """v8+ may ask for the topics' authorized operations (KIP-430)."""
    return request.__version__ >= 8


def _asks_cluster_operations(
    request: MetadataRequest,
) -> TypeGuard[MetadataRequestV8 | MetadataRequestV9 | MetadataRequestV10]:
    """v8-v10 may ask for the cluster's authorized operations (moved to DescribeCluster)."""
    return 8 <= request.__version__ <= 10


def _names_topic_ids(request: MetadataRequest) -> TypeGuard[V10Up]:
    """v10+ may name topics by id (KIP-516)."""
    return request.__version__ >= 10


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    store = services.metadata
    brokers = store.live_brokers()
    live = frozenset(b.node_id for b in brokers)
    # each broker's endpoint on the listener the request came in on; one without it is left out
    addresses = [(b, endpoint_for(ctx, b)) for b in brokers]
    listed_brokers = [(b, a) for b, a in addresses if a is not None]
    version = ctx.header.api_version
    listed = _Listed(frozenset(b.node_id for b, _ in listed_brokers), version)
    types = response_types(request)
    allow_auto = request.allow_auto_topic_creation if _allows_auto_creation(request) else True
    # no authorizer: every operation of the resource type, when asked for (v8+)
    topic_ops = (
        TOPIC_OPERATIONS
        if _asks_topic_operations(request) and request.include_topic_authorized_operations
        else _NOT_REQUESTED
    )
    cluster_ops = (
        _authz.authorized_operations(ctx, _CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
        if _asks_cluster_operations(request) and request.include_cluster_authorized_operations
        else _NOT_REQUESTED
    )
    secured = _authz.enabled(ctx)

    def ops(name: str) -> int:  # with an authorizer: the principal's operations on the topic
        if not secured or topic_ops == _NOT_REQUESTED:
            return topic_ops
        return _authz.authorized_operations(ctx, _TOPIC, name, TOPIC_OPERATIONS)

    entries = []
    if request.topics is None or (version == 0 and not request.topics):
        # all topics (v0: an empty list means all); with an authorizer, those it may describe
        for t in sorted(store.topics(), key=lambda t: t.name):
            if secured and not _authz.allowed(ctx, _DESCRIBE, _TOPIC, t.name):
                continue
            entries.append(_topic_entry(ctx, types, t.name, live, listed, ops(t.name)))
    else:
        wanted: list[tuple[str | None, uuid.UUID | None]]
        if _names_topic_ids(request):
            wanted = [(rt.name, rt.topic_id) for rt in request.topics or ()]
        else:
            wanted = [(rt.name, None) for rt in request.topics or ()]
        for asked, topic_id in wanted:
            if asked is not None:
                name = asked
            else:
                found = store.topic_by_id(topic_id) if topic_id is not None else None
                if found is None:
                    entries.append(_error_entry(types, None, ErrorCode.unknown_topic_id, topic_ops))
                    continue
                name = found.name
            if secured and not _authz.allowed(ctx, _DESCRIBE, _TOPIC, name):
                entries.append(_error_entry(types, name, _DENIED, topic_ops))
                continue
            entry = _topic_entry(ctx, types, name, live, listed, ops(name))
            if entry is None:
                if topic_name_error(name) is not None:
                    entries.append(
                        _error_entry(types, name, ErrorCode.invalid_topic_exception, topic_ops)
                    )
                    continue
                if allow_auto and services.config.auto_create_topics_enable:
                    if not _authz.may_create_topic(ctx, name):
                        entries.append(_error_entry(types, name, _DENIED, topic_ops))
                        continue
                    await services.topic_admin.auto_create_topic(name)
                    entry = _topic_entry(ctx, types, name, live, listed, ops(name))
                if entry is None:
                    entries.append(
                        _error_entry(types, name, ErrorCode.unknown_topic_or_partition, topic_ops)
                    )
                    continue
            entries.append(entry)
    return cast(
        "MetadataResponse",
        make(
            types.MetadataResponse,
            throttle_time=NO_THROTTLE,
            brokers=tuple(
                make(
                    types.MetadataResponseBroker,
                    node_id=b.node_id,
                    host=address[0],
                    port=address[1],
                    rack=b.rack,
                )
                for b, address in listed_brokers
            ),
            cluster_id=store.cluster_id,
            controller_id=store.controller_id(),
            topics=tuple(entries),
            cluster_authorized_operations=cluster_ops,
        ),
    )


API = ApiSpec(key=3, name="Metadata", min_version=0, max_version=12, handler=handle)
