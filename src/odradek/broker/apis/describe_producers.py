"""DescribeProducers (61): the producers of partitions led here, with their ongoing
transactions (what ``kafka-transactions.sh describe-producers`` and ``find-hanging`` use,
KIP-664).

Per partition: UNKNOWN_TOPIC_OR_PARTITION when it does not exist, NOT_LEADER_OR_FOLLOWER when
this broker does not lead it (as Kafka, which answers from the leader's producer state only);
else every producer id of its producer state (``ProducerStateManager.active_producers``):
epoch, last sequence, the coordinator epoch of its last marker and the first offset of its
ongoing transaction (-1 when none). ``last_timestamp`` is -1: the producer state keeps no
timestamps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeProducersRequest, DescribeProducersResponse

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    replicas = ctx.services.replica_manager
    types = response_types(request)
    await replicas.load_producer_states(
        (t.name, int(p)) for t in request.topics for p in t.partition_indexes
    )
    topics = []
    # with an authorizer: READ on each topic, else TOPIC_AUTHORIZATION_FAILED (Kafka)
    denied = _authz.denied(
        ctx, _authz.AclOperation.READ, _authz.ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for t in request.topics:
        parts = []
        for index in t.partition_indexes:
            if t.name in denied:
                partition, code = None, ErrorCode.topic_authorization_failed
            else:
                partition, code = replicas.leader_partition(t.name, int(index))
            producers: tuple[Any, ...] = ()
            if partition is not None and code is ErrorCode.none:
                producers = tuple(
                    make(
                        types.ProducerState,
                        producer_id=pid,
                        producer_epoch=epoch,
                        last_sequence=last_seq,
                        last_timestamp=-1,
                        coordinator_epoch=coordinator_epoch,
                        current_txn_start_offset=txn_start,
                    )
                    for pid, epoch, last_seq, coordinator_epoch, txn_start in (
                        partition.producer_state().active_producers()
                    )
                )
            parts.append(
                make(
                    types.PartitionResponse,
                    partition_index=index,
                    error_code=code,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(make(types.TopicResponse, name=t.name, partitions=tuple(parts)))
    return cast(
        "DescribeProducersResponse",
        make(types.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics)),
    )


API = ApiSpec(key=61, name="DescribeProducers", min_version=0, max_version=0, handler=handle)
