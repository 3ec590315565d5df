"""ListTransactions (66): the transactional ids this coordinator owns, filtered by state,
producer id, duration (v1) and id pattern (v2) (for tooling, KIP-664)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import ListTransactionsRequest, ListTransactionsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    services = ctx.services
    response = glue.list_transactions(
        services.txn_coordinator.manager, request, services.clock.now_ms()
    )
    if not _authz.enabled(ctx):
        return response
    # with an authorizer: the transactional ids the principal may DESCRIBE (Kafka)
    ids = [s.transactional_id for s in response.transaction_states]
    denied = _authz.denied(
        ctx, _authz.AclOperation.DESCRIBE, _authz.ResourceType.TRANSACTIONAL_ID, ids
    )
    states = tuple(s for s in response.transaction_states if s.transactional_id not in denied)
    return dataclasses.replace(response, transaction_states=states)  # type: ignore[arg-type]


API = ApiSpec(key=66, name="ListTransactions", min_version=0, max_version=1, handler=handle)
