"""SaslHandshake (17): choose the SASL mechanism of the connection (security/sasl.py).

v0: the tokens that follow are raw frames; v1: they are SaslAuthenticate requests. An unknown
mechanism is answered UNSUPPORTED_SASL_MECHANISM (33) with the enabled mechanisms, then the
connection closes. On a listener without SASL, or after authentication without
re-authentication enabled, the answer is ILLEGAL_SASL_STATE (34), as Kafka's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kio.schema.errors import ErrorCode

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis._util import make, response_types
from odradek.security.sasl import ILLEGAL_SASL_STATE

if TYPE_CHECKING:
    from odradek.protocol.api_types import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["API", "handle"]


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    types = response_types(request)
    auth = ctx.sasl
    if auth is None:
        code, mechanisms = ILLEGAL_SASL_STATE, ()
    else:
        code, mechanisms = auth.handshake(int(request.__version__), request.mechanism)
    return cast(
        "SaslHandshakeResponse",
        make(types.SaslHandshakeResponse, error_code=ErrorCode(code), mechanisms=tuple(mechanisms)),
    )


def _error(request: SaslHandshakeRequest, code: ErrorCode) -> SaslHandshakeResponse:
    response: SaslHandshakeResponse = make(
        response_types(request).SaslHandshakeResponse, error_code=code, mechanisms=()
    )
    return response


API = ApiSpec(
    key=17,
    name="SaslHandshake",
    min_version=0,
    max_version=1,
    handler=handle,
    error_response=_error,
)
