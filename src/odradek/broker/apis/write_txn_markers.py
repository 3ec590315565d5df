"""WriteTxnMarkers (27): a transaction coordinator asks this partition leader to append
COMMIT/ABORT markers (inter-broker; v1). Each marker goes through ``TxnMarkerAppender``
(broker/txn_markers.py): the leadership check, the coordinator-epoch and producer-epoch
checks, the control batch, the producer state, the ``.txnindex`` entry of an abort; in a cluster
the answer waits until the partition's ISR has the marker (acks=all)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis import _transactions as glue

if TYPE_CHECKING:
    from odradek.protocol.api_types import WriteTxnMarkersRequest, WriteTxnMarkersResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    appender = ctx.services.txn_markers
    errors: dict[tuple[int, str, int], int] = {}
    for marker in glue.txn_markers_of(request):
        code = int(await appender.append_marker_replicated(marker))
        if code:
            errors[(marker.producer_id, marker.topic, marker.partition)] = code
    return glue.write_txn_markers_response(request, errors)


def _refuse(request: WriteTxnMarkersRequest, code: ErrorCode) -> WriteTxnMarkersResponse:
    """Every marker's partitions answered ``code`` (Kafka: CLUSTER_AUTHORIZATION_FAILED)."""
    return glue.write_txn_markers_response(
        request,
        {(m.producer_id, m.topic, m.partition): int(code) for m in glue.txn_markers_of(request)},
    )


API = ApiSpec(
    key=27,
    name="WriteTxnMarkers",
    min_version=1,
    max_version=1,
    handler=handle,
    authorize=_authz.cluster(_authz.AclOperation.CLUSTER_ACTION, _refuse),
)
