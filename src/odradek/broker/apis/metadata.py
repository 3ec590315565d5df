"""Metadata (3): brokers, topics, partitions, leaders; auto-creates topics when allowed.

Topics are auto-created when the request allows it (``allow_auto_topic_creation``, implicit
before v4) and ``auto.create.topics.enable`` is true, with ``num.partitions`` partitions.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types, topic_name_error

__all__ = ["API", "handle"]

_NOT_REQUESTED = -(2**31)


def _topic_entry(ctx: RequestContext, types: Any, name: str) -> Any:
    broker = ctx.broker
    topic = broker.metadata.topic(name)
    if topic is None:
        return None
    partitions = tuple(
        make(
            types.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=tuple(p.replicas),
            isr_nodes=tuple(p.isr),
            offline_replicas=(),
        )
        for p in topic.partitions
    )
    return make(
        types.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=_NOT_REQUESTED,
    )


def _error_entry(types: Any, name: str | None, code: ErrorCode) -> Any:
    return make(
        types.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=None,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=_NOT_REQUESTED,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    types = response_types(request)
    version = ctx.header.api_version
    allow_auto = bool(getattr(request, "allow_auto_topic_creation", True))
    entries = []
    if request.topics is None or (version == 0 and not request.topics):
        # all topics (v0: an empty list means all)
        for t in sorted(broker.metadata.topics(), key=lambda t: t.name):
            entries.append(_topic_entry(ctx, types, t.name))
    else:
        for rt in request.topics:
            name = rt.name
            if name is None:
                topic_id = getattr(rt, "topic_id", None)
                found = broker.metadata.topic_by_id(topic_id) if topic_id is not None else None
                if found is None:
                    entries.append(_error_entry(types, None, ErrorCode.unknown_topic_id))
                    continue
                name = found.name
            entry = _topic_entry(ctx, types, name)
            if entry is None:
                if topic_name_error(name) is not None:
                    entries.append(_error_entry(types, name, ErrorCode.invalid_topic_exception))
                    continue
                if allow_auto and broker.config.auto_create_topics_enable:
                    await broker.auto_create_topic(name)
                    entry = _topic_entry(ctx, types, name)
                if entry is None:
                    entries.append(_error_entry(types, name, ErrorCode.unknown_topic_or_partition))
                    continue
            entries.append(entry)
    node = broker.node_id
    host, port = broker.advertised_address
    return make(
        types.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=(
            make(types.MetadataResponseBroker, node_id=node, host=host, port=port, rack=None),
        ),
        cluster_id=broker.metadata.cluster_id,
        controller_id=node,
        topics=tuple(entries),
        cluster_authorized_operations=_NOT_REQUESTED,
    )


API = ApiSpec(key=3, name="Metadata", min_version=0, max_version=12, handler=handle)
