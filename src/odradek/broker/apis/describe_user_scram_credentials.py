"""DescribeUserScramCredentials (50, KIP-554): each user's SCRAM mechanisms and iterations
(never salts or keys), from the ``users`` config entities (security/credentials.py).

``users`` null or empty: every user with a credential. A named user without one is
RESOURCE_NOT_FOUND (91) "Attempt to describe a user credential that does not exist"; a user
named twice is DUPLICATE_RESOURCE (92), as Kafka answers.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.security.credentials import ScramCredentials
from odradek.security.scram import MECHANISM_TYPES

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    )

__all__ = ["API", "handle"]


async def handle(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    types = response_types(request)
    store = ctx.services.dynamic_config.store
    described = ScramCredentials(lambda: store).describe()
    names = [u.name for u in request.users] if request.users else sorted(described)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        code, message, infos = ErrorCode.none, None, ()
        if counts[name] > 1:
            code, message = ErrorCode.duplicate_resource, f"Cannot describe user {name} twice"
        elif name not in described:
            code = ErrorCode.resource_not_found
            message = "Attempt to describe a user credential that does not exist"
        else:
            infos = tuple(
                make(types.CredentialInfo, mechanism=MECHANISM_TYPES[m], iterations=i)
                for m, i in sorted(described[name].items())
            )
        results.append(
            make(
                types.DescribeUserScramCredentialsResult,
                user=name,
                error_code=code,
                error_message=message,
                credential_infos=infos,
            )
        )
    return cast(
        "DescribeUserScramCredentialsResponse",
        make(
            types.DescribeUserScramCredentialsResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            results=tuple(results),
        ),
    )


def _error(
    request: DescribeUserScramCredentialsRequest, code: ErrorCode
) -> DescribeUserScramCredentialsResponse:
    response: DescribeUserScramCredentialsResponse = make(
        response_types(request).DescribeUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=None,
        results=(),
    )
    return response


API = ApiSpec(
    key=50,
    name="DescribeUserScramCredentials",
    min_version=0,
    max_version=0,
    handler=handle,
    error_response=_error,
)
