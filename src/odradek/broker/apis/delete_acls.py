"""DeleteAcls (31): remove the ACL bindings each filter matches (versions 0-3: v0, LITERAL
patterns only, through ``protocol.legacy_versions``) and answer, per filter, the bindings removed. Needs ALTER on the cluster. A broker without an authorizer
answers SECURITY_DISABLED; a filter with an UNKNOWN value INVALID_REQUEST (that filter only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._acls import filter_of, unknown_in_filter
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.security.acls import AclBinding

if TYPE_CHECKING:
    from odradek.protocol.api_types import DeleteAclsRequest, DeleteAclsResponse

__all__ = ["API", "handle"]


def _answer(
    request: DeleteAclsRequest, results: list[tuple[ErrorCode, str | None, list[AclBinding]]]
) -> DeleteAclsResponse:
    types = response_types(request)
    return cast(
        "DeleteAclsResponse",
        make(
            types.DeleteAclsResponse,
            throttle_time=NO_THROTTLE,
            filter_results=tuple(
                make(
                    types.DeleteAclsFilterResult,
                    error_code=code,
                    error_message=message,
                    matching_acls=tuple(
                        make(
                            types.DeleteAclsMatchingAcl,
                            error_code=ErrorCode.none,
                            error_message=None,
                            resource_type=int(b.pattern.resource_type),
                            resource_name=b.pattern.name,
                            pattern_type=int(b.pattern.pattern_type),
                            principal=b.entry.principal,
                            host=b.entry.host,
                            operation=int(b.entry.operation),
                            permission_type=int(b.entry.permission_type),
                        )
                        for b in removed
                    ),
                )
                for code, message, removed in results
            ),
        ),
    )


def error_response(request: DeleteAclsRequest, code: ErrorCode) -> DeleteAclsResponse:
    return _answer(request, [(code, None, [])] * len(request.filters))


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    store = ctx.services.acls
    if store is None:
        disabled: tuple[ErrorCode, str | None, list[AclBinding]] = (
            ErrorCode.security_disabled,
            "No Authorizer is configured",
            [],
        )
        return _answer(request, [disabled] * len(request.filters))
    filters = [filter_of(f) for f in request.filters]
    valid = [f for f in filters if not unknown_in_filter(f)]
    removed = iter(await store.delete(valid))
    results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = [
        (ErrorCode.invalid_request, "the filter has an UNKNOWN value", [])
        if unknown_in_filter(f)
        else (ErrorCode.none, None, next(removed))
        for f in filters
    ]
    return _answer(request, results)


API = ApiSpec(
    key=31,
    name="DeleteAcls",
    min_version=0,
    max_version=3,
    handler=handle,
    min_request_version=1,
    error_response=error_response,
    authorize=_authz.cluster(_authz.AclOperation.ALTER, error_response),
)
