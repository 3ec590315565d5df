"""``request_percentage`` (KIP-124) as the connection applies it: which requests are charged,
and how a response is told its throttle time.

Every request whose handler answers is charged its handler time (the handler's synchronous
part: for a handler that waits, a Produce with acks=all or a long-polling Fetch, the part
before it waits, as Kafka charges the request thread's time and not the purgatory's) to the
``request_percentage`` rate of its principal and client id (``QuotaStore.record_request_time``).
Over the quota, the response carries the throttle time (the larger of it and the throttle a
byte-rate quota already gave) and the connection is muted for it, as Kafka's
``RequestHandlerHelper.sendResponseMaybeThrottle`` does; the throttle is at most one quota
window (``quota.window.size.seconds``).

Exempt, as in Kafka: the inter-broker APIs (``ClusterAction``: LeaderAndIsr, StopReplica,
UpdateMetadata, ControlledShutdown, WriteTxnMarkers, AlterPartition), a follower's Fetch, and
a Produce with acks=0 (no response).

``with_throttle_time`` sets ``throttle_time_ms`` in a kio response, and in the hand-written
encodings of Produce (the last field, before the empty tagged fields from v9), Fetch v1+ and
OffsetCommit v3+ (the first field). A consumer's Fetch over its request quota is answered as
Kafka's ``KafkaApis.handleFetchRequest`` answers it: the throttle time and no partition at all
(the connection replaces the response with ``apis.fetch.throttled_response``); the records read
are not sent, and the consumer fetches them again after the throttle.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
from typing import Any

from odradek.broker.api import EncodedResponse

__all__ = ["EXEMPT_APIS", "is_exempt", "with_throttle_time"]

EXEMPT_APIS = frozenset({4, 5, 6, 7, 27, 56})
"""LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers,
AlterPartition: Kafka's cluster actions, never throttled."""

_I32 = struct.Struct(">i")


def is_exempt(api_key: int, request: Any) -> bool:
    """Whether the request is not charged to any client's ``request_percentage``."""
    if api_key in EXEMPT_APIS:
        return True
    if api_key == 1:  # a follower's Fetch
        replica_id: Any = getattr(request, "replica_id", None)
        if replica_id is None:
            state = getattr(request, "replica_state", None)
            replica_id = getattr(state, "replica_id", -1)
        return int(replica_id) >= 0
    return False


def _patch(body: bytes | bytearray | memoryview, at: int, ms: int) -> bytes | None:
    if at < 0 or at + 4 > len(body):
        return None
    (current,) = _I32.unpack_from(body, at)
    if current >= ms:
        return None
    data = bytearray(body)
    _I32.pack_into(data, at, ms)
    return bytes(data)


def with_throttle_time(api_key: int, version: int, response: Any, ms: int) -> Any:
    """``response`` with ``throttle_time_ms`` at least ``ms`` (unchanged where the version
    has no such field or the encoding is not one of those above)."""
    if isinstance(response, EncodedResponse):
        parts = list(response.parts)
        if not parts or not isinstance(parts[0], (bytes, bytearray, memoryview)):
            return response
        if api_key == 0 and version >= 1 and len(parts) == 1:
            at = len(parts[0]) - (5 if version >= 9 else 4)
        elif (api_key == 1 and version >= 1) or (api_key == 8 and version >= 3):
            at = 0
        else:
            return response
        patched = _patch(parts[0], at, ms)
        if patched is None:
            return response
        parts[0] = patched
        return EncodedResponse(tuple(parts), response.size)
    current = getattr(response, "throttle_time", None)
    if (
        not isinstance(current, datetime.timedelta)
        or not dataclasses.is_dataclass(response)
        or isinstance(response, type)
    ):
        return response
    if current >= datetime.timedelta(milliseconds=ms):
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=ms))
