"""SaslAuthenticate (36): one SASL token of the exchange the SaslHandshake (v1) chose.

Answered with the mechanism's challenge, or SASL_AUTHENTICATION_FAILED (58) and Kafka's
message (one message whether the user is unknown or the password wrong), after which the
connection closes; ILLEGAL_SASL_STATE (34) out of order or off SASL listeners. v1+ carries the
session lifetime (``connections.max.reauth.ms``, KIP-368; 0: none).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import make, response_types
from odradek.security.sasl import ILLEGAL_SASL_STATE, AuthenticateResult

if TYPE_CHECKING:
    from odradek.protocol.api_types import SaslAuthenticateRequest, SaslAuthenticateResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    auth = ctx.sasl
    if auth is None:
        result = AuthenticateResult(
            ILLEGAL_SASL_STATE, "SaslAuthenticate on a listener without SASL", b""
        )
    else:
        result = auth.authenticate(bytes(request.auth_bytes))
    return _response(request, result)


def _response(
    request: SaslAuthenticateRequest, result: AuthenticateResult
) -> SaslAuthenticateResponse:
    response: SaslAuthenticateResponse = make(
        response_types(request).SaslAuthenticateResponse,
        error_code=ErrorCode(result.error_code),
        error_message=result.error_message,
        auth_bytes=result.auth_bytes,
        session_lifetime=datetime.timedelta(milliseconds=result.session_lifetime_ms),
    )
    return response


def _error(request: SaslAuthenticateRequest, code: ErrorCode) -> SaslAuthenticateResponse:
    return _response(request, AuthenticateResult(int(code), None, b""))


API = ApiSpec(
    key=36,
    name="SaslAuthenticate",
    min_version=0,
    max_version=2,
    handler=handle,
    error_response=_error,
)
