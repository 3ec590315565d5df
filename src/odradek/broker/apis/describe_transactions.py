"""DescribeTransactions (65): the state of transactional ids (for tooling, KIP-664)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeTransactionsRequest, DescribeTransactionsResponse

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    return glue.describe_transactions(ctx.services.txn_coordinator.manager, request)


API = ApiSpec(key=65, name="DescribeTransactions", min_version=0, max_version=0, handler=handle)
