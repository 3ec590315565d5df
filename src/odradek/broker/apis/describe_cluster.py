"""DescribeCluster (60): the live brokers, the cluster id and the controller, from the
``MetadataStore``; with no authorizer, every cluster operation when
include_cluster_authorized_operations is set (as Kafka)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._listeners import endpoint_for
from odradek.broker.apis._util import (
    AUTHORIZED_OPERATIONS_NOT_REQUESTED,
    CLUSTER_OPERATIONS,
    NO_THROTTLE,
    make,
    response_types,
)
from odradek.security.acls import CLUSTER_NAME

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeClusterRequest, DescribeClusterResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    store = ctx.services.metadata
    types = response_types(request)
    return cast(
        "DescribeClusterResponse",
        make(
            types.DescribeClusterResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            endpoint_type=1,
            cluster_id=store.cluster_id,
            controller_id=store.controller_id(),
            brokers=tuple(  # those with the request's listener, at their endpoint on it
                make(
                    types.DescribeClusterBroker,
                    broker_id=b.node_id,
                    host=address[0],
                    port=address[1],
                    rack=b.rack,
                )
                for b, address in ((b, endpoint_for(ctx, b)) for b in store.live_brokers())
                if address is not None
            ),
            # when asked for: the principal's cluster operations (every one without authorizer)
            cluster_authorized_operations=_authz.authorized_operations(
                ctx, _authz.ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS
            )
            if request.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_NOT_REQUESTED,
        ),
    )


API = ApiSpec(key=60, name="DescribeCluster", min_version=0, max_version=1, handler=handle)
