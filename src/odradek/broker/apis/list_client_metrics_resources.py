"""ListClientMetricsResources (74, v0; KIP-714): the name of every client-metrics resource
(ConfigResource type CLIENT_METRICS, the ``client-metrics`` config entities), as a Kafka 3.9
KRaft broker answers it (``kafka-client-metrics.sh --list``). Names are sorted; the list
comes from ``ClientTelemetryManager.list_client_metrics_resources`` (the store its
subscriptions are read from: the data directory's file alone, ZooKeeper in a cluster).

With an authorizer, DESCRIBE_CONFIGS on the cluster is needed, else CLUSTER_AUTHORIZATION_FAILED
with an empty list (Kafka's ``getErrorResponse``).

Wire format (Kafka's ListClientMetricsResourcesRequest/Response.json; flexible, request
header v2, response header v1)::

    Request v0  => TAG_BUFFER
    Response v0 => throttle_time_ms INT32 error_code INT16
                   client_metrics_resources COMPACT_ARRAY[name COMPACT_STRING TAG_BUFFER]
                   TAG_BUFFER

kio holds the same v0 under the name Kafka 4.1 gave API 74 (ListConfigResources, KIP-1142):
its ``config_resources`` / ``resource_name`` are this version's ``client_metrics_resources`` /
``name``, byte for byte. Only v0 is served (v1, with resource types, is Kafka 4.1's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        ListClientMetricsResourcesRequest,
        ListClientMetricsResourcesResponse,
    )

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: ListClientMetricsResourcesRequest
) -> ListClientMetricsResourcesResponse:
    names = ctx.services.client_telemetry.list_client_metrics_resources()
    return _response(request, ErrorCode.none, names)


def error_response(
    request: ListClientMetricsResourcesRequest, code: ErrorCode
) -> ListClientMetricsResourcesResponse:
    """``code`` with an empty list (the refusal and the UNKNOWN_SERVER_ERROR answer)."""
    return _response(request, code, [])


def _response(
    request: ListClientMetricsResourcesRequest, code: ErrorCode, names: list[str]
) -> ListClientMetricsResourcesResponse:
    types = response_types(request)
    return cast(
        "ListClientMetricsResourcesResponse",
        make(
            types.ListConfigResourcesResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            config_resources=tuple(make(types.ConfigResource, resource_name=n) for n in names),
        ),
    )


API = ApiSpec(
    key=74,
    name="ListClientMetricsResources",
    min_version=0,
    max_version=0,
    handler=handle,
    error_response=error_response,
    authorize=_authz.cluster(_authz.AclOperation.DESCRIBE_CONFIGS, error_response),
)
