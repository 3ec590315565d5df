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
UNKNOWN_LEADER_EPOCH (both ``ReplicaManager.leader_partition``). Fetch sessions (KIP-227) are declined: the response's session_id is always 0, so clients send
full fetch requests.

Replicated partitions (``Partition.controller_managed``): a follower's fetch (replica_id ≥ 0)
first records its position (``ReplicaManager.record_follower_fetch``: its LEO is the fetch
offset; the HW may move, the ISR expand) unless the fetch offset is past the log end or the
fetch diverges (below); a replica_id that is not one of the partition's
replicas → NOT_LEADER_OR_FOLLOWER. From v12, a fetch whose ``last_fetched_epoch`` (≥ 0)
diverges from the leader's log — the leader's end offset for that epoch is below the fetch
offset, or the leader's largest epoch ≤ it is older — gets no records but
``diverging_epoch`` = (that epoch, its end offset) to truncate to (KIP-320, Kafka's
``Partition.fetchRecords``).

Versions 0-3 carry the old message formats (magic 0 and 1, down-converted lazily by
``protocol.legacy_versions``). A consumer's fetch at those versions of a topic with
``message.downconversion.enable=false`` gets UNSUPPORTED_VERSION for its partitions, as in
Kafka; a follower's never does.

The record bytes a consumer's response carries are reported per topic to
``RequestContext.metrics`` (BytesOutPerSec); a follower's are not (Kafka counts those as
replication traffic).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext, TopicMetrics
from odradek.broker.services import BrokerServices
from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response
from odradek.storage.errors import OffsetOutOfRangeError

__all__ = ["API", "handle"]

_NONE = ErrorCode.none
_UNKNOWN = ErrorCode.unknown_topic_or_partition
_OUT_OF_RANGE = ErrorCode.offset_out_of_range
_STORAGE = ErrorCode.kafka_storage_error
_NOT_LEADER = ErrorCode.not_leader_or_follower
_UNSUPPORTED_VERSION = ErrorCode.unsupported_version
_NOBODY: frozenset[tuple[str, int]] = frozenset()

# (partition, error, high_watermark, last_stable_offset, log_start_offset, records or None
#  [, aborted transactions (read_committed only) [, preferred read replica, diverging epoch]]):
#  the fields of FetchPartitionResponse, in order
PartitionResult = tuple[Any, ...]


def _diverging(handle: Any, fp: Any) -> tuple[int, int] | None:
    """(epoch, end offset) when the fetcher's last fetched epoch diverges from this log."""
    last_epoch = getattr(fp, "last_fetched_epoch", -1)
    if last_epoch < 0 or not handle.controller_managed:
        return None
    epoch, end = handle.log.end_offset_for_epoch(last_epoch)
    if epoch < 0:  # no epoch this old here (log start moved): the offset checks decide
        return None
    if end < fp.fetch_offset or epoch < last_epoch:
        return epoch, end
    return None


def _read_all(
    services: BrokerServices,
    request: Any,
    follower: bool,
    refused: set[tuple[str, int]] | frozenset[tuple[str, int]],
    no_down_conversion: frozenset[str] = frozenset(),
) -> tuple[list[tuple[str, list[PartitionResult]]], int, bool]:
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    if not follower:
        remaining = min(remaining, services.config.fetch_max_bytes)  # Kafka's fetch.max.bytes cap
    total = 0
    error = False
    out: list[tuple[str, list[PartitionResult]]] = []
    leader_partition = services.replica_manager.leader_partition
    check_epoch = int(request.__version__) >= 9
    read_committed = not follower and getattr(request, "isolation_level", 0) == 1
    for ft in request.topics:
        name = ft.topic
        presults: list[PartitionResult] = []
        if name in no_down_conversion:
            presults = [
                (fp.partition, _UNSUPPORTED_VERSION, -1, -1, -1, None) for fp in ft.partitions
            ]
            out.append((name, presults))
            error = True
            continue
        for fp in ft.partitions:
            index = fp.partition
            handle, code = leader_partition(
                name, index, fp.current_leader_epoch if check_epoch else -1
            )
            if handle is None or code is not _NONE:
                presults.append((index, code, -1, -1, -1, None))
                error = True
                continue
            if refused and (name, index) in refused:  # the fetching broker is not a replica
                presults.append((index, _NOT_LEADER, -1, -1, -1, None))
                error = True
                continue
            plog = handle.log
            hw = plog.high_watermark
            leo = plog.log_end_offset
            start = plog.log_start_offset
            offset = fp.fetch_offset
            diverging = _diverging(handle, fp)
            if diverging is not None:
                presults.append((index, _NONE, hw, hw, start, None, None, -1, diverging))
                error = True  # answered at once, like an error (no long poll)
                continue
            if offset < start or offset > leo:
                presults.append((index, _OUT_OF_RANGE, hw, hw, start, None))
                error = True
                continue
            limit = leo if follower else hw
            lso = hw
            if read_committed:
                state = handle.producer_state()
                lso = limit = state.last_stable_offset(hw)
            if offset >= limit:
                presults.append((index, _NONE, hw, lso, start, None))
                continue
            budget = min(fp.partition_max_bytes, remaining)
            try:
                result = plog.read(
                    offset, max(budget, 1), max_offset=limit, min_one_batch=total == 0
                )
            except OffsetOutOfRangeError:
                presults.append((index, _OUT_OF_RANGE, hw, hw, plog.log_start_offset, None))
                error = True
                continue
            except OSError:  # storage's KafkaStorageError and plain I/O errors
                presults.append((index, _STORAGE, hw, hw, start, None))
                error = True
                continue
            records = result.records
            size = len(records)
            if size == 0:
                presults.append((index, _NONE, hw, lso, start, None))
                continue
            if total > 0 and size > budget:
                # only the first partition with data may exceed the limits
                presults.append((index, _NONE, hw, lso, start, None))
                continue
            total += size
            remaining = max(0, remaining - size)
            if read_committed:
                aborted = [
                    (a.producer_id, a.first_offset) for a in state.aborted_transactions(offset, lso)
                ]
                presults.append((index, _NONE, hw, lso, start, records, aborted))
            else:
                presults.append((index, _NONE, hw, hw, start, records))
        out.append((name, presults))
    return out, total, error


def _record_follower(services: BrokerServices, request: Any) -> set[tuple[str, int]]:
    """A follower's fetch: record its position on every replicated partition it asks for;
    the (topic, partition)s where it is not a replica."""
    replica_id = request.replica_id
    replicas = services.replica_manager
    unknown: set[tuple[str, int]] = set()
    check_epoch = int(request.__version__) >= 9
    for ft in request.topics:
        for fp in ft.partitions:
            # a follower of an older epoch (not truncated yet) must not move the HW
            epoch = fp.current_leader_epoch if check_epoch else -1
            handle, code = replicas.leader_partition(ft.topic, fp.partition, epoch)
            if handle is None or code is not _NONE or not handle.controller_managed:
                continue
            if fp.fetch_offset > handle.log.log_end_offset or _diverging(handle, fp) is not None:
                continue  # not a position on this log (Kafka records none either)
            if not replicas.record_follower_fetch(handle, replica_id, fp.fetch_offset):
                unknown.add((ft.topic, fp.partition))
    return unknown


def _down_conversion_disabled(services: BrokerServices, request: Any) -> frozenset[str]:
    """The requested topics whose message.downconversion.enable (topic config, else the
    broker's log.message.downconversion.enable) is false."""
    out = set()
    for ft in request.topics:
        meta = services.metadata.topic(ft.topic)
        if meta is None:
            continue  # unknown: the partitions' own errors answer
        configs = services.topic_admin.topic_configs(meta)
        if configs.get("message.downconversion.enable", "true").lower() == "false":
            out.add(ft.topic)
    return frozenset(out)


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    follower = request.replica_id >= 0
    refused = _record_follower(services, request) if follower else _NOBODY
    disabled: frozenset[str] = frozenset()
    if not follower and ctx.header.api_version <= 3:
        disabled = _down_conversion_disabled(services, request)
    if not follower and getattr(request, "isolation_level", 0) == 1:
        await services.replica_manager.load_producer_states(
            (ft.topic, fp.partition) for ft in request.topics for fp in ft.partitions
        )
    results, total, error = _read_all(services, request, follower, refused, disabled)
    min_bytes = request.min_bytes
    if total < min_bytes and not error and request.topics:
        max_wait_s = request.max_wait.total_seconds()
        if max_wait_s > 0:
            clock = services.clock
            deadline = clock.monotonic() + max_wait_s
            watched = [(ft.topic, fp.partition) for ft in request.topics for fp in ft.partitions]
            while True:
                left = deadline - clock.monotonic()
                if left <= 0:
                    break
                woken = await services.purgatory.wait(watched, left)
                results, total, error = _read_all(services, request, follower, refused, disabled)
                if not woken or total >= min_bytes or error:
                    break
    metrics = ctx.metrics
    if metrics is not None and total and not follower:
        _report_bytes_out(metrics, results)
    return encode(request, results)


def _partition_response(p: PartitionResult) -> FetchPartitionResponse:
    return FetchPartitionResponse(*p)


def _report_bytes_out(
    metrics: TopicMetrics, results: list[tuple[str, list[PartitionResult]]]
) -> None:
    for name, partitions in results:
        nbytes = sum(len(p[5]) for p in partitions if p[5] is not None)
        if nbytes:
            metrics.topic_bytes_out(name, nbytes)


def encode(request: Any, results: list[tuple[str, list[PartitionResult]]]) -> EncodedResponse:
    responses = [
        (name, [_partition_response(p) for p in partitions]) for name, partitions in results
    ]
    parts, size = encode_fetch_response(int(request.__version__), responses)
    return EncodedResponse(parts, size)


def error_response(request: Any, code: ErrorCode) -> Any:
    results = [
        (ft.topic, [(fp.partition, code, -1, -1, -1, None) for fp in ft.partitions])
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
