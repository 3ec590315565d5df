"""ListOffsets (2): offsets by timestamp (Kafka's ``Partition.fetchOffsetForTimestamp``).

timestamp -2 (earliest) → log start offset; -1 (latest) → the last fetchable offset; -3 (max
timestamp, v7+) → offset and timestamp of the record with the largest timestamp; -4 (earliest
local) → log start offset; t ≥ 0 → the first offset whose timestamp is ≥ t, if it is below the
last fetchable offset (else offset -1 and timestamp -1). The constants are
``odradek.protocol.offsets``'.

The last fetchable offset: for a consumer, the high watermark (isolation_level 0) or the last
stable offset (1, read_committed); for a follower (replica_id ≥ 0), the log end offset.

A leader just elected may have a high watermark below the log end offset it took its epoch at
(``Partition.leader_epoch_start_offset``): it learns the real one from its followers' next
fetches. Until then its latest offset may be below what the previous leader already gave out,
so a consumer asking for the latest offset, or for a timestamp not found below the last
fetchable offset, gets OFFSET_NOT_AVAILABLE (78, retriable), as from Kafka.

A partition this broker does not lead → NOT_LEADER_OR_FOLLOWER; from v4 a request's
current_leader_epoch (when ≥ 0) must be the partition's (older → FENCED_LEADER_EPOCH, newer →
UNKNOWN_LEADER_EPOCH). Every rule above is ``Partition.fetch_offset_for_timestamp``'s, asked
through ``ReplicaManager.fetch_offsets_for_timestamps``; this module decodes and encodes.
Advertised from v0, served from v1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]

if TYPE_CHECKING:
    # Only for the checker: importing the 18 kio classes costs the broker's start-up (the
    # version a request uses is imported when it is first decoded); ``handle`` goes by
    # ``__version__``, narrowed by TypeGuards.
    from kio.schema.list_offsets.v1.request import ListOffsetsRequest as ListOffsetsRequestV1
    from kio.schema.list_offsets.v1.response import ListOffsetsResponse as ListOffsetsResponseV1
    from kio.schema.list_offsets.v2.request import ListOffsetsRequest as ListOffsetsRequestV2
    from kio.schema.list_offsets.v2.response import ListOffsetsResponse as ListOffsetsResponseV2
    from kio.schema.list_offsets.v3.request import ListOffsetsRequest as ListOffsetsRequestV3
    from kio.schema.list_offsets.v3.response import ListOffsetsResponse as ListOffsetsResponseV3
    from kio.schema.list_offsets.v4.request import ListOffsetsRequest as ListOffsetsRequestV4
    from kio.schema.list_offsets.v4.response import ListOffsetsResponse as ListOffsetsResponseV4
    from kio.schema.list_offsets.v5.request import ListOffsetsRequest as ListOffsetsRequestV5
    from kio.schema.list_offsets.v5.response import ListOffsetsResponse as ListOffsetsResponseV5
    from kio.schema.list_offsets.v6.request import ListOffsetsRequest as ListOffsetsRequestV6
    from kio.schema.list_offsets.v6.response import ListOffsetsResponse as ListOffsetsResponseV6
    from kio.schema.list_offsets.v7.request import ListOffsetsRequest as ListOffsetsRequestV7
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse as ListOffsetsResponseV7
    from kio.schema.list_offsets.v8.request import ListOffsetsRequest as ListOffsetsRequestV8
    from kio.schema.list_offsets.v8.response import ListOffsetsResponse as ListOffsetsResponseV8
    from kio.schema.list_offsets.v9.request import ListOffsetsRequest as ListOffsetsRequestV9
    from kio.schema.list_offsets.v9.response import ListOffsetsResponse as ListOffsetsResponseV9

    AnyListOffsetsRequest = (
        ListOffsetsRequestV1
        | ListOffsetsRequestV2
        | ListOffsetsRequestV3
        | ListOffsetsRequestV4
        | ListOffsetsRequestV5
        | ListOffsetsRequestV6
        | ListOffsetsRequestV7
        | ListOffsetsRequestV8
        | ListOffsetsRequestV9
    )
    """The versions decoded here (v0 arrives upgraded by ``protocol.legacy_versions``)."""
    AnyListOffsetsResponse = (
        ListOffsetsResponseV1
        | ListOffsetsResponseV2
        | ListOffsetsResponseV3
        | ListOffsetsResponseV4
        | ListOffsetsResponseV5
        | ListOffsetsResponseV6
        | ListOffsetsResponseV7
        | ListOffsetsResponseV8
        | ListOffsetsResponseV9
    )


def _v1(request: AnyListOffsetsRequest) -> TypeGuard[ListOffsetsRequestV1]:
    return request.__version__ == 1


def _v2_v3(
    request: AnyListOffsetsRequest,
) -> TypeGuard[ListOffsetsRequestV2 | ListOffsetsRequestV3]:
    return request.__version__ in (2, 3)


def _v4_plus(
    request: AnyListOffsetsRequest,
) -> TypeGuard[
    ListOffsetsRequestV4
    | ListOffsetsRequestV5
    | ListOffsetsRequestV6
    | ListOffsetsRequestV7
    | ListOffsetsRequestV8
    | ListOffsetsRequestV9
]:
    return request.__version__ >= 4


async def handle(ctx: RequestContext, request: AnyListOffsetsRequest) -> AnyListOffsetsResponse:
    """Decode, ask ``ReplicaManager.fetch_offsets_for_timestamps``, encode (the response is
    kio's ListOffsetsResponse of the request's version)."""
    types = response_types(request)
    entries: list[tuple[str, int, int, int]]
    if _v1(request):
        isolation_level = 0
        entries = [
            (t.name, p.partition_index, p.timestamp, -1)
            for t in request.topics
            for p in t.partitions
        ]
    elif _v2_v3(request):
        isolation_level = request.isolation_level
        entries = [
            (t.name, p.partition_index, p.timestamp, -1)
            for t in request.topics
            for p in t.partitions
        ]
    elif _v4_plus(request):  # current_leader_epoch from v4
        isolation_level = request.isolation_level
        entries = [
            (t.name, p.partition_index, p.timestamp, p.current_leader_epoch)
            for t in request.topics
            for p in t.partitions
        ]
    else:  # pragma: no cover - v1 to v9 are decoded here
        raise AssertionError(request.__version__)
    # with an authorizer: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED
    denied = _authz.denied(
        ctx,
        _authz.AclOperation.DESCRIBE,
        _authz.ResourceType.TOPIC,
        (t.name for t in request.topics),
    )
    answers = await ctx.services.replica_manager.fetch_offsets_for_timestamps(
        [e for e in entries if e[0] not in denied] if denied else entries,
        replica_id=request.replica_id,
        isolation_level=isolation_level,
    )
    found = iter(answers)
    refused = (ErrorCode.topic_authorization_failed, -1, -1, -1)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, ts, offset, epoch = refused if t.name in denied else next(found)
            parts.append(
                make(
                    types.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                    old_style_offsets=(offset,) if offset >= 0 else (),
                )
            )
        topics.append(make(types.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    response: AnyListOffsetsResponse = make(
        types.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)
    )
    return response


API = ApiSpec(
    key=2, name="ListOffsets", min_version=0, max_version=9, handler=handle, min_request_version=1
)
