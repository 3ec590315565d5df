"""GetTelemetrySubscriptions (71, v0; KIP-714): the metrics a client instance is to push and
how often. A zero client instance id gets a new one; the answer is
``ClientTelemetryManager.get_subscriptions`` (``broker/client_telemetry.py``: subscriptions,
subscription ids, THROTTLING_QUOTA_EXCEEDED for a client asking again within its interval).
"""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
    )

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: GetTelemetrySubscriptionsRequest
) -> GetTelemetrySubscriptionsResponse:
    answer = ctx.services.client_telemetry.get_subscriptions(
        request.client_instance_id, ctx.header.client_id or "", ctx.client_host
    )
    return cast(
        "GetTelemetrySubscriptionsResponse",
        make(
            response_types(request).GetTelemetrySubscriptionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=answer.error,
            client_instance_id=answer.client_instance_id,
            subscription_id=i32(answer.subscription_id),
            accepted_compression_types=tuple(i8(c) for c in answer.accepted_compression_types),
            push_interval=datetime.timedelta(milliseconds=answer.push_interval_ms),
            telemetry_max_bytes=i32(answer.telemetry_max_bytes),
            delta_temporality=answer.delta_temporality,
            requested_metrics=answer.requested_metrics,
        ),
    )


def error_response(
    request: GetTelemetrySubscriptionsRequest, code: ErrorCode
) -> GetTelemetrySubscriptionsResponse:
    return cast(
        "GetTelemetrySubscriptionsResponse",
        make(
            response_types(request).GetTelemetrySubscriptionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            client_instance_id=uuid.UUID(int=0),
            subscription_id=i32(0),
            push_interval=datetime.timedelta(0),
            telemetry_max_bytes=i32(0),
            delta_temporality=False,
        ),
    )


API = ApiSpec(
    key=71,
    name="GetTelemetrySubscriptions",
    min_version=0,
    max_version=0,
    handler=handle,
    error_response=error_response,
)
