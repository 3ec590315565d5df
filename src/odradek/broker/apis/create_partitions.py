"""CreatePartitions (37): raise a topic's partition count.

Unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one →
INVALID_PARTITIONS; assignments naming another broker → INVALID_REPLICA_ASSIGNMENT;
validate_only checks without changing anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz, _quotas
from odradek.broker.apis._util import make, response_types
from odradek.broker.metadata_store import MetadataUnavailableError

if TYPE_CHECKING:
    from odradek.protocol.api_types import CreatePartitionsRequest, CreatePartitionsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    services = ctx.services
    types = response_types(request)
    results = []
    seen: set[str] = set()
    quota = _quotas.mutation_quota(ctx, request, strict_since=3)
    for t in request.topics:
        meta = services.metadata.topic(t.name)
        message: str | None = None
        if t.name in seen:
            code, message = ErrorCode.invalid_request, "duplicate topic in request"
        elif not _authz.allowed(ctx, _authz.AclOperation.ALTER, _authz.ResourceType.TOPIC, t.name):
            code = ErrorCode.topic_authorization_failed  # Kafka: ALTER on the topic
        elif meta is None:
            code = ErrorCode.unknown_topic_or_partition
        elif t.count <= meta.num_partitions:
            code = ErrorCode.invalid_partitions
            message = f"Topic currently has {meta.num_partitions} partitions, which is higher than the requested {t.count}."
            if t.count == meta.num_partitions:
                message = f"Topic already has {meta.num_partitions} partitions."
        elif t.assignments is not None and (
            len(t.assignments) != t.count - meta.num_partitions
            or any(tuple(a.broker_ids) != (services.node_id,) for a in t.assignments)
        ):
            code, message = (
                ErrorCode.invalid_replica_assignment,
                f"only broker {services.node_id} exists",
            )
        elif (
            not request.validate_only
            and quota is not None
            and not quota.record(t.count - meta.num_partitions)
        ):  # controller_mutation_rate (apis/_quotas.py)
            code, message = _quotas.QUOTA_EXCEEDED, _quotas.QUOTA_EXCEEDED_MESSAGE
        else:
            code = ErrorCode.none
            if not request.validate_only:
                try:
                    await services.topic_admin.add_partitions(t.name, t.count)
                except MetadataUnavailableError as exc:
                    code, message = ErrorCode.request_timed_out, str(exc)
        seen.add(t.name)
        results.append(
            make(
                types.CreatePartitionsTopicResult,
                name=t.name,
                error_code=code,
                error_message=message,
            )
        )
    return cast(
        "CreatePartitionsResponse",
        make(
            types.CreatePartitionsResponse,
            throttle_time=_quotas.throttle(ctx, quota),
            results=tuple(results),
        ),
    )


API = ApiSpec(key=37, name="CreatePartitions", min_version=0, max_version=3, handler=handle)
