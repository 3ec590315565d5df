"""OffsetFetch (9): committed offsets of a group.

``topics`` null (v2+) asks for every partition the group has committed. v8+ asks for several
groups at once (``groups``). A partition without a committed offset answers offset -1 and
empty metadata. v1 has no top-level error: a group error is repeated on every partition. With
``require_stable`` (v7+, KIP-447) a partition whose offset is committed in a transaction not
yet ended answers UNSTABLE_OFFSET_COMMIT (the client retries), so a read_committed consumer
does not start from an offset an ongoing transaction is about to replace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.state import Errors

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        OffsetFetchRequest,
        OffsetFetchRequestV1,
        OffsetFetchRequestV2,
        OffsetFetchRequestV3,
        OffsetFetchRequestV4,
        OffsetFetchRequestV5,
        OffsetFetchRequestV6,
        OffsetFetchRequestV7,
        OffsetFetchRequestV8,
        OffsetFetchRequestV9,
        OffsetFetchResponse,
    )

__all__ = ["API", "handle"]


_DENIED = object()
"""In place of a partition's committed offset: the principal may not DESCRIBE its topic."""


def _fetch(
    ctx: RequestContext, group_id: str, topics: Any
) -> tuple[Errors | ErrorCode, list[tuple[str, list[tuple[int, Any]]]]]:
    coord = coordinator(ctx)
    wanted = (
        None
        if topics is None
        else [(t.name, [int(p) for p in t.partition_indexes]) for t in topics]
    )
    if not _authz.allowed(ctx, _DESCRIBE, _authz.ResourceType.GROUP, group_id):
        refused = [(t, [(p, None) for p in parts]) for t, parts in wanted or ()]
        return ErrorCode.group_authorization_failed, refused
    error, fetched = coord.fetch_offsets(group_id, wanted)
    if error is not Errors.NONE and wanted is not None:
        return error, [(t, [(p, None) for p in parts]) for t, parts in wanted]
    result: list[tuple[str, list[tuple[int, Any]]]] = list(fetched)
    if _authz.enabled(ctx):  # Kafka: all topics → the describable ones; named → an error each
        denied = _authz.denied(ctx, _DESCRIBE, _authz.ResourceType.TOPIC, (t for t, _ in result))
        if wanted is None:
            result = [(t, parts) for t, parts in result if t not in denied]
        else:
            result = [
                (t, [(p, _DENIED) for p, _ in parts] if t in denied else parts)
                for t, parts in result
            ]
    return error, result


def _topics(
    types: Any,
    topic_cls: str,
    part_cls: str,
    result: Any,
    part_error: Errors | ErrorCode,
    unstable: Callable[[str, int], bool] | None = None,
) -> tuple[Any, ...]:
    out = []
    for topic, parts in result:
        partitions = []
        for partition, om in parts:
            if om is _DENIED:
                partitions.append(
                    make(
                        getattr(types, part_cls),
                        partition_index=partition,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.topic_authorization_failed,
                    )
                )
                continue
            if unstable is not None and unstable(topic, partition):
                partitions.append(
                    make(
                        getattr(types, part_cls),
                        partition_index=partition,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=code(Errors.UNSTABLE_OFFSET_COMMIT),
                    )
                )
                continue
            partitions.append(
                make(
                    getattr(types, part_cls),
                    partition_index=partition,
                    committed_offset=-1 if om is None else om.offset,
                    committed_leader_epoch=-1 if om is None else om.leader_epoch,
                    metadata="" if om is None else om.metadata,
                    error_code=code(part_error),
                )
            )
        out.append(make(getattr(types, topic_cls), name=topic, partitions=tuple(partitions)))
    return tuple(out)


def _one_group(
    request: OffsetFetchRequest,
) -> TypeGuard[
    OffsetFetchRequestV1
    | OffsetFetchRequestV2
    | OffsetFetchRequestV3
    | OffsetFetchRequestV4
    | OffsetFetchRequestV5
    | OffsetFetchRequestV6
    | OffsetFetchRequestV7
]:
    """v1-v7 ask for one group."""
    return request.__version__ < 8


def _groups(request: OffsetFetchRequest) -> TypeGuard[OffsetFetchRequestV8 | OffsetFetchRequestV9]:
    """v8+ ask for several groups at once (KIP-709)."""
    return request.__version__ >= 8


def _may_require_stable(
    request: OffsetFetchRequest,
) -> TypeGuard[OffsetFetchRequestV7 | OffsetFetchRequestV8 | OffsetFetchRequestV9]:
    """v7+ may require stable offsets (KIP-447)."""
    return request.__version__ >= 7


def _unstable(
    ctx: RequestContext, request: OffsetFetchRequest, group_id: str
) -> Callable[[str, int], bool] | None:
    if not (_may_require_stable(request) and request.require_stable):
        return None
    coord = coordinator(ctx)
    return lambda topic, partition: coord.has_pending_txn_offset(group_id, topic, partition)


_DESCRIBE = _authz.AclOperation.DESCRIBE


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    types = response_types(request)
    version = int(request.__version__)
    if _groups(request):
        groups = []
        for g in request.groups:
            error, result = _fetch(ctx, g.group_id, g.topics)
            groups.append(
                make(
                    types.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    topics=_topics(
                        types,
                        "OffsetFetchResponseTopics",
                        "OffsetFetchResponsePartitions",
                        result,
                        Errors.NONE,
                        _unstable(ctx, request, g.group_id),
                    ),
                    error_code=code(error),
                )
            )
        return cast(
            "OffsetFetchResponse",
            make(types.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)),
        )
    if not _one_group(request):  # pragma: no cover - every version is one or the other
        raise AssertionError(version)
    error, result = _fetch(ctx, request.group_id, request.topics)
    part_error = error if version < 2 else Errors.NONE
    return cast(
        "OffsetFetchResponse",
        make(
            types.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=_topics(
                types,
                "OffsetFetchResponseTopic",
                "OffsetFetchResponsePartition",
                result,
                part_error,
                _unstable(ctx, request, request.group_id),
            ),
            error_code=code(error),
        ),
    )


API = ApiSpec(
    key=9, name="OffsetFetch", min_version=0, max_version=9, handler=handle, min_request_version=1
)
