"""Kafka error codes and the exceptions the protocol layer raises.

``ErrorCode`` is kio's enum (generated from Kafka's error table): members are lower-case
(``ErrorCode.unsupported_version``, value 35) and carry ``.retriable``.

Every exception raised while decoding bytes from a peer is a :class:`ProtocolError`:

* :class:`FrameTooLargeError` — a size prefix below 0 or above ``socket.request.max.bytes``:
  close the connection.
* :class:`UnsupportedVersionError` — an api key or version without a schema: answer
  UNSUPPORTED_VERSION (35); ``correlation_id`` is set when the header could be read.
* :class:`InvalidRequestError` — a request that cannot be parsed: Kafka closes the connection.
* :class:`InvalidResponseError` — the same for a response read by odradek's own client.

Record-level problems are ``odradek.protocol.records.CorruptRecordError`` (CORRUPT_MESSAGE, 2)
and ``InvalidRecordError`` (INVALID_RECORD, 87); they are ValueErrors, not ProtocolErrors,
because they are answered per partition rather than by closing the connection.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "FrameTooLargeError",
    "InvalidRequestError",
    "InvalidResponseError",
    "ProtocolError",
    "UnsupportedVersionError",
]


class ProtocolError(Exception):
    """Base class for bytes from a peer that break the Kafka protocol."""


class FrameTooLargeError(ProtocolError):
    """A frame size prefix below 0 or above the maximum frame size."""

    def __init__(self, size: int, max_frame_size: int) -> None:
        super().__init__(f"invalid frame size {size} (maximum {max_frame_size})")
        self.size = size
        self.max_frame_size = max_frame_size


class InvalidRequestError(ProtocolError):
    """A request whose header or body cannot be parsed.

    ``api_key``/``api_version``/``correlation_id`` are set when the header could be read.
    """

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class UnsupportedVersionError(ProtocolError):
    """An api key, or a version of it, that kio (and so odradek) has no schema for."""

    def __init__(
        self,
        api_key: int,
        version: int,
        *,
        correlation_id: int | None = None,
        client_id: str | None = None,
    ) -> None:
        super().__init__(f"unsupported api key {api_key} version {version}")
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.client_id = client_id


class InvalidResponseError(ProtocolError):
    """A response that cannot be parsed (odradek's own client)."""
