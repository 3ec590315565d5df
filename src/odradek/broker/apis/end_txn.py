"""EndTxn (26): commit or abort the producer's transaction.

The coordinator writes PrepareCommit / PrepareAbort to ``__transaction_state``, then the
COMMIT / ABORT markers to every partition of the transaction (in one broker: before this
answer), then CompleteCommit / CompleteAbort. A retry of a finished EndTxn answers NONE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import EndTxnRequest, EndTxnResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    return await ctx.services.txn_coordinator.execute(
        lambda m, now: glue.end_txn(m, request, now), on_write_error=glue.with_error
    )


API = ApiSpec(
    key=26,
    name="EndTxn",
    min_version=0,
    max_version=4,
    handler=handle,
    authorize=_authz.transactional_id(),
)
