"""DescribeCluster (60): this broker, the cluster id and the controller (this broker)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    types = response_types(request)
    host, port = broker.advertised_address
    return make(
        types.DescribeClusterResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.metadata.cluster_id,
        controller_id=broker.node_id,
        brokers=(
            make(
                types.DescribeClusterBroker,
                broker_id=broker.node_id,
                host=host,
                port=port,
                rack=None,
            ),
        ),
        cluster_authorized_operations=-(2**31),
    )


API = ApiSpec(key=60, name="DescribeCluster", min_version=0, max_version=1, handler=handle)
