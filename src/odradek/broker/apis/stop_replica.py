"""StopReplica (5): the controller tells this broker to stop replicating partitions (and,
with ``delete_partition``, to delete them).

ZooKeeper-mode inter-broker API (not in kio): decoded by ``odradek.protocol.inter_broker``
(v3-v4), applied by ``ReplicaManager.stop_replicas``. As Kafka answers: a stale broker epoch
→ STALE_BROKER_EPOCH, a stale controller epoch → STALE_CONTROLLER_EPOCH (whole request);
per partition NONE, or FENCED_LEADER_EPOCH when the request's leader epoch is older than
ours (-1 and -2, "no epoch" and "epoch during delete", always pass). Advertised like
LeaderAndIsr (see ``leader_and_isr``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from odradek.broker.api import EncodedResponse, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._inter_broker import api_spec, encoded, every_partition, stale_request
from odradek.protocol import inter_broker as ib

__all__ = ["API", "handle"]


def _response(version: int, error: int, codes: Mapping[tuple[str, int], int]) -> EncodedResponse:
    errors = tuple(
        ib.StopReplicaPartitionError(topic, partition, code)
        for (topic, partition), code in codes.items()
    )
    return encoded(ib.encode_stop_replica_response(ib.StopReplicaResponse(error, errors), version))


def _refuse(request: ib.StopReplicaRequest, version: int, code: ErrorCode) -> EncodedResponse:
    return _response(version, code.value, every_partition(request.partition_states, code))


async def handle(ctx: RequestContext, request: ib.StopReplicaRequest) -> EncodedResponse:
    version = ctx.header.api_version
    stale = stale_request(ctx, request.broker_epoch, request.controller_epoch)
    if stale is not None:
        return _refuse(request, version, stale)
    result = ctx.services.replica_manager.stop_replicas(
        request.controller_id, request.controller_epoch, request.partition_states
    )
    return _response(version, 0, {k: v.value for k, v in result.items()})


def error_response(request: ib.StopReplicaRequest, code: ErrorCode) -> EncodedResponse:
    return _refuse(request, 4, code)


API = api_spec(
    ib.STOP_REPLICA,
    "StopReplica",
    handle,
    error_response=error_response,
    authorize=_authz.cluster_action_at_version(_refuse),
)
