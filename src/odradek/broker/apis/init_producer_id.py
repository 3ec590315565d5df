"""InitProducerId (22): a producer id and epoch, for idempotent and transactional producers.

Without a transactional id: a fresh producer id with epoch 0 (ids are reserved on disk in
blocks, so they never repeat across restarts). A request that names its current producer id
and epoch (v3+, KIP-360) gets the same id with the epoch bumped.

With a transactional id: the transaction coordinator (``TransactionCoordinator``) answers —
the id's producer id with its epoch bumped (a new instance fences the previous one: its open
transaction is aborted and it gets PRODUCER_FENCED / INVALID_PRODUCER_EPOCH), after
CONCURRENT_TRANSACTIONS while that abort completes; ``transaction.timeout.ms`` above the
broker's ``transaction.max.timeout.ms`` → INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        InitProducerIdRequest,
        InitProducerIdRequestV3,
        InitProducerIdRequestV4,
        InitProducerIdResponse,
    )

__all__ = ["API", "handle"]

_EPOCH_MAX = 32767


def _names_producer(
    request: InitProducerIdRequest,
) -> TypeGuard[InitProducerIdRequestV3 | InitProducerIdRequestV4]:
    """v3+ may name the producer id and epoch to bump (KIP-360)."""
    return request.__version__ >= 3


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    types = response_types(request)
    if request.transactional_id is not None:
        coordinator = ctx.services.txn_coordinator
        return await coordinator.execute(
            lambda m, now: glue.init_producer_id(m, request, now),
            creates=True,
            on_write_error=glue.with_error,
        )
    pid, epoch = (
        (int(request.producer_id), int(request.producer_epoch))
        if _names_producer(request)
        else (-1, -1)
    )
    if pid >= 0 and 0 <= epoch < _EPOCH_MAX - 1:
        new_pid, new_epoch = pid, epoch + 1
    else:
        new_pid, new_epoch = await ctx.services.producer_ids.allocate(), 0
    return cast(
        "InitProducerIdResponse",
        make(
            types.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            producer_id=new_pid,
            producer_epoch=new_epoch,
        ),
    )


def error_response(request: InitProducerIdRequest, code: ErrorCode) -> InitProducerIdResponse:
    return cast(
        "InitProducerIdResponse",
        make(
            response_types(request).InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            producer_id=-1,
            producer_epoch=-1,
        ),
    )


API = ApiSpec(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=5,
    handler=handle,
    error_response=error_response,
    authorize=_authz.producer(error_response),
)
