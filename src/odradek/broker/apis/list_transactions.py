"""ListTransactions (66): the transactional ids this coordinator owns, filtered by state,
producer id, duration (v1) and id pattern (v2) (for tooling, KIP-664)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import ListTransactionsRequest, ListTransactionsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    services = ctx.services
    return glue.list_transactions(
        services.txn_coordinator.manager, request, services.clock.now_ms()
    )


API = ApiSpec(key=66, name="ListTransactions", min_version=0, max_version=1, handler=handle)
