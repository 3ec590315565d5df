"""FindCoordinator (10): this broker coordinates every group; in a cluster, the leader of the
group's ``__consumer_offsets`` partition does (the topic is created on the first lookup).

v0-v3 ask for one key (``key``), v4+ for a batch (``coordinator_keys``). key_type 0 is a
group (the leader of its ``__consumer_offsets`` partition), key_type 1 a transactional id
(the leader of its ``__transaction_state`` partition). While that partition is loading:
COORDINATOR_LOAD_IN_PROGRESS. In a cluster the first lookup of a key type creates its internal
topic. The address is the coordinator's endpoint on the listener the request came in on; a
coordinator that is not live or has no endpoint on that listener is COORDINATOR_NOT_AVAILABLE
with node_id -1, host "", port -1 (Kafka: ``getAliveBrokerNode(id, listenerName)``), and the
client asks again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeGuard, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, coordinator
from odradek.broker.apis._listeners import alive_broker_endpoint
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.metadata_store import MetadataError, TopicExistsError
from odradek.broker.topic_admin import OFFSETS_TOPIC
from odradek.coordinator.state import Errors
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        FindCoordinatorRequest,
        FindCoordinatorRequestV0,
        FindCoordinatorRequestV1,
        FindCoordinatorRequestV2,
        FindCoordinatorRequestV3,
        FindCoordinatorRequestV4,
        FindCoordinatorRequestV5,
        FindCoordinatorRequestV6,
        FindCoordinatorResponse,
    )

__all__ = ["API", "handle"]

log = logging.getLogger("odradek.broker")


def _lookup(
    ctx: RequestContext, key: str, key_type: int
) -> tuple[Errors | ErrorCode, int, str, int, str | None]:
    if key_type in _KEY_RESOURCES:  # with an authorizer: DESCRIBE on the group / transactional id
        rtype, refused = _KEY_RESOURCES[key_type]
        if not _authz.allowed(ctx, _authz.AclOperation.DESCRIBE, rtype, key):
            return refused, -1, "", -1, None
    if key_type == 1:
        txn_error, node_id, host, port = ctx.services.txn_coordinator.coordinator_for(key)
        error = Errors(int(txn_error))
    elif key_type == 0:
        error, node_id, host, port = coordinator(ctx).coordinator_for(key)
    else:
        return Errors.INVALID_REQUEST, -1, "", -1, f"unknown key type {key_type}"
    if error is not Errors.NONE:
        return error, -1, "", -1, None
    address = alive_broker_endpoint(ctx, node_id, host, port)
    if address is None:  # not live, or no endpoint on this listener: the client asks again
        return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1, None
    host, port = address
    return error, node_id, host, port, None


async def _ensure_internal_topic(ctx: RequestContext, key_type: int) -> None:
    """In a cluster: create ``__consumer_offsets`` (key type 0, offsets.topic.* settings) or
    ``__transaction_state`` (key type 1, transaction.state.log.* settings, its min.isr as the
    topic's min.insync.replicas) through ZooKeeper on the first lookup (Kafka auto-creates them
    there too); the answer waits (bounded) for its leaders."""
    services = ctx.services
    cfg = services.config
    if key_type == 0:
        name, partitions = OFFSETS_TOPIC, cfg.offsets_topic_num_partitions
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg.offsets_topic_segment_bytes),
        }
    elif key_type == 1:
        name, partitions = TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
            "min.insync.replicas": str(cfg.transaction_state_log_min_isr),
        }
    else:
        return
    if services.cluster is None or services.metadata.topic(name) is not None:
        return
    try:
        await services.topic_admin.create_topic(name, partitions, configs, internal=True)
    except TopicExistsError:
        pass
    except MetadataError as exc:
        log.warning("cannot create %s: %s", name, exc)


def _has_key_type(
    request: FindCoordinatorRequest,
) -> TypeGuard[
    FindCoordinatorRequestV1
    | FindCoordinatorRequestV2
    | FindCoordinatorRequestV3
    | FindCoordinatorRequestV4
    | FindCoordinatorRequestV5
    | FindCoordinatorRequestV6
]:
    """v1+ says what the key is (0 group, 1 transaction); v0 finds groups only."""
    return request.__version__ >= 1


def _batched(
    request: FindCoordinatorRequest,
) -> TypeGuard[FindCoordinatorRequestV4 | FindCoordinatorRequestV5 | FindCoordinatorRequestV6]:
    """v4+ asks for several keys at once (KIP-699)."""
    return request.__version__ >= 4


def _single_key(
    request: FindCoordinatorRequest,
) -> TypeGuard[
    FindCoordinatorRequestV0
    | FindCoordinatorRequestV1
    | FindCoordinatorRequestV2
    | FindCoordinatorRequestV3
]:
    return request.__version__ < 4


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    types = response_types(request)
    key_type = int(request.key_type) if _has_key_type(request) else 0
    await _ensure_internal_topic(ctx, key_type)
    if _batched(request):
        coordinators = []
        for key in request.coordinator_keys:
            error, node_id, host, port, message = _lookup(ctx, key, key_type)
            coordinators.append(
                make(
                    types.Coordinator,
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=code(error),
                    error_message=message,
                )
            )
        return cast(
            "FindCoordinatorResponse",
            make(
                types.FindCoordinatorResponse,
                throttle_time=NO_THROTTLE,
                coordinators=tuple(coordinators),
            ),
        )
    if not _single_key(request):  # pragma: no cover - every version is one or the other
        raise AssertionError(request.__version__)
    error, node_id, host, port, message = _lookup(ctx, request.key, key_type)
    return cast(
        "FindCoordinatorResponse",
        make(
            types.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            error_code=code(error),
            error_message=message,
            node_id=node_id,
            host=host,
            port=port,
        ),
    )


_KEY_RESOURCES = {
    0: (_authz.ResourceType.GROUP, ErrorCode.group_authorization_failed),
    1: (_authz.ResourceType.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed),
}

API = ApiSpec(key=10, name="FindCoordinator", min_version=0, max_version=6, handler=handle)
