"""What an API module defines and what its handler receives.

Every API lives in its own module under ``odradek.broker.apis`` and defines::

    API = ApiSpec(key=0, name="Produce", min_version=0, max_version=10, handler=handle)

    async def handle(ctx: RequestContext, request: ProduceRequest) -> Response: ...

``odradek.broker.registry`` lists the modules' specs. This module imports no API module and
no server (only the services a handler is handed), so that API modules, the registry and the
connection layer import it without a circle.

``min_version``/``max_version`` are what ApiVersions advertises, and exactly what is served.
``min_request_version`` is the oldest version the handler's own decoding takes (kio's, or
``decoder``); the versions from ``min_version`` below it are the old ones Kafka 3.9 still serves
(KIP-896 dropped them in 4.0), served through ``odradek.protocol.legacy_versions``: upgraded to
the handler's oldest version on the way in, written back at the old version on the way out.
``error_response`` (``(request, ErrorCode) -> Response``) is the UNKNOWN_SERVER_ERROR answer
when a handler fails (without one, the connection is closed); ``decoder`` (``(frame, pos,
version=v) -> (request, bytes read)``) is used instead of kio's decoder, e.g. Produce's
zero-copy one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

from kio.schema.errors import ErrorCode

from odradek.broker.services import BrokerServices
from odradek.protocol.headers import RequestHeaderInfo
from odradek.security.principal import KafkaPrincipal

__all__ = [
    "ApiSpec",
    "Authorize",
    "Decoder",
    "EncodedResponse",
    "ErrorResponse",
    "Handler",
    "Req",
    "RequestContext",
    "RequestHeaderInfo",
    "Resp",
    "Response",
    "TopicMetrics",
]


class TopicMetrics(Protocol):
    """Where Produce and Fetch report per-topic traffic (Kafka's BrokerTopicMetrics);
    ``odradek.metrics.BrokerMetrics`` implements it. Called once per partition appended to or
    read from, with the record bytes (whole batches) and, on append, the records' count."""

    def topic_bytes_in(self, topic: str, nbytes: int, records: int) -> None: ...

    def topic_bytes_out(self, topic: str, nbytes: int) -> None: ...


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body: the broker's services, the
    request header, the client's address, the connection's id, where to report per-topic
    traffic (None when nothing collects it: no console), and who is asking: the connection's
    authenticated ``principal`` (``User:ANONYMOUS`` on PLAINTEXT and on SSL without a client
    certificate), the listener it came in on, its security protocol, the (host, port) this
    broker advertises on that listener (None: the registered address), and the connection's
    SASL state (``security.sasl.SaslServerAuthenticator``; None off SASL listeners). The authorizer decides on
    ``principal`` and ``client_host``."""

    services: BrokerServices
    header: RequestHeaderInfo
    client_host: str
    connection_id: int
    metrics: TopicMetrics | None = None
    principal: KafkaPrincipal = KafkaPrincipal.ANONYMOUS
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    advertised: tuple[str, int] | None = None
    sasl: Any = None
    throttle: Callable[[int], None] | None = None
    """Mutes the connection for that many milliseconds (a client over its quota; Kafka's
    channel muting): no request is read from it meanwhile. None: nothing to mute."""


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded by a hand-written encoder (no response header).

    ``parts`` are written in order; a part is ``bytes``/``memoryview`` or a storage
    ``FileRegion`` (sent with os.sendfile or read, at the connection's choice). ``size`` is
    the total body size in bytes.
    """

    parts: Sequence[Any]
    size: int


# A kio response entity, an EncodedResponse, or None for "send no response" (Produce acks=0).
Response = Any
Req = TypeVar("Req")
Resp = TypeVar("Resp")
Handler: TypeAlias = Callable[[RequestContext, Req], Awaitable[Resp]]
"""``handle(ctx, request) -> response``: a handler takes its API's request type (the union of
the kio classes of the versions it serves, ``odradek.protocol.api_types``, or odradek's own
decoded type) and returns the matching response type."""
ErrorResponse: TypeAlias = Callable[[Req, ErrorCode], Resp]
Authorize: TypeAlias = Callable[[RequestContext, Req], Resp | None]
"""``authorize(ctx, request)``: the refusal to answer with, or None to run the handler."""
Decoder = Callable[..., tuple[Any, int]]


@dataclass(frozen=True, slots=True)
class ApiSpec(Generic[Req, Resp]):
    """One API: its key, name, advertised versions, handler and optional hooks."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler[Req, Resp]
    min_request_version: int | None = None
    """Oldest version the handler's own decoding takes; older ones (down to min_version) go
    through protocol.legacy_versions. Defaults to min_version."""
    error_response: ErrorResponse[Req, Resp] | None = None
    decoder: Decoder | None = None
    authorize: Authorize[Req, Resp] | None = None
    """The check of the whole request against the ACLs (Kafka's "Operations and Resources on
    Protocols" for requests authorized as a whole, e.g. CLUSTER_ACTION for inter-broker APIs),
    run before the handler when the broker has an authorizer; see
    ``odradek.broker.apis._authz``. Per-resource checks (a Produce's topics) are the handler's."""
    oldest_served: int = field(init=False, repr=False, compare=False)
    """``min_request_version``, else ``min_version`` (derived once: read on every routing)."""

    def __post_init__(self) -> None:
        oldest = self.min_version if self.min_request_version is None else self.min_request_version
        object.__setattr__(self, "oldest_served", oldest)
