"""AddOffsetsToTxn (25): add the group's ``__consumer_offsets`` partition to the producer's
transaction, before its TxnOffsetCommit to the group coordinator (KIP-98)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    return await ctx.services.txn_coordinator.execute(
        lambda m, now: glue.add_offsets_to_txn(m, request, now), on_write_error=glue.with_error
    )


API = ApiSpec(
    key=25,
    name="AddOffsetsToTxn",
    min_version=0,
    max_version=4,
    handler=handle,
    authorize=_authz.all_of(_authz.transactional_id(), _authz.group(_authz.AclOperation.READ)),
)
