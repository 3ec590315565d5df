"""The sans-IO half of the inter-broker client (Kafka's ``NetworkClient`` bookkeeping,
``InFlightRequests`` and ``NodeApiVersions``): what goes on the wire and how an answer is
matched to its request, with no socket in sight. ``odradek.broker.inter_broker_client`` does
the I/O.

* :class:`Node` (a broker as a request target) and :class:`InterBrokerRequestError` (the
  client's one failure type) live here so that the controller, which only hands requests to
  the client, depends on the protocol layer and not on the broker package.
* :class:`OutboundRequest`: one request this broker sends another, able to encode itself at
  any version of ``[min_version, max_version]`` and to decode its answer at the version it was
  sent with. :func:`outbound_request` builds one from a kio request entity (one version: the
  entity's) or from a ZooKeeper-mode controller request of ``odradek.protocol.inter_broker``
  (the versions ``inter_broker.SUPPORTED_VERSIONS`` lists).
* :class:`NodeApiVersions`: a peer's ApiVersions answer; ``latest_usable_version(key, lo, hi)``
  picks the highest version both sides speak (UnsupportedVersionError when there is none).
  :func:`api_versions_request` / :func:`read_api_versions` are the negotiation itself:
  ApiVersions v3 first; a peer that does not know v3 answers UNSUPPORTED_VERSION in v0 format
  with its own ApiVersions range, and the request is made again at the highest common version.
* :class:`InFlightRequests`: one connection's requests awaiting answers. ``encode`` gives a
  request its correlation id (1, 2, ... wrapping at 2**31 - 1) and its frame: int32 size,
  request header (v1, or v2 when the API version is flexible; ControlledShutdown v0 header
  v0), body. ``complete(frame)`` takes a response frame (without its size prefix): answers
  come back in request order on one connection (Kafka's guarantee), so the frame must carry
  the oldest request's correlation id, else InvalidResponseError (the connection is then
  unusable); it returns that request and the body after the response header (v0, or v1 when
  flexible; always v0 for ApiVersions).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.protocol import inter_broker as ib
from odradek.protocol.errors import InvalidResponseError, UnsupportedVersionError
from odradek.protocol.headers import (
    encode_request_header,
    parse_response_header,
    response_header_version,
)
from odradek.protocol.messages import (
    decode_response,
    encode_body,
    make_entity,
    request_class,
)

__all__ = [
    "API_VERSIONS",
    "InFlightRequest",
    "InFlightRequests",
    "InterBrokerRequestError",
    "Node",
    "NodeApiVersions",
    "OutboundRequest",
    "api_versions_request",
    "outbound_request",
    "read_api_versions",
]

API_VERSIONS = 18
API_VERSIONS_VERSION = 3
"""The ApiVersions version asked first (Kafka 3.9's clients ask v3)."""
_UNSUPPORTED_VERSION = 35
_SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_MAX_CORRELATION_ID = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class Node:
    """A broker as a request target: id and the address to connect to (Kafka's ``Node``)."""

    id: int
    host: str
    port: int


class InterBrokerRequestError(ConnectionError):
    """A request to another broker got no usable answer: the one failure type of
    ``odradek.broker.inter_broker_client`` (its module docstring, Failures), naming the broker,
    the purpose of the connection and the API, with the ``cause``. Retriable as Kafka's
    NetworkException is: the caller may send the request again once the broker (or its
    successor) is reachable."""

    def __init__(self, broker_id: int, purpose: str, api: str, cause: BaseException) -> None:
        detail = str(cause) or type(cause).__name__
        super().__init__(f"{api} to broker {broker_id} ({purpose}): {detail}")
        self.broker_id = broker_id
        self.purpose = purpose
        self.api = api
        self.cause = cause


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """A request to another broker, encodable at any version of ``[min_version, max_version]``.

    ``encode_body(version)`` -> the body bytes (no size, no header);
    ``decode_body(version, body)`` -> the decoded answer (``body``: after the response header).
    ``name`` names it in logs and errors.
    """

    api_key: int
    min_version: int
    max_version: int
    encode_body: Callable[[int], bytes]
    decode_body: Callable[[int, memoryview], Any]
    name: str


def _kio_outbound(entity: Any) -> OutboundRequest:
    cls = type(entity)
    key, version = int(cls.__api_key__), int(cls.__version__)

    def encode(v: int) -> bytes:
        return encode_body(entity)

    def decode(v: int, body: memoryview) -> Any:
        return decode_response(key, v, body)

    return OutboundRequest(key, version, version, encode, decode, cls.__name__)


def _ranged(
    api_key: int,
    name: str,
    encode: Callable[[int], bytes],
    decode: Callable[[int, memoryview], Any],
) -> OutboundRequest:
    lo, hi = ib.SUPPORTED_VERSIONS[api_key]
    return OutboundRequest(api_key, lo, hi, encode, decode, name)


def outbound_request(request: Any) -> OutboundRequest:
    """The :class:`OutboundRequest` for a kio request entity (its own version only), an
    ``inter_broker`` LeaderAndIsr / UpdateMetadata / StopReplica / ControlledShutdown request
    (the versions ``SUPPORTED_VERSIONS`` lists; Kafka's controller sends the newest the peer
    speaks), or an ``OutboundRequest`` (returned as it is)."""
    if isinstance(request, OutboundRequest):
        return request
    if isinstance(request, ib.LeaderAndIsrRequest):
        names = {v: k for k, v in request.topic_ids.items()}
        lai = request
        return _ranged(
            ib.LEADER_AND_ISR,
            "LeaderAndIsr",
            lambda v: ib.encode_leader_and_isr_request(lai, v),
            lambda v, b: ib.decode_leader_and_isr_response(b, names, v),
        )
    if isinstance(request, ib.UpdateMetadataRequest):
        um = request
        return _ranged(
            ib.UPDATE_METADATA,
            "UpdateMetadata",
            lambda v: ib.encode_update_metadata_request(um, v),
            lambda v, b: ib.decode_update_metadata_response(b, v),
        )
    if isinstance(request, ib.StopReplicaRequest):
        sr = request
        return _ranged(
            ib.STOP_REPLICA,
            "StopReplica",
            lambda v: ib.encode_stop_replica_request(sr, v),
            lambda v, b: ib.decode_stop_replica_response(b, v),
        )
    if isinstance(request, ib.ControlledShutdownRequest):
        cs = request
        return _ranged(
            ib.CONTROLLED_SHUTDOWN,
            "ControlledShutdown",
            lambda v: ib.encode_controlled_shutdown_request(cs, v),
            lambda v, b: ib.decode_controlled_shutdown_response(b, v),
        )
    if hasattr(type(request), "__api_key__"):
        return _kio_outbound(request)
    raise TypeError(f"not a request: {type(request).__name__}")


# -- ApiVersions negotiation ---------------------------------------------------------------------


class NodeApiVersions:
    """What one peer serves: api key -> (min version, max version), from its ApiVersions."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: Mapping[int, tuple[int, int]]) -> None:
        self.ranges = dict(ranges)

    def latest_usable_version(self, api_key: int, low: int, high: int) -> int:
        """The highest version in both ``[low, high]`` and the peer's range for ``api_key``;
        UnsupportedVersionError (carrying ``high``) when the ranges do not meet."""
        theirs = self.ranges.get(api_key)
        if theirs is None:
            raise UnsupportedVersionError(api_key, high)
        version = min(high, theirs[1])
        if version < max(low, theirs[0]):
            raise UnsupportedVersionError(api_key, version)
        return version

    def __repr__(self) -> str:
        return f"NodeApiVersions({self.ranges!r})"


def api_versions_request(version: int = API_VERSIONS_VERSION) -> OutboundRequest:
    """ApiVersions at ``version`` (v3+: client software "odradek"), decoded by
    :func:`read_api_versions`'s rules: an UNSUPPORTED_VERSION answer is read in v0 format."""
    cls = request_class(API_VERSIONS, version)
    if cls is None:
        raise UnsupportedVersionError(API_VERSIONS, version)
    fields: dict[str, Any] = {}
    if version >= 3:
        fields = {"client_software_name": "odradek", "client_software_version": "1"}
    entity = make_entity(cls, **fields)

    def decode(v: int, body: memoryview) -> Any:
        if len(body) >= 2 and _I16.unpack_from(body, 0)[0] == _UNSUPPORTED_VERSION:
            return decode_response(API_VERSIONS, 0, body)
        return decode_response(API_VERSIONS, v, body)

    return OutboundRequest(
        API_VERSIONS, version, version, lambda v: encode_body(entity), decode, "ApiVersions"
    )


def read_api_versions(response: Any, asked: int) -> NodeApiVersions | int:
    """A decoded ApiVersions answer to a request at version ``asked``: the peer's ranges, or
    the ApiVersions version to ask again with (the peer did not know ``asked`` and listed its
    own range). UnsupportedVersionError when no version is common; InvalidResponseError for
    any other error code."""
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    code = int(response.error_code)
    if code == _UNSUPPORTED_VERSION:
        again = NodeApiVersions(ranges).latest_usable_version(API_VERSIONS, 0, asked - 1)
        return again
    if code != 0:
        raise InvalidResponseError(f"ApiVersions answered error {code}")
    return NodeApiVersions(ranges)


# -- one connection's requests in flight ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InFlightRequest:
    """A request sent and not yet answered: its correlation id, api key and version, and the
    largest response frame accepted for it."""

    correlation_id: int
    api_key: int
    api_version: int
    max_response_bytes: int


class InFlightRequests:
    """The requests of one connection awaiting answers, oldest first (see the module docstring)."""

    __slots__ = ("_last_id", "_queue", "client_id")

    def __init__(self, client_id: str | None) -> None:
        self.client_id = client_id
        self._last_id = 0
        self._queue: deque[InFlightRequest] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def encode(
        self, request: OutboundRequest, version: int, max_response_bytes: int
    ) -> tuple[InFlightRequest, bytes]:
        """The next correlation id and the whole frame (size prefix included) of ``request``
        at ``version``; the request is in flight from now on."""
        self._last_id = self._last_id % _MAX_CORRELATION_ID + 1
        entry = InFlightRequest(self._last_id, request.api_key, version, max_response_bytes)
        header = encode_request_header(
            request.api_key, version, entry.correlation_id, self.client_id
        )
        body = request.encode_body(version)
        self._queue.append(entry)
        return entry, _SIZE.pack(len(header) + len(body)) + header + body

    def next_response_bound(self, default: int) -> int:
        """The largest response frame the oldest request in flight accepts (``default`` when
        none is in flight: any frame is then an error, see ``complete``)."""
        return self._queue[0].max_response_bytes if self._queue else default

    def complete(self, frame: bytes | bytearray | memoryview) -> tuple[InFlightRequest, memoryview]:
        """The oldest request in flight and its answer's body (``frame``: a response without
        its size prefix). InvalidResponseError when nothing is in flight or the correlation
        id is not the oldest request's."""
        if not self._queue:
            raise InvalidResponseError("a response arrived with no request in flight")
        entry = self._queue[0]
        view = memoryview(frame)
        correlation_id, pos = parse_response_header(
            view, response_header_version(entry.api_key, entry.api_version)
        )
        if correlation_id != entry.correlation_id:
            raise InvalidResponseError(
                f"correlation id {correlation_id}, expected {entry.correlation_id}"
            )
        self._queue.popleft()
        return entry, view[pos:]
