"""CreateAcls (30): add ACL bindings (versions 0-3: v0, without pattern types, through
``protocol.legacy_versions``).

Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise). A broker
without an authorizer answers SECURITY_DISABLED; a binding Kafka would refuse (UNKNOWN or ANY
values, MATCH pattern, no ``Type:name`` principal, a cluster not named ``kafka-cluster``)
INVALID_REQUEST with the reason. The bindings go through the ACL store (ZooKeeper or the data
directory) and reach every broker's authorizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._acls import binding_of
from odradek.broker.apis._util import NO_THROTTLE, make, response_types

if TYPE_CHECKING:
    from odradek.protocol.api_types import CreateAclsRequest, CreateAclsResponse

__all__ = ["API", "handle"]


def _answer(
    request: CreateAclsRequest, results: list[tuple[ErrorCode, str | None]]
) -> CreateAclsResponse:
    types = response_types(request)
    return cast(
        "CreateAclsResponse",
        make(
            types.CreateAclsResponse,
            throttle_time=NO_THROTTLE,
            results=tuple(
                make(types.AclCreationResult, error_code=code, error_message=message)
                for code, message in results
            ),
        ),
    )


def error_response(request: CreateAclsRequest, code: ErrorCode) -> CreateAclsResponse:
    return _answer(request, [(code, None)] * len(request.creations))


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    store = ctx.services.acls
    if store is None:
        return _answer(
            request,
            [(ErrorCode.security_disabled, "No Authorizer is configured")] * len(request.creations),
        )
    outcomes = await store.create([binding_of(c) for c in request.creations])
    return _answer(
        request,
        [
            (ErrorCode.none, None)
            if err is None
            else (
                ErrorCode.invalid_request
                if isinstance(err, ValueError)
                else ErrorCode.unknown_server_error,
                str(err),
            )
            for err in outcomes
        ],
    )


API = ApiSpec(
    key=30,
    name="CreateAcls",
    min_version=0,
    max_version=3,
    handler=handle,
    min_request_version=1,
    error_response=error_response,
    authorize=_authz.cluster(_authz.AclOperation.ALTER, error_response),
)
