"""AddPartitionsToTxn (24): add partitions to a producer's ongoing transaction.

v0-v3 come from producers (one transaction); v4 is the batched, inter-broker form whose
``verify_only`` entries are KIP-890 part 1's check by a partition leader (no record written).
Unknown partitions fail the transaction's request (UNKNOWN_TOPIC_OR_PARTITION for them,
OPERATION_NOT_ATTEMPTED for the rest). The decisions are the transaction coordinator's
(``TransactionStateManager.add_partitions``); glue in ``_transactions.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

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


def _authorize(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> Any:
    """Kafka's checks: v4 (between brokers) CLUSTER_ACTION, else CLUSTER_AUTHORIZATION_FAILED;
    v0-v3 WRITE on the transactional id (else every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else its partitions
    TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED)."""
    if request.__version__ >= 4:
        return _authz.cluster_action()(ctx, request)
    txn_id = request.v3_and_below_transactional_id  # type: ignore[union-attr]
    topics = request.v3_and_below_topics  # type: ignore[union-attr]
    if not _authz.allowed(
        ctx, _authz.AclOperation.WRITE, _authz.ResourceType.TRANSACTIONAL_ID, txn_id
    ):
        denied, code = (
            frozenset(t.name for t in topics),
            ErrorCode.transactional_id_authorization_failed,
        )
    else:
        names = (t.name for t in topics)
        denied = _authz.denied(ctx, _authz.AclOperation.WRITE, _authz.ResourceType.TOPIC, names)
        code = ErrorCode.topic_authorization_failed
        if not denied:
            return None
    types = response_types(request)
    results = tuple(
        make(
            types.AddPartitionsToTxnTopicResult,
            name=t.name,
            results_by_partition=tuple(
                make(
                    types.AddPartitionsToTxnPartitionResult,
                    partition_index=p,
                    partition_error_code=code if t.name in denied else _NOT_ATTEMPTED,
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )
    return make(
        types.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=results,
    )


_NOT_ATTEMPTED = ErrorCode.operation_not_attempted

API = ApiSpec(
    key=24,
    name="AddPartitionsToTxn",
    min_version=0,
    max_version=5,
    handler=handle,
    authorize=_authorize,
)
