"""``controller_mutation_rate`` (KIP-599) for CreateTopics, CreatePartitions and DeleteTopics.

A request's quota comes from ``QuotaStore.mutation_quota`` for its principal and client id
(Kafka's eight-level precedence). From CreateTopics v6, CreatePartitions v3 and DeleteTopics v5
it is strict: each topic, in request order, takes its partitions (created, added or deleted)
from the token bucket, and a topic met while the bucket is below zero is refused with
THROTTLING_QUOTA_EXCEEDED (89) and not changed. Older versions are permissive, as Kafka's: every
topic is changed. Either way, once the bucket is below zero the response carries the time
until it is back at zero in ``throttle_time_ms`` and the connection is muted for that long
(Kafka's ``sendResponseMaybeThrottleWithControllerQuota``; the request_percentage throttle is
added by the connection, the larger wins). validate_only takes nothing.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import RequestContext
from odradek.security.quota_store import ControllerMutationQuota

__all__ = ["QUOTA_EXCEEDED", "QUOTA_EXCEEDED_MESSAGE", "mutation_quota", "throttle"]

QUOTA_EXCEEDED = ErrorCode.throttling_quota_exceeded
QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."
"""Kafka's message for THROTTLING_QUOTA_EXCEEDED."""


def mutation_quota(
    ctx: RequestContext, request: Any, strict_since: int
) -> ControllerMutationQuota | None:
    """The request's quota (None: no ``controller_mutation_rate`` applies)."""
    services = ctx.services
    if not services.quotas.configs:
        return None
    strict = int(request.__version__) >= strict_since
    return services.quotas.mutation_quota(
        ctx.principal.name, ctx.header.client_id, strict, services.clock
    )


def throttle(ctx: RequestContext, quota: ControllerMutationQuota | None) -> datetime.timedelta:
    """The response's throttle time; the connection is muted for it."""
    ms = 0 if quota is None else quota.throttle_time_ms()
    if ms > 0 and ctx.throttle is not None:
        ctx.throttle(ms)
    return datetime.timedelta(milliseconds=ms)
