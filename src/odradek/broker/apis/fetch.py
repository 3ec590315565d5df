"""Fetch (1): read record batches, long polling with min_bytes / max_wait_ms.

Advertised v0-v12 (never 13+: those address topics by UUID), served from v4. A consumer
(replica_id < 0) reads below the high watermark; a follower (replica_id ≥ 0) to the log end.

Per partition: unknown → UNKNOWN_TOPIC_OR_PARTITION; fetch_offset below the log start offset or
above the log end offset → OFFSET_OUT_OF_RANGE; otherwise whole batches from the batch holding
fetch_offset, at most ``partition_max_bytes`` and what is left of the response's ``max_bytes`` —
except that the first partition with data always returns at least one batch (Kafka's
"min one message"), so a batch larger than the limits cannot stall a consumer.

Long polling: when fewer than ``min_bytes`` are available and no partition has an error, the
request parks in the purgatory watching its partitions and is answered as soon as an append
to one of them brings the total to ``min_bytes``, or at ``max_wait_ms`` with what there is.
read_committed (isolation_level 1, v4+): a consumer reads below the partition's last stable
offset instead (``ProducerStateManager.last_stable_offset``: no open transaction's records),
and each partition with records lists the aborted transactions (producer id, first offset)
overlapping them, for the client to drop; control batches are returned as they are.

A partition this broker does not lead → NOT_LEADER_OR_FOLLOWER; from v9 a request's
current_leader_epoch (when ≥ 0) must be the partition's: older → FENCED_LEADER_EPOCH, newer →
UNKNOWN_LEADER_EPOCH. Fetch sessions (KIP-227) are declined: the response's session_id is
always 0, so clients send full fetch requests.

Replicated partitions: a follower's fetch (replica_id ≥ 0) first records its position (its LEO
is the fetch offset; the HW may move, the ISR expand); a replica_id that is not one of the
partition's replicas → NOT_LEADER_OR_FOLLOWER. From v12, a fetch whose ``last_fetched_epoch``
(≥ 0) diverges from the leader's log gets no records but ``diverging_epoch`` = (epoch, end
offset) to truncate to (KIP-320).

This module decodes, asks ``ReplicaManager.fetch_messages`` (which owns every rule above:
leadership and epochs in ``Partition.fetch_records``, the limits, the follower bookkeeping
and the long poll) and encodes.

Versions 0-3 carry the old message formats (magic 0 and 1, down-converted lazily by
``protocol.legacy_versions``). A consumer's fetch at those versions of a topic with
``message.downconversion.enable=false`` gets UNSUPPORTED_VERSION for its partitions, as in
Kafka; a follower's never does.

The record bytes a consumer's response carries are reported per topic to
``RequestContext.metrics`` (BytesOutPerSec); a follower's are not (Kafka counts those as
replication traffic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v5.request import FetchRequest as FetchRequestV5
from kio.schema.fetch.v6.request import FetchRequest as FetchRequestV6
from kio.schema.fetch.v7.request import FetchRequest as FetchRequestV7
from kio.schema.fetch.v8.request import FetchRequest as FetchRequestV8
from kio.schema.fetch.v9.request import FetchRequest as FetchRequestV9
from kio.schema.fetch.v10.request import FetchRequest as FetchRequestV10
from kio.schema.fetch.v11.request import FetchRequest as FetchRequestV11
from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12

from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext, TopicMetrics
from odradek.broker.apis import _authz
from odradek.broker.replica_manager import (
    FetchParams,
    FetchPartitionData,
    FetchPartitionInfo,
    FetchResults,
)
from odradek.broker.services import BrokerServices
from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response

__all__ = ["API", "handle"]

AnyFetchRequest = (
    FetchRequestV4
    | FetchRequestV5
    | FetchRequestV6
    | FetchRequestV7
    | FetchRequestV8
    | FetchRequestV9
    | FetchRequestV10
    | FetchRequestV11
    | FetchRequestV12
)
"""The versions decoded here (older ones arrive upgraded by ``protocol.legacy_versions``)."""

_UNSUPPORTED_VERSION = ErrorCode.unsupported_version
_TOPIC_DENIED = ErrorCode.topic_authorization_failed


def fetch_infos(request: AnyFetchRequest) -> list[tuple[str, list[FetchPartitionInfo]]]:
    """The request's partitions as ``ReplicaManager.fetch_messages`` takes them."""
    if isinstance(request, FetchRequestV12):
        return [
            (
                ft.topic,
                [
                    FetchPartitionInfo(
                        fp.partition,
                        fp.fetch_offset,
                        fp.partition_max_bytes,
                        fp.current_leader_epoch,
                        fp.last_fetched_epoch,
                    )
                    for fp in ft.partitions
                ],
            )
            for ft in request.topics
        ]
    if isinstance(request, (FetchRequestV9, FetchRequestV10, FetchRequestV11)):
        return [
            (
                ft.topic,
                [
                    FetchPartitionInfo(
                        fp.partition,
                        fp.fetch_offset,
                        fp.partition_max_bytes,
                        fp.current_leader_epoch,
                    )
                    for fp in ft.partitions
                ],
            )
            for ft in request.topics
        ]
    return [
        (
            ft.topic,
            [
                FetchPartitionInfo(fp.partition, fp.fetch_offset, fp.partition_max_bytes)
                for fp in ft.partitions
            ],
        )
        for ft in request.topics
    ]


def _down_conversion_disabled(services: BrokerServices, topics: list[str]) -> frozenset[str]:
    """The topics whose message.downconversion.enable (topic config, else the broker's
    log.message.downconversion.enable) is false."""
    out = set()
    for name in topics:
        meta = services.metadata.topic(name)
        if meta is None:
            continue  # unknown: the partitions' own errors answer
        configs = services.topic_admin.topic_configs(meta)
        if configs.get("message.downconversion.enable", "true").lower() == "false":
            out.add(name)
    return frozenset(out)


async def handle(ctx: RequestContext, request: AnyFetchRequest) -> EncodedResponse:
    services = ctx.services
    follower = request.replica_id >= 0
    infos = fetch_infos(request)
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    if not follower:
        max_bytes = min(max_bytes, services.config.fetch_max_bytes)  # fetch.max.bytes cap
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    disabled: frozenset[str] = frozenset()
    if not follower and ctx.header.api_version <= 3:
        disabled = _down_conversion_disabled(services, [t for t, _ in infos])
    denied = _denied(ctx, follower, infos)
    if disabled or denied:  # answered with an error: no long poll
        max_wait_ms = 0
        infos_read = [(t, ps) for t, ps in infos if t not in disabled and t not in denied]
    else:
        infos_read = infos
    params = FetchParams(
        request.replica_id, max_wait_ms, request.min_bytes, max_bytes, request.isolation_level
    )
    results = await services.replica_manager.fetch_messages(params, infos_read)
    if disabled or denied:
        read = iter(results)
        results = [
            (t, [FetchPartitionData(fp.partition, _UNSUPPORTED_VERSION) for fp in ps])
            if t in disabled
            else (t, [FetchPartitionData(fp.partition, _TOPIC_DENIED) for fp in ps])
            if t in denied
            else next(read)
            for t, ps in infos
        ]
    metrics = ctx.metrics
    if metrics is not None and not follower:
        _report_bytes_out(metrics, results)
    return encode(request, results)


def _denied(
    ctx: RequestContext, follower: bool, infos: Sequence[tuple[str, Any]]
) -> frozenset[str]:
    """Topics answered TOPIC_AUTHORIZATION_FAILED: a consumer needs READ on each, a follower
    CLUSTER_ACTION on the cluster (else every topic), as Kafka checks."""
    if not _authz.enabled(ctx):
        return frozenset()
    if follower:
        if _authz.cluster_allowed(ctx, _authz.AclOperation.CLUSTER_ACTION):
            return frozenset()
        return frozenset(t for t, _ in infos)
    return _authz.denied(
        ctx, _authz.AclOperation.READ, _authz.ResourceType.TOPIC, (t for t, _ in infos)
    )


def _report_bytes_out(metrics: TopicMetrics, results: FetchResults) -> None:
    for name, partitions in results:
        nbytes = sum(len(p.records) for p in partitions if p.records is not None)
        if nbytes:
            metrics.topic_bytes_out(name, nbytes)


def encode(
    request: AnyFetchRequest, results: Sequence[tuple[str, Sequence[FetchPartitionData]]]
) -> EncodedResponse:
    make = FetchPartitionResponse._make
    responses = [(name, [make(p) for p in partitions]) for name, partitions in results]
    parts, size = encode_fetch_response(int(request.__version__), responses)
    return EncodedResponse(parts, size)


def error_response(request: AnyFetchRequest, code: ErrorCode) -> EncodedResponse:
    results = [
        (ft.topic, [FetchPartitionData(fp.partition, code) for fp in ft.partitions])
        for ft in request.topics
    ]
    return encode(request, results)


API = ApiSpec(
    key=1,
    name="Fetch",
    min_version=0,
    max_version=12,
    handler=handle,
    min_request_version=4,
    error_response=error_response,
)
