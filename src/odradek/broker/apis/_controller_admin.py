"""Admin APIs the active controller answers (ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments): handed to its event loop; any other broker, and a broker outside a
cluster, answers NOT_CONTROLLER (Kafka's ZooKeeper mode: clients send them to the controller)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import RequestContext
from odradek.broker.apis._util import KioEntity, make, response_types

__all__ = ["controller_call"]

_NOT_CONTROLLER_FIELDS: dict[str, Any] = {
    "throttle_time": datetime.timedelta(0),
    "error_code": ErrorCode.not_controller,
    "error_message": "this broker is not the controller",
    "replica_election_results": (),
    "responses": (),
    "topics": (),
}


async def controller_call(ctx: RequestContext, request: KioEntity, method: str) -> Any:
    """The active controller's answer to ``request`` (``method`` of ``Controller`` decides it),
    or NOT_CONTROLLER when this broker's controller is not the active one."""
    cluster = ctx.services.cluster
    controller = None if cluster is None else cluster.controller
    if controller is None or not controller.is_active:
        types = response_types(request)
        cls = getattr(types, type(request).__name__.replace("Request", "Response"))
        return make(cls, **_NOT_CONTROLLER_FIELDS)
    call: Callable[[Any], Future[Any]] = getattr(controller, method)
    return await asyncio.wrap_future(call(request))
