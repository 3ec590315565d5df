"""DeleteTopics (20): delete topics by name (or by id, v6+) with their logs.

Unknown topic → UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id); internal topics
(__consumer_offsets) → INVALID_REQUEST; ``delete.topic.enable=false`` → TOPIC_DELETION_DISABLED.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypeGuard, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz, _quotas
from odradek.broker.apis._util import make, response_types
from odradek.broker.metadata_store import MetadataUnavailableError

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        DeleteTopicsRequest,
        DeleteTopicsRequestV1,
        DeleteTopicsRequestV2,
        DeleteTopicsRequestV3,
        DeleteTopicsRequestV4,
        DeleteTopicsRequestV5,
        DeleteTopicsRequestV6,
        DeleteTopicsResponse,
    )

__all__ = ["API", "handle"]


def _by_name(
    request: DeleteTopicsRequest,
) -> TypeGuard[
    DeleteTopicsRequestV1
    | DeleteTopicsRequestV2
    | DeleteTopicsRequestV3
    | DeleteTopicsRequestV4
    | DeleteTopicsRequestV5
]:
    """v1-v5 name topics; v6+ name them or give their ids (KIP-516)."""
    return request.__version__ < 6


def _by_name_or_id(request: DeleteTopicsRequest) -> TypeGuard[DeleteTopicsRequestV6]:
    return request.__version__ >= 6


_DELETE = _authz.AclOperation.DELETE
_TOPIC = _authz.ResourceType.TOPIC


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    services = ctx.services
    types = response_types(request)
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if _by_name(request):
        wanted = [(name, None) for name in request.topic_names]
    elif _by_name_or_id(request):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    results = []
    quota = _quotas.mutation_quota(ctx, request, strict_since=5)
    for name, topic_id in wanted:
        meta = services.metadata.topic(name) if name else None
        if meta is None and name is None and topic_id is not None:
            meta = services.metadata.topic_by_id(topic_id)
        message = None
        target = meta.name if meta is not None else name
        if target is not None and not _authz.allowed(ctx, _DELETE, _TOPIC, target):
            code = ErrorCode.topic_authorization_failed  # Kafka: DELETE on the topic, first
        elif meta is None:
            code = (
                ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
            )
        elif not services.config.delete_topic_enable:
            code = ErrorCode.topic_deletion_disabled
        elif meta.internal:
            code, message = (
                ErrorCode.invalid_request,
                f"internal topic {meta.name!r} cannot be deleted",
            )
        elif quota is not None and not quota.record(meta.num_partitions):
            # controller_mutation_rate (apis/_quotas.py); Kafka gives no message here
            code = _quotas.QUOTA_EXCEEDED
        else:
            try:
                await services.topic_admin.delete_topic(meta.name)
                code = ErrorCode.none
            except MetadataUnavailableError as exc:
                code, message = ErrorCode.request_timed_out, str(exc)
        results.append(
            make(
                types.DeletableTopicResult,
                name=meta.name if meta is not None else name,
                topic_id=meta.topic_id if meta is not None else topic_id,
                error_code=code,
                error_message=message,
            )
        )
    return cast(
        "DeleteTopicsResponse",
        make(
            types.DeleteTopicsResponse,
            throttle_time=_quotas.throttle(ctx, quota),
            responses=tuple(results),
        ),
    )


API = ApiSpec(
    key=20,
    name="DeleteTopics",
    min_version=0,
    max_version=6,
    handler=handle,
    min_request_version=1,
)
