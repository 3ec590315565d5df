"""Fetch (1): read record batches, long polling with min_bytes / max_wait_ms.

Advertised v0-v17, served from v4. A consumer (replica_id < 0) reads below the high
watermark; a follower (replica_id ≥ 0) to the log end.

Topic ids (v13+, KIP-516): the request names each topic by its id and the response answers
by id. The handler maps ids to names through the metadata image before asking the replica
manager: an id the image does not know (the topic was deleted, or deleted and created again
under the same name) → UNKNOWN_TOPIC_ID for each of its partitions; an id the image knows
but a local replica was created under another id (a LeaderAndIsr named it, and the image has
not caught up) → INCONSISTENT_TOPIC_ID, as in Kafka. v15 moves replica_id into the tagged
``replica_state`` (KIP-903); v17 adds the follower's directory id (KIP-853), which is read
and ignored. From v16 a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
carries ``current_leader`` (the leader and epoch the metadata image knows) and the response
the leaders' ``node_endpoints`` (KIP-951), so a client moves without a Metadata round trip.

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

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext, TopicMetrics
from odradek.broker.apis import _authz
from odradek.broker.replica_manager import (
    FetchParams,
    FetchPartitionData,
    FetchPartitionInfo,
    FetchResults,
)
from odradek.broker.services import BrokerServices
from odradek.protocol.fetch_response import (
    FetchPartitionResponse,
    NodeEndpoint,
    encode_fetch_response,
)

__all__ = ["API", "handle", "throttled_response"]

if TYPE_CHECKING:
    # Only for the checker: importing the 14 kio versions costs the broker's start-up about
    # 0.15 s (the one a request uses is imported when it is first decoded); the checks below
    # go by ``__version__``, narrowed by TypeGuards.
    from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
    from kio.schema.fetch.v5.request import FetchRequest as FetchRequestV5
    from kio.schema.fetch.v6.request import FetchRequest as FetchRequestV6
    from kio.schema.fetch.v7.request import FetchRequest as FetchRequestV7
    from kio.schema.fetch.v8.request import FetchRequest as FetchRequestV8
    from kio.schema.fetch.v9.request import FetchRequest as FetchRequestV9
    from kio.schema.fetch.v10.request import FetchRequest as FetchRequestV10
    from kio.schema.fetch.v11.request import FetchRequest as FetchRequestV11
    from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12
    from kio.schema.fetch.v13.request import FetchRequest as FetchRequestV13
    from kio.schema.fetch.v14.request import FetchRequest as FetchRequestV14
    from kio.schema.fetch.v15.request import FetchRequest as FetchRequestV15
    from kio.schema.fetch.v16.request import FetchRequest as FetchRequestV16
    from kio.schema.fetch.v17.request import FetchRequest as FetchRequestV17

    # the versions decoded here (older ones arrive upgraded by ``protocol.legacy_versions``)
    from odradek.protocol.api_types import FetchRequest

    ByIdFetchRequest = (
        FetchRequestV13 | FetchRequestV14 | FetchRequestV15 | FetchRequestV16 | FetchRequestV17
    )
    """The versions that name topics by id."""

    ByNameFetchRequest = (
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
    """The versions that name topics by name."""

_UNSUPPORTED_VERSION = ErrorCode.unsupported_version
_UNKNOWN_TOPIC_ID = ErrorCode.unknown_topic_id
_INCONSISTENT_TOPIC_ID = ErrorCode.inconsistent_topic_id
_LEADER_MOVED = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})
_ZERO_UUID = uuid.UUID(int=0)


def _by_id(request: FetchRequest) -> TypeGuard[ByIdFetchRequest]:
    """v13+ names topics by id (KIP-516)."""
    return request.__version__ >= 13


def _by_name(request: FetchRequest) -> TypeGuard[ByNameFetchRequest]:
    """v4-v12 name topics by name."""
    return request.__version__ < 13


def _v15_plus(
    request: FetchRequest,
) -> TypeGuard[FetchRequestV15 | FetchRequestV16 | FetchRequestV17]:
    return request.__version__ >= 15


def _v12(request: FetchRequest) -> TypeGuard[FetchRequestV12]:
    return request.__version__ == 12


def _v9_to_v11(
    request: FetchRequest,
) -> TypeGuard[FetchRequestV9 | FetchRequestV10 | FetchRequestV11]:
    return 9 <= request.__version__ <= 11


def _before_v15(
    request: FetchRequest,
) -> TypeGuard[ByNameFetchRequest | FetchRequestV13 | FetchRequestV14]:
    return request.__version__ < 15


def replica_id(request: FetchRequest) -> int:
    """The fetching replica's broker id, -1 for a consumer (v15+: in ``replica_state``)."""
    if _before_v15(request):
        return int(request.replica_id)
    if _v15_plus(request):
        return int(request.replica_state.replica_id)
    raise AssertionError(request.__version__)  # pragma: no cover - one or the other


_TOPIC_DENIED = ErrorCode.topic_authorization_failed


def fetch_infos(request: FetchRequest) -> list[tuple[str, list[FetchPartitionInfo]]]:
    """The request's partitions as ``ReplicaManager.fetch_messages`` takes them; from v13 the
    topic is the id's text (``str(uuid)``) until ``handle`` maps it to a name."""
    if _by_id(request):
        return [
            (str(topic_id), partitions)
            for topic_id, partitions in zip(
                _topic_ids(request), _partition_infos_by_id(request), strict=True
            )
        ]
    if not _by_name(request):  # pragma: no cover - every version is one or the other
        raise AssertionError(request.__version__)
    if _v12(request):
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
    if _v9_to_v11(request):
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


def _topic_ids(request: ByIdFetchRequest) -> list[uuid.UUID]:
    return [ft.topic_id or _ZERO_UUID for ft in request.topics]


def _partition_infos_by_id(request: ByIdFetchRequest) -> list[list[FetchPartitionInfo]]:
    """v13+: the partitions asked for, per requested topic id, in request order."""
    return [
        [
            FetchPartitionInfo(
                fp.partition,
                fp.fetch_offset,
                fp.partition_max_bytes,
                fp.current_leader_epoch,
                fp.last_fetched_epoch,
            )
            for fp in ft.partitions
        ]
        for ft in request.topics
    ]


def _resolve_ids(
    services: BrokerServices, ids: Sequence[uuid.UUID], infos: Sequence[list[FetchPartitionInfo]]
) -> tuple[list[tuple[str, list[FetchPartitionInfo]]], dict[int, ErrorCode]]:
    """v13+: the requested topics the metadata image knows by id, by name, in request order;
    and by request index the error of the others (UNKNOWN_TOPIC_ID, or INCONSISTENT_TOPIC_ID
    when a local replica of it was created under another id)."""
    topic_by_id = services.metadata.topic_by_id
    inconsistent = services.replica_manager.has_inconsistent_topic_id
    named: list[tuple[str, list[FetchPartitionInfo]]] = []
    failed: dict[int, ErrorCode] = {}
    for i, (topic_id, partitions) in enumerate(zip(ids, infos, strict=True)):
        meta = topic_by_id(topic_id)
        if meta is None:
            failed[i] = _UNKNOWN_TOPIC_ID
        elif inconsistent(meta.name, topic_id, (info.partition for info in partitions)):
            failed[i] = _INCONSISTENT_TOPIC_ID
        else:
            named.append((meta.name, partitions))
    return named, failed


async def handle(ctx: RequestContext, request: FetchRequest) -> EncodedResponse:
    services = ctx.services
    follower = replica_id(request) >= 0
    ids: list[uuid.UUID] | None = None
    by_id_infos: list[list[FetchPartitionInfo]] = []
    failed: dict[int, ErrorCode] = {}
    if _by_id(request):  # names looked up once per topic; no id is formatted
        ids = _topic_ids(request)
        by_id_infos = _partition_infos_by_id(request)
        infos_by_name, failed = _resolve_ids(services, ids, by_id_infos)
    else:
        infos_by_name = fetch_infos(request)
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    if not follower:
        max_bytes = min(max_bytes, services.config.fetch_max_bytes)  # fetch.max.bytes cap
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    disabled: frozenset[str] = frozenset()
    if not follower and ctx.header.api_version <= 3:
        disabled = _down_conversion_disabled(services, [t for t, _ in infos_by_name])
    denied = _denied(ctx, follower, infos_by_name)
    if disabled or denied:  # answered with an error: no long poll
        max_wait_ms = 0
        infos_read = [(t, ps) for t, ps in infos_by_name if t not in disabled and t not in denied]
    else:
        infos_read = infos_by_name
    if failed:  # an error answers at once, as an unknown topic by name does
        max_wait_ms = 0
    rack_id = getattr(request, "rack_id", None)  # KIP-392: v11+
    rack = None if rack_id is None else str(rack_id)
    params = FetchParams(
        replica_id(request),
        max_wait_ms,
        request.min_bytes,
        max_bytes,
        request.isolation_level,
        None if follower else rack,
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
            for t, ps in infos_by_name
        ]
    metrics = ctx.metrics
    if metrics is not None and not follower:
        _report_bytes_out(metrics, results)
    throttle_ms = 0
    if not follower:  # consumer_byte_rate: the record bytes answered
        throttle_ms = services.quotas.record(
            "consumer_byte_rate",
            ctx.principal.name,
            ctx.header.client_id,
            sum(len(p.records) for _, ps in results for p in ps if p.records is not None),
            services.clock,
            ctx.throttle,
            unrecord_if_throttled=True,
        )
        if throttle_ms > 0:  # Kafka answers a throttled consumer with no partition at all
            return throttled_response(request, throttle_ms)
    if ids is None:
        return encode(request, results, throttle_ms)
    by_id: list[tuple[str | uuid.UUID, Sequence[FetchPartitionData]]]
    if not failed:
        by_id = [(topic_id, r[1]) for topic_id, r in zip(ids, results, strict=True)]
    else:
        read = iter(results)
        by_id = []
        for i, (topic_id, partitions) in enumerate(zip(ids, by_id_infos, strict=True)):
            error = failed.get(i)
            if error is None:
                by_id.append((topic_id, next(read)[1]))
            else:
                by_id.append(
                    (topic_id, [FetchPartitionData(p.partition, error) for p in partitions])
                )
    if request.__version__ >= 16 and any(
        p.error in _LEADER_MOVED for _, partitions in results for p in partitions
    ):  # KIP-951's leader hints only where a leader moved: else v16+ encodes as v13-15
        return _encode_with_leaders(services, request, results, by_id, throttle_ms)
    return encode(request, by_id, throttle_ms)


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
    request: FetchRequest,
    results: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionData]]],
    throttle_time_ms: int = 0,
) -> EncodedResponse:
    """Encode ``results`` (topics by name up to v12, by id from v13)."""
    make = FetchPartitionResponse
    responses = [(topic, [make(*p) for p in partitions]) for topic, partitions in results]
    parts, size = encode_fetch_response(
        int(request.__version__), responses, throttle_time_ms=throttle_time_ms
    )
    return EncodedResponse(parts, size)


def throttled_response(request: FetchRequest, throttle_time_ms: int) -> EncodedResponse:
    """A consumer's Fetch answered over one of its quotas (``consumer_byte_rate``, or
    ``request_percentage`` as the connection charges it): ``throttle_time_ms`` and no partition,
    as Kafka's ``FetchContext.getThrottledResponse`` (no fetch session is kept here)."""
    return encode(request, [], throttle_time_ms)


def _encode_with_leaders(
    services: BrokerServices,
    request: FetchRequest,
    names: FetchResults,
    results: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionData]]],
    throttle_time_ms: int = 0,
) -> EncodedResponse:
    """v16+: a partition whose leader moved carries ``current_leader`` and the response the
    leaders' endpoints (KIP-951), from the metadata image."""
    store = services.metadata
    id_to_name = {}
    for read_name, _ in names:
        meta = store.topic(read_name)
        if meta is not None:
            id_to_name[meta.topic_id] = read_name
    endpoints: dict[int, NodeEndpoint] = {}
    responses: list[tuple[str | uuid.UUID, list[FetchPartitionResponse]]] = []
    for topic, partitions in results:
        name = id_to_name.get(topic) if isinstance(topic, uuid.UUID) else None
        out = []
        for p in partitions:
            leader = None
            if name is not None and p.error in _LEADER_MOVED:
                state = store.partition(name, p.partition)
                broker = store.broker(state.leader) if state is not None else None
                if state is not None and broker is not None:
                    leader = (state.leader, state.leader_epoch)
                    endpoints[broker.node_id] = (
                        broker.node_id,
                        broker.host,
                        broker.port,
                        broker.rack,
                    )
            out.append(FetchPartitionResponse(*p, current_leader=leader))
        responses.append((topic, out))
    parts, size = encode_fetch_response(
        int(request.__version__),
        responses,
        node_endpoints=list(endpoints.values()),
        throttle_time_ms=throttle_time_ms,
    )
    return EncodedResponse(parts, size)


def error_response(request: FetchRequest, code: ErrorCode) -> EncodedResponse:
    results: list[tuple[str | uuid.UUID, Sequence[FetchPartitionData]]]
    if _by_id(request):
        results = [
            (
                ft.topic_id or _ZERO_UUID,
                [FetchPartitionData(fp.partition, code) for fp in ft.partitions],
            )
            for ft in request.topics
        ]
    elif _by_name(request):
        results = [
            (ft.topic, [FetchPartitionData(fp.partition, code) for fp in ft.partitions])
            for ft in request.topics
        ]
    else:  # pragma: no cover - every version is one or the other
        raise AssertionError(request.__version__)
    return encode(request, results)


API = ApiSpec(
    key=1,
    name="Fetch",
    min_version=0,
    max_version=17,
    handler=handle,
    min_request_version=4,
    error_response=error_response,
)
