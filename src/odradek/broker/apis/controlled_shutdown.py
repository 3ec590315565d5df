"""ControlledShutdown (7), from a broker that is stopping, to the active controller: move the
leadership of its replicated partitions away and answer with those it still leads.

Version 3 (flexible). Answered by the active controller only: any other broker (and a broker
outside a cluster) answers NOT_CONTROLLER; an unknown broker BROKER_NOT_AVAILABLE, an old
registration STALE_BROKER_EPOCH (the controller's decision).
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from odradek.broker.api import EncodedResponse, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._inter_broker import api_spec, encoded
from odradek.protocol import inter_broker as ib

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: ib.ControlledShutdownRequest) -> EncodedResponse:
    cluster = ctx.services.cluster
    controller = None if cluster is None else cluster.controller
    if controller is None or not controller.is_active:
        resp = ib.ControlledShutdownResponse(ErrorCode.not_controller.value, ())
    else:
        d = await asyncio.wrap_future(
            controller.controlled_shutdown(request.broker_id, request.broker_epoch)
        )
        resp = ib.ControlledShutdownResponse(d.error_code, tuple(d.remaining_partitions))
    return encoded(ib.encode_controlled_shutdown_response(resp, ctx.header.api_version))


def _refuse(
    request: ib.ControlledShutdownRequest, version: int, code: ErrorCode
) -> EncodedResponse:
    response = ib.ControlledShutdownResponse(code.value, ())
    return encoded(ib.encode_controlled_shutdown_response(response, version))


API = api_spec(
    ib.CONTROLLED_SHUTDOWN,
    "ControlledShutdown",
    handle,
    decode=ib.decode_controlled_shutdown_request,
    authorize=_authz.cluster_action_at_version(_refuse),
)
