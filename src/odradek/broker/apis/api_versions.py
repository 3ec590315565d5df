"""ApiVersions (18): the supported version ranges, built from the registry.

A request with a version newer than we serve cannot be decoded; the server answers it (before
decoding) with ``unsupported_version_body()``: a v0-format body with UNSUPPORTED_VERSION (35)
and the supported ranges, so that the client retries with a version it and we know.
ApiVersions responses always use response header v0.
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.broker.registry import ApiSpec, RequestContext

__all__ = ["API", "handle", "unsupported_version_body"]


def _ranges(ctx: RequestContext) -> list[tuple[int, int, int]]:
    return [
        (s.key, s.min_version, s.max_version)
        for s in sorted(ctx.broker.registry.values(), key=lambda s: s.key)
    ]


async def handle(ctx: RequestContext, request: Any) -> Any:
    types = response_types(request)
    keys = tuple(
        make(types.ApiVersion, api_key=k, min_version=lo, max_version=hi)
        for k, lo, hi in _ranges(ctx)
    )
    return make(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=NO_THROTTLE,
    )


def unsupported_version_body(registry: dict[int, ApiSpec]) -> bytes:
    """ApiVersionsResponse v0 body: error_code i16, [api_key i16, min i16, max i16]."""
    specs = sorted(registry.values(), key=lambda s: s.key)
    parts = [struct.pack(">hi", int(ErrorCode.unsupported_version), len(specs))]
    parts.extend(struct.pack(">hhh", s.key, s.min_version, s.max_version) for s in specs)
    return b"".join(parts)


API = ApiSpec(key=18, name="ApiVersions", min_version=0, max_version=4, handler=handle)
