"""FindCoordinator (10): this broker coordinates every group.

v0-v3 ask for one key (``key``), v4+ for a batch (``coordinator_keys``). key_type 0 is a
group (the leader of its ``__consumer_offsets`` partition), key_type 1 a transactional id
(the leader of its ``__transaction_state`` partition). While that partition is loading:
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.state import Errors

__all__ = ["API", "handle"]


def _lookup(
    ctx: RequestContext, key: str, key_type: int
) -> tuple[Errors, int, str, int, str | None]:
    if key_type == 1:
        txn_error, node_id, host, port = ctx.services.txn_coordinator.coordinator_for(key)
        error = Errors(int(txn_error))
    elif key_type == 0:
        error, node_id, host, port = coordinator(ctx).coordinator_for(key)
    else:
        return Errors.INVALID_REQUEST, -1, "", -1, f"unknown key type {key_type}"
    if error is not Errors.NONE:
        return error, -1, "", -1, None
    return error, node_id, host, port, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(request)
    key_type = int(getattr(request, "key_type", 0))
    if hasattr(request, "coordinator_keys"):
        coordinators = []
        for key in request.coordinator_keys:
            error, node_id, host, port, message = _lookup(ctx, key, key_type)
            coordinators.append(
                make(
                    types.Coordinator,
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=code(error),
                    error_message=message,
                )
            )
        return make(
            types.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(coordinators),
        )
    error, node_id, host, port, message = _lookup(ctx, request.key, key_type)
    return make(
        types.FindCoordinatorResponse,
        throttle_time=NO_THROTTLE,
        error_code=code(error),
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )


API = ApiSpec(key=10, name="FindCoordinator", min_version=0, max_version=6, handler=handle)
