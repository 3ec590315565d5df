"""ApiVersions (18): the supported version ranges, built from the registry.

A request with a version newer than we serve cannot be decoded; the connection answers it
(before decoding) with ``protocol.messages.encode_api_versions_error``: a v0-format response
with UNSUPPORTED_VERSION (35) and the supported ranges, so that the client retries with a
version it and we know.
ApiVersions responses always use response header v0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import ApiVersionsRequest, ApiVersionsResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    types = response_types(request)
    keys = tuple(
        make(types.ApiVersion, api_key=k, min_version=lo, max_version=hi)
        for k, lo, hi in ctx.services.api_versions
    )
    return cast(
        "ApiVersionsResponse",
        make(
            types.ApiVersionsResponse,
            error_code=ErrorCode.none,
            api_keys=keys,
            throttle_time=NO_THROTTLE,
        ),
    )


API = ApiSpec(key=18, name="ApiVersions", min_version=0, max_version=4, handler=handle)
