"""The one list of Kafka APIs the broker serves.

Every API lives in its own module under ``odradek.broker.apis`` and defines::

    API = ApiSpec(key=0, name="Produce", min_version=0, max_version=10, handler=handle)

    async def handle(ctx: RequestContext, request: ProduceRequest) -> Response: ...

Adding an API is adding one module and one line to ``API_MODULES``. ApiVersions is answered
from this registry, so what is advertised and what is served cannot drift apart.

``min_version``/``max_version`` are what ApiVersions advertises. Versions below
``min_request_version`` (the oldest kio can decode, or the oldest we accept) are refused at
request time with UNSUPPORTED_VERSION (DESIGN.md §4: old librdkafka probes exact versions).

``extra`` keys the server reads: ``"error_response"`` (``(request, ErrorCode) -> Response``,
the UNKNOWN_SERVER_ERROR answer when a handler fails) and ``"decoder"`` (``(frame, pos,
version=v) -> (request, bytes read)``, used instead of kio's decoder, e.g. Produce's zero-copy one).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.protocol.headers import RequestHeaderInfo

if TYPE_CHECKING:
    from odradek.broker.server import Broker

__all__ = [
    "API_MODULES",
    "ApiSpec",
    "EncodedResponse",
    "RequestContext",
    "RequestHeaderInfo",
    "Response",
    "load_registry",
]


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    header: RequestHeaderInfo
    client_host: str
    connection_id: int


@dataclass(frozen=True, slots=True)
class EncodedResponse:
    """A response body already encoded by a hand-written encoder (no response header).

    ``parts`` are written in order; a part is ``bytes``/``memoryview`` or a storage
    ``FileRegion`` (sent with os.sendfile or read, at the server's choice). ``size`` is the
    total body size in bytes.
    """

    parts: Sequence[Any]
    size: int


# A kio response entity, an EncodedResponse, or None for "send no response" (Produce acks=0).
Response = Any | EncodedResponse | None
Handler = Callable[[RequestContext, Any], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    min_request_version: int | None = None
    """Oldest version actually served; defaults to min_version."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def oldest_served(self) -> int:
        return self.min_version if self.min_request_version is None else self.min_request_version


# Module names under odradek.broker.apis. A module that does not exist yet is skipped.
API_MODULES: tuple[str, ...] = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "init_producer_id",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    # group coordinator APIs
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
)


def load_registry(modules: Sequence[str] = API_MODULES) -> dict[int, ApiSpec]:
    """Import every API module and index its ``API`` by api key."""
    registry: dict[int, ApiSpec] = {}
    for name in modules:
        qualified = f"odradek.broker.apis.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name == qualified:
                continue
            raise
        spec: ApiSpec = module.API
        if spec.key in registry:
            raise RuntimeError(
                f"two modules serve api key {spec.key}: {registry[spec.key].name}, {spec.name}"
            )
        registry[spec.key] = spec
    return registry
