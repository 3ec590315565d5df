"""UpdateMetadata (6), from the active controller: the live brokers, the controller and the
partition states this broker's ``ZkMetadataStore`` answers Metadata and DescribeCluster from.

Versions 7-8 (flexible). A stale controller epoch is answered STALE_CONTROLLER_EPOCH, a request
meant for an older registration of this broker STALE_BROKER_EPOCH; a broker that is not in a
cluster (no ``zookeeper.connect``) answers BROKER_NOT_AVAILABLE and changes nothing.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.broker.api import EncodedResponse, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._inter_broker import api_spec, encoded
from odradek.protocol import inter_broker as ib

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: ib.UpdateMetadataRequest) -> EncodedResponse:
    cluster = ctx.services.cluster
    if cluster is None:
        code = ErrorCode.broker_not_available
    else:
        code = cluster.store.apply_update_metadata(request)
    version = ctx.header.api_version
    return encoded(
        ib.encode_update_metadata_response(ib.UpdateMetadataResponse(code.value), version)
    )


def _refuse(request: ib.UpdateMetadataRequest, version: int, code: ErrorCode) -> EncodedResponse:
    response = ib.UpdateMetadataResponse(code.value)
    return encoded(ib.encode_update_metadata_response(response, version))


API = api_spec(
    ib.UPDATE_METADATA,
    "UpdateMetadata",
    handle,
    decode=ib.decode_update_metadata_request,
    authorize=_authz.cluster_action_at_version(_refuse),
)
