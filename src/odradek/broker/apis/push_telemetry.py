"""PushTelemetry (72, v0; KIP-714): a client instance's metrics, an OTLP ``MetricsData``
protobuf, optionally compressed (zstd, lz4, gzip, snappy). Validated, decoded and kept by
``ClientTelemetryManager.push`` (``broker/client_telemetry.py``), which names Kafka's error
for each refusal (INVALID_REQUEST, THROTTLING_QUOTA_EXCEEDED, UNKNOWN_SUBSCRIPTION_ID,
UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE, INVALID_RECORD).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.client_telemetry import decoder_loaded, load_decoder

if TYPE_CHECKING:
    from odradek.protocol.api_types import PushTelemetryRequest, PushTelemetryResponse

__all__ = ["API", "handle"]

log = logging.getLogger("odradek.broker.client_telemetry")


async def handle(ctx: RequestContext, request: PushTelemetryRequest) -> PushTelemetryResponse:
    if request.metrics and not decoder_loaded():  # once: its imports stay off the event loop
        await asyncio.get_running_loop().run_in_executor(None, load_decoder)
    outcome = ctx.services.client_telemetry.push(
        request.client_instance_id,
        int(request.subscription_id),
        bool(request.terminating),
        int(request.compression_type),
        bytes(request.metrics or b""),
        ctx.header.client_id or "",
        ctx.client_host,
    )
    if outcome.error is not ErrorCode.none:
        log.debug("PushTelemetry from %s: %s", ctx.header.client_id, outcome.message)
    return error_response(request, outcome.error)


def error_response(request: PushTelemetryRequest, code: ErrorCode) -> PushTelemetryResponse:
    return cast(
        "PushTelemetryResponse",
        make(
            response_types(request).PushTelemetryResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
        ),
    )


API = ApiSpec(
    key=72,
    name="PushTelemetry",
    min_version=0,
    max_version=0,
    handler=handle,
    error_response=error_response,
)
