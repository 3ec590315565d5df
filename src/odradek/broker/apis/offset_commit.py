"""OffsetCommit (8): store committed offsets (+ metadata string) in ``__consumer_offsets``.

Generation -1 with an empty member id commits for a group that only stores offsets (allowed
while the group is Empty). Members commit with their generation (Stable or
PreparingRebalance). The answer is sent after the records were written (see
odradek.coordinator.coordinator on durability). v0/v1 are advertised but not served (kio
starts at v2); v2-v4 retention_time is ignored (offsets.retention.minutes applies).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, commit_entries, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.protocol._primitives import uvarint

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        OffsetCommitRequest,
        OffsetCommitRequestV7,
        OffsetCommitRequestV8,
        OffsetCommitRequestV9,
        OffsetCommitResponse,
    )

__all__ = ["API", "encode_response", "handle"]

_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ih")  # partition_index int32, error_code int16
_FLEXIBLE_FROM = 8


def encode_response(version: int, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> bytes:
    """OffsetCommitResponse body, hand-encoded (commits are hot; kio's encoder is slow).

    v2: topics; v3+: throttle_time_ms int32 (0) first. v8+ is flexible: compact arrays and
    strings (uvarint length + 1) and an empty tagged-field section after each partition, topic
    and the body. No tagged field is ever written (no client reads one in these APIs).
    """
    flexible = version >= _FLEXIBLE_FROM
    parts = [] if version < 3 else [b"\x00\x00\x00\x00"]
    parts.append(uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, partitions in topics:
        raw = name.encode()
        parts.append(uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw)))
        parts.append(raw)
        parts.append(uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        for index, error in partitions:
            parts.append(_PARTITION.pack(index, error))
            if flexible:
                parts.append(b"\x00")
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


def _names_instance(
    request: OffsetCommitRequest,
) -> TypeGuard[OffsetCommitRequestV7 | OffsetCommitRequestV8 | OffsetCommitRequestV9]:
    """v7+ carries the member's group.instance.id (KIP-345)."""
    return request.__version__ >= 7


_READ = _authz.AclOperation.READ
_TOPIC = _authz.ResourceType.TOPIC


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> EncodedResponse:
    coord = coordinator(ctx)
    # with an authorizer: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED)
    # and on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED, nothing committed)
    if not _authz.allowed(ctx, _READ, _authz.ResourceType.GROUP, request.group_id):
        denied: frozenset[str] = frozenset(t.name for t in request.topics)
        group_denied = True
    else:
        denied = _authz.denied(ctx, _READ, _TOPIC, (t.name for t in request.topics))
        group_denied = False
    refused = 30 if group_denied else 29  # GROUP_/TOPIC_AUTHORIZATION_FAILED
    entries = [e for e in commit_entries(request) if e.topic not in denied]
    errors = await coord.commit_offsets(
        request.group_id,
        int(request.generation_id_or_member_epoch),
        request.member_id,
        request.group_instance_id if _names_instance(request) else None,
        entries,
    )
    it = iter(errors)
    body = encode_response(
        int(request.__version__),
        [
            (
                t.name,
                [
                    (int(p.partition_index), refused if t.name in denied else int(next(it)))
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )
    return EncodedResponse((body,), len(body))


def kio_response(request: OffsetCommitRequest, errors: Sequence[int]) -> OffsetCommitResponse:
    """The same response as a kio entity (the reference the hand-written encoder is tested against)."""
    types = response_types(request)
    it = iter(errors)
    topics = tuple(
        make(
            types.OffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    types.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=code(next(it)),
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return cast(
        "OffsetCommitResponse",
        make(types.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics),
    )


API = ApiSpec(
    key=8, name="OffsetCommit", min_version=0, max_version=9, handler=handle, min_request_version=2
)
