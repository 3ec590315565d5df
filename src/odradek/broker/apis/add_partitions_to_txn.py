"""AddPartitionsToTxn (24): add partitions to a producer's ongoing transaction.

v0-v3 come from producers (one transaction); v4 is the batched, inter-broker form whose
``verify_only`` entries are KIP-890 part 1's check by a partition leader (no record written).
Unknown partitions fail the transaction's request (UNKNOWN_TOPIC_OR_PARTITION for them,
OPERATION_NOT_ATTEMPTED for the rest). The decisions are the transaction coordinator's
(``TransactionStateManager.add_partitions``); glue in ``_transactions.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    services = ctx.services

    def exists(topic: str, partition: int) -> bool:
        meta = services.metadata.topic(topic)
        return meta is not None and 0 <= partition < meta.num_partitions

    return await services.txn_coordinator.execute(
        lambda m, now: glue.add_partitions_to_txn(m, request, now, exists),
        on_write_error=glue.with_error,
    )


API = ApiSpec(key=24, name="AddPartitionsToTxn", min_version=0, max_version=5, handler=handle)
