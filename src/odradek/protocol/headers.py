"""Request header v0-v2 and response header v0-v1.

Formats (big-endian)::

    request header v0: request_api_key int16 · request_api_version int16 · correlation_id int32
    request header v1: v0 · client_id nullable string (int16 length, -1 = null)
    request header v2: v1 · tagged fields (uvarint count, then uvarint tag · uvarint size · data)
    response header v0: correlation_id int32
    response header v1: v0 · tagged fields (odradek writes none: one 0 byte)

client_id keeps the int16-length string even in v2. Which version applies follows from the
api key and version: flexible requests (kio's ``__flexible__``) use request header v2, the
others v1 (v0 only for ControlledShutdown v0, which odradek does not serve). Flexible
responses use response header v1, except ApiVersions, whose response header is always v0
(a client must be able to read it before it knows the broker's versions).

The inter-broker APIs of ZooKeeper mode (LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6,
ControlledShutdown 7) are not in kio (generated from Kafka 4, which removed them): their
flexible versions are Kafka 3.9's ``flexibleVersions`` (``INTER_BROKER_FLEXIBLE``), their
codecs are ``odradek.protocol.inter_broker``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kio.index import KioIndexError, load_request_schema

from odradek.protocol._primitives import skip_tagged_fields
from odradek.protocol.errors import InvalidRequestError, InvalidResponseError

__all__ = [
    "API_VERSIONS_KEY",
    "INTER_BROKER_FLEXIBLE",
    "RequestHeaderInfo",
    "encode_request_header",
    "encode_response_header",
    "is_flexible",
    "parse_request_header",
    "parse_response_header",
    "request_header_version",
    "response_header_version",
    "skip_tagged_fields",
]

API_VERSIONS_KEY = 18

_FIXED = struct.Struct(">hhih")  # api key, api version, correlation id, client_id length
_CORRELATION_ID = struct.Struct(">i")

_flexible_cache: dict[tuple[int, int], bool | None] = {}

INTER_BROKER_FLEXIBLE: dict[int, tuple[int, int]] = {
    4: (4, 7),  # LeaderAndIsr: versions 0-7, flexible from 4
    5: (2, 4),  # StopReplica: 0-4, flexible from 2
    6: (6, 8),  # UpdateMetadata: 0-8, flexible from 6
    7: (3, 3),  # ControlledShutdown: 0-3, flexible from 3
}
"""api key -> (first flexible version, newest version) of the ZooKeeper-mode inter-broker APIs
(Kafka 3.9's message JSON files)."""


def _inter_broker_flexible(api_key: int, api_version: int) -> bool | None:
    first, newest = INTER_BROKER_FLEXIBLE[api_key]
    if not 0 <= api_version <= newest:
        return None
    return api_version >= first


class RequestHeaderInfo(NamedTuple):
    """The request header fields a handler needs (tagged header fields are skipped)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def is_flexible(api_key: int, api_version: int) -> bool | None:
    """Whether (api_key, api_version) uses flexible encoding; None when kio has no schema."""
    key = (api_key, api_version)
    try:
        return _flexible_cache[key]
    except KeyError:
        pass
    flexible: bool | None
    if api_key in INTER_BROKER_FLEXIBLE:
        flexible = _inter_broker_flexible(api_key, api_version)
    else:
        try:
            flexible = bool(load_request_schema(api_key, api_version).__flexible__)
        except (KioIndexError, ImportError, AttributeError, ValueError):
            flexible = None
    if len(_flexible_cache) < 4096:  # bounded: api keys and versions come from peers
        _flexible_cache[key] = flexible
    return flexible


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible requests, 1 otherwise (also for unknown ones); 0 for ControlledShutdown
    v0 (Kafka's one request with header v0)."""
    if api_key == 7 and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible responses, 0 otherwise and always 0 for ApiVersions."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def parse_request_header(
    frame: bytes | bytearray | memoryview, header_version: int | None = None
) -> tuple[RequestHeaderInfo, int]:
    """Parse the request header at the start of ``frame``; return it and the body offset.

    ``header_version`` None: v2 if the api key/version is flexible, else v1. Raises
    InvalidRequestError when the header is truncated or malformed.
    """
    if len(frame) < 10:
        raise InvalidRequestError(f"request header needs at least 10 bytes, got {len(frame)}")
    api_key, api_version, correlation_id, client_id_length = _FIXED.unpack_from(frame, 0)
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    if header_version == 0:
        return RequestHeaderInfo(api_key, api_version, correlation_id, None), 8
    pos = 10
    client_id: str | None = None
    if client_id_length >= 0:
        end = pos + client_id_length
        if end > len(frame):
            raise InvalidRequestError(
                "request header client_id is truncated",
                api_key=api_key,
                api_version=api_version,
                correlation_id=correlation_id,
            )
        try:
            client_id = str(frame[pos:end], "utf-8")  # no intermediate bytes copy
        except UnicodeDecodeError:
            raise InvalidRequestError(
                "request header client_id is not UTF-8",
                api_key=api_key,
                api_version=api_version,
                correlation_id=correlation_id,
            ) from None
        pos = end
    elif client_id_length != -1:
        raise InvalidRequestError(
            f"invalid client_id length {client_id_length}",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        )
    header = RequestHeaderInfo(api_key, api_version, correlation_id, client_id)
    if header_version >= 2:
        if pos < len(frame) and frame[pos] == 0:  # no tagged fields: the usual case
            return header, pos + 1  # (skip_tagged_fields checks this too; saves a call)
        try:
            pos = skip_tagged_fields(frame, pos)
        except ValueError as exc:
            raise InvalidRequestError(
                f"request header tagged fields: {exc}",
                api_key=api_key,
                api_version=api_version,
                correlation_id=correlation_id,
            ) from None
    return header, pos


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Request header v1, or v2 (with an empty tagged-field section) when flexible."""
    if client_id is None:
        head = _FIXED.pack(api_key, api_version, correlation_id, -1)
    else:
        raw = client_id.encode()
        head = _FIXED.pack(api_key, api_version, correlation_id, len(raw)) + raw
    if is_flexible(api_key, api_version):
        head += b"\x00"
    return head


_RESPONSE_HEADER_V1_SUFFIX = b"\x00"


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    head = _CORRELATION_ID.pack(correlation_id)
    return head + _RESPONSE_HEADER_V1_SUFFIX if header_version >= 1 else head


def parse_response_header(
    frame: bytes | bytearray | memoryview, header_version: int
) -> tuple[int, int]:
    """Return (correlation_id, body offset) of a response frame (InvalidResponseError if bad)."""
    if len(frame) < 4:
        raise InvalidResponseError("response header is truncated")
    (correlation_id,) = _CORRELATION_ID.unpack_from(frame, 0)
    pos = 4
    if header_version >= 1:
        try:
            pos = skip_tagged_fields(frame, pos)
        except ValueError as exc:
            raise InvalidResponseError(f"response header tagged fields: {exc}") from None
    return correlation_id, pos
