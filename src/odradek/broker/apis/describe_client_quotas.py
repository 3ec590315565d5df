"""DescribeClientQuotas (48), versions 0-1 (flexible from 1): the quota configs whose entity
matches a filter (``QuotaStore.describe``). Needs DESCRIBE_CONFIGS on the cluster. A
component of an unknown entity type, a type named twice, or a match inconsistent with its
match type is answered INVALID_REQUEST."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.security.quota_store import (
    CLIENT_ID,
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    USER,
    QuotaFilterComponent,
)
from odradek.security.quotas import DEFAULT

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
    )

__all__ = ["API", "handle"]


def error_response(
    request: DescribeClientQuotasRequest, code: ErrorCode, message: str | None = None
) -> DescribeClientQuotasResponse:
    types = response_types(request)
    if message is None and code == ErrorCode.cluster_authorization_failed:
        message = "Cluster authorization failed."
    return cast(
        "DescribeClientQuotasResponse",
        make(
            types.DescribeClientQuotasResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            entries=None,
        ),
    )


def _components(request: DescribeClientQuotasRequest) -> list[QuotaFilterComponent] | str:
    out: list[QuotaFilterComponent] = []
    for c in request.components:
        if c.entity_type not in (USER, CLIENT_ID):
            return f"Custom entity type '{c.entity_type}' not supported"
        if any(o.entity_type == c.entity_type for o in out):
            return f"Duplicate {c.entity_type} filter component entity type"
        mt = int(c.match_type)
        if mt == MATCH_EXACT and c.match is None:
            return "Missing match for an exact match component"
        if mt in (MATCH_DEFAULT, MATCH_ANY) and c.match is not None:
            return "Unexpected match for a default or any match component"
        if mt not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"Unexpected match type {mt}"
        out.append(QuotaFilterComponent(c.entity_type, mt, c.match))
    return out


async def handle(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    components = _components(request)
    if isinstance(components, str):
        return error_response(request, ErrorCode.invalid_request, components)
    types = response_types(request)
    entries = []
    for (user, client), values in ctx.services.quotas.describe(components, bool(request.strict)):
        entity = tuple(
            make(types.EntityData, entity_type=t, entity_name=None if n == DEFAULT else n)
            for t, n in ((USER, user), (CLIENT_ID, client))
            if n is not None
        )
        vals = tuple(make(types.ValueData, key=k, value=v) for k, v in sorted(values.items()))
        entries.append(make(types.EntryData, entity=entity, values=vals))
    return cast(
        "DescribeClientQuotasResponse",
        make(
            types.DescribeClientQuotasResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            entries=tuple(entries),
        ),
    )


API = ApiSpec(
    key=48,
    name="DescribeClientQuotas",
    min_version=0,
    max_version=1,
    handler=handle,
    error_response=error_response,
    authorize=_authz.cluster(_authz.AclOperation.DESCRIBE_CONFIGS, error_response),
)
