"""LeaderAndIsr (4): the controller tells this broker which partitions it leads or follows.

ZooKeeper-mode inter-broker API (not in kio): decoded by ``odradek.protocol.inter_broker``
(v6-v7, request header v2, response header v1), applied by
``ReplicaManager.become_leader_or_follower``. As Kafka answers:

* a broker epoch older than this broker's registration (``broker_epoch`` ≥ 0) →
  STALE_BROKER_EPOCH, a controller epoch older than the newest seen → STALE_CONTROLLER_EPOCH:
  the whole request is refused (top-level error, and the same error for every partition);
* per partition: NONE; UNKNOWN_TOPIC_OR_PARTITION when this broker is not a replica;
  STALE_CONTROLLER_EPOCH when its leader epoch is not newer than ours.

Advertised in ApiVersions, as Kafka 3.9's ZooKeeper-mode broker advertises every API of its
``zkBroker`` listener (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown among
them): ``kafka-broker-api-versions.sh`` lists them. Only the versions served (6-7) are.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from odradek.broker.api import EncodedResponse, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._inter_broker import api_spec, encoded, every_partition, stale_request
from odradek.protocol import inter_broker as ib

__all__ = ["API", "handle"]


def _response(
    request: ib.LeaderAndIsrRequest, version: int, error: int, codes: Mapping[tuple[str, int], int]
) -> EncodedResponse:
    errors = tuple(
        ib.LeaderAndIsrPartitionError(topic, partition, code)
        for (topic, partition), code in codes.items()
    )
    return encoded(
        ib.encode_leader_and_isr_response(
            ib.LeaderAndIsrResponse(error, errors), request.topic_ids, version
        )
    )


def _refuse(request: ib.LeaderAndIsrRequest, version: int, code: ErrorCode) -> EncodedResponse:
    return _response(request, version, code.value, every_partition(request.partition_states, code))


async def handle(ctx: RequestContext, request: ib.LeaderAndIsrRequest) -> EncodedResponse:
    version = ctx.header.api_version
    stale = stale_request(ctx, request.broker_epoch, request.controller_epoch)
    if stale is not None:
        return _refuse(request, version, stale)
    result = ctx.services.replica_manager.become_leader_or_follower(
        request.controller_id,
        request.controller_epoch,
        request.partition_states,
        request.live_leaders,
        request.topic_ids,
    )
    return _response(request, version, 0, {k: v.value for k, v in result.items()})


def error_response(request: ib.LeaderAndIsrRequest, code: ErrorCode) -> EncodedResponse:
    return _refuse(request, 7, code)


API = api_spec(
    ib.LEADER_AND_ISR,
    "LeaderAndIsr",
    handle,
    error_response=error_response,
    authorize=_authz.cluster_action_at_version(_refuse),
)
