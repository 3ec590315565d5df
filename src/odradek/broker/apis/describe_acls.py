"""DescribeAcls (29): the ACL bindings a filter matches (versions 0-3: v0, LITERAL patterns only,
through ``protocol.legacy_versions``), grouped by resource pattern. Needs DESCRIBE on the cluster. A broker without an authorizer answers
SECURITY_DISABLED; a filter with an UNKNOWN value INVALID_REQUEST."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._acls import filter_of, unknown_in_filter
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.security.acls import AccessControlEntry, ResourcePattern

if TYPE_CHECKING:
    from odradek.protocol.api_types import DescribeAclsRequest, DescribeAclsResponse

__all__ = ["API", "handle"]

_MESSAGES = {ErrorCode.cluster_authorization_failed: "Cluster authorization failed."}
"""Kafka's messages of the errors answered without one (librdkafka reports an error code
without a message as no error at all)."""


def error_response(
    request: DescribeAclsRequest, code: ErrorCode, message: str | None = None
) -> DescribeAclsResponse:
    types = response_types(request)
    return cast(
        "DescribeAclsResponse",
        make(
            types.DescribeAclsResponse,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message if message is not None else _MESSAGES.get(code),
            resources=(),
        ),
    )


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    store = ctx.services.acls
    if store is None:
        return error_response(request, ErrorCode.security_disabled, "No Authorizer is configured")
    acl_filter = filter_of(request)
    if unknown_in_filter(acl_filter):
        return error_response(request, ErrorCode.invalid_request, "the filter has an UNKNOWN value")
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in store.authorizer.describe(acl_filter):
        grouped.setdefault(b.pattern, []).append(b.entry)
    types = response_types(request)
    resources = tuple(
        make(
            types.DescribeAclsResource,
            resource_type=int(p.resource_type),
            resource_name=p.name,
            pattern_type=int(p.pattern_type),
            acls=tuple(
                make(
                    types.AclDescription,
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission_type),
                )
                for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))
            ),
        )
        for p, entries in sorted(
            grouped.items(), key=lambda kv: (kv[0].resource_type, kv[0].name, kv[0].pattern_type)
        )
    )
    return cast(
        "DescribeAclsResponse",
        make(
            types.DescribeAclsResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            resources=resources,
        ),
    )


API = ApiSpec(
    key=29,
    name="DescribeAcls",
    min_version=0,
    max_version=3,
    handler=handle,
    min_request_version=1,
    error_response=error_response,
    authorize=_authz.cluster(_authz.AclOperation.DESCRIBE, error_response),
)
