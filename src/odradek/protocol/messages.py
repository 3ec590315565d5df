"""Request/response bodies: kio for decoding and for the cold encoders.

Broker side::

    header, request = decode_request(frame)          # frame: bytes after the size prefix
    data = encode_response(response, header.correlation_id,
                           api_key=header.api_key, api_version=header.api_version)

Client side::

    data = encode_request(request, correlation_id=7, client_id="odradek")
    correlation_id = read_correlation_id(frame)
    response = decode_response(api_key, api_version, frame, header=True)

``decode_request`` raises only ProtocolError subclasses: UnsupportedVersionError for an
api key or version kio has no schema for (the broker answers UNSUPPORTED_VERSION; for
ApiVersions with :func:`encode_api_versions_error`), InvalidRequestError for anything that
cannot be parsed (truncated, garbage, trailing bytes).

Tagged fields: kio writes a tagged field only when its value differs from the field's
default, which is what old librdkafka needs ("Read underflow" on unexpected tags); the tests
check this for the responses odradek serves.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, NamedTuple

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.protocol import inter_broker
from odradek.protocol.errors import (
    InvalidRequestError,
    InvalidResponseError,
    ProtocolError,
    UnsupportedVersionError,
)
from odradek.protocol.headers import (
    API_VERSIONS_KEY,
    RequestHeaderInfo,
    encode_request_header,
    parse_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)

__all__ = [
    "RequestCodec",
    "decode_request",
    "decode_response",
    "encode_api_versions_error",
    "encode_body",
    "encode_request",
    "encode_response",
    "make_entity",
    "read_correlation_id",
    "readonly",
    "request_class",
    "request_codec",
    "response_class",
]

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_UNSUPPORTED_VERSION = 35


@cache
def _entity_fields(cls: type) -> frozenset[str]:
    return frozenset(getattr(cls, "__dataclass_fields__", ()))


def make_entity(cls: type, **kwargs: Any) -> Any:
    """Build the kio entity ``cls`` from the keyword arguments it has; the others are dropped
    (fields differ between an API's versions: a caller writes every field once and works
    for all versions)."""
    known = _entity_fields(cls)  # kio entities are dataclasses
    return cls(**{k: v for k, v in kwargs.items() if k in known})


# (api_key, version) -> RequestCodec or None when kio has no schema.
_request_codecs: dict[tuple[int, int], RequestCodec | None] = {}
_response_readers: dict[tuple[int, int], Callable[..., Any] | None] = {}
_CACHE_LIMIT = 4096  # keys come from peers: keep misses bounded


def request_class(api_key: int, api_version: int) -> type[Any] | None:
    """kio's request entity class for (api_key, api_version), or None."""
    try:
        return load_request_schema(api_key, api_version)
    except (KioIndexError, ImportError, AttributeError, ValueError):
        return None


def response_class(api_key: int, api_version: int) -> type[Any] | None:
    """kio's response entity class for (api_key, api_version), or None."""
    try:
        return load_response_schema(api_key, api_version)
    except (KioIndexError, ImportError, AttributeError, ValueError):
        return None


class RequestCodec(NamedTuple):
    """What a server needs per (api key, version): decode the body, frame the response.

    ``reader(frame, pos) -> (request entity, bytes read)`` is kio's native decoder, which
    accepts only read-only buffers (pass ``readonly(frame)``);
    ``header_version`` is the request header version (2 flexible, else 1);
    ``response_header_version`` 1 for flexible responses, 0 otherwise and for ApiVersions.
    """

    reader: Callable[..., tuple[Any, int]]
    header_version: int
    response_header_version: int


def readonly(data: bytes | bytearray | memoryview) -> bytes | memoryview:
    """``data`` as kio's decoders want it: read-only (a read-only view of a writable buffer,
    no copy)."""
    if isinstance(data, bytes):
        return data
    view = data if isinstance(data, memoryview) else memoryview(data)
    return view if view.readonly else view.toreadonly()


def request_codec(api_key: int, api_version: int) -> RequestCodec | None:
    """The (cached) RequestCodec of (api_key, api_version), or None when kio has no schema."""
    key = (api_key, api_version)
    try:
        return _request_codecs[key]
    except KeyError:
        pass
    cls = request_class(api_key, api_version)
    entry = None
    if cls is not None:
        flexible = bool(cls.__flexible__)
        entry = RequestCodec(
            entity_reader(cls),
            2 if flexible else 1,
            1 if flexible and api_key != API_VERSIONS_KEY else 0,
        )
    else:  # the ZooKeeper-mode inter-broker APIs (4-7): not in kio
        ib_reader = inter_broker.request_reader(api_key, api_version)
        if ib_reader is not None:
            entry = RequestCodec(
                ib_reader,
                request_header_version(api_key, api_version),
                response_header_version(api_key, api_version),
            )
    if len(_request_codecs) < _CACHE_LIMIT:
        _request_codecs[key] = entry
    return entry


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeaderInfo, Any]:
    """Parse one request frame (without its size prefix) into (header, kio request entity).

    Raises UnsupportedVersionError or InvalidRequestError, nothing else.
    """
    try:
        if len(frame) < 10:
            raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a header")
        api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
        entry = _request_codecs.get((api_key, api_version)) or request_codec(api_key, api_version)
        if entry is None:
            try:
                header, _ = parse_request_header(frame, 1)
                correlation_id: int | None = header.correlation_id
                client_id = header.client_id
            except InvalidRequestError as exc:
                correlation_id, client_id = exc.correlation_id, None
            raise UnsupportedVersionError(
                api_key, api_version, correlation_id=correlation_id, client_id=client_id
            )
        reader, header_version, _ = entry
        header, pos = parse_request_header(frame, header_version)
        try:
            request, size = reader(readonly(frame), pos)
        except Exception as exc:
            raise InvalidRequestError(
                f"cannot parse api key {api_key} version {api_version}: "
                f"{type(exc).__name__}: {exc}",
                api_key=api_key,
                api_version=api_version,
                correlation_id=header.correlation_id,
            ) from exc
        if pos + size != len(frame):
            raise InvalidRequestError(
                f"{len(frame) - pos - size} bytes after the body of api key {api_key} "
                f"version {api_version}",
                api_key=api_key,
                api_version=api_version,
                correlation_id=header.correlation_id,
            )
        return header, request
    except ProtocolError:
        raise
    except Exception as exc:  # the contract: nothing but ProtocolError escapes
        raise InvalidRequestError(f"cannot parse request: {type(exc).__name__}: {exc}") from exc


def encode_body(entity: Any) -> bytes:
    """The kio encoding of ``entity`` alone (no size, no header)."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _check_entity(entity: Any, api_key: int, api_version: int) -> None:
    cls = type(entity)
    if (
        getattr(cls, "__api_key__", None) != api_key
        or getattr(cls, "__version__", None) != api_version
    ):
        raise ValueError(
            f"{cls.__name__} is api key {getattr(cls, '__api_key__', None)} version "
            f"{getattr(cls, '__version__', None)}, not api key {api_key} version {api_version}"
        )


def encode_response(entity: Any, correlation_id: int, *, api_key: int, api_version: int) -> bytes:
    """Size prefix + response header (v0/v1 as the api requires) + kio-encoded body.

    ValueError if ``entity`` is not the response class of (api_key, api_version).
    """
    _check_entity(entity, api_key, api_version)
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    buffer.write(_SIZE.pack(correlation_id))
    if response_header_version(api_key, api_version) >= 1:
        buffer.write(b"\x00")
    entity_writer(type(entity))(buffer, entity)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


def encode_request(entity: Any, *, correlation_id: int, client_id: str | None) -> bytes:
    """Size prefix + request header (v1, or v2 when flexible) + kio-encoded body."""
    cls = type(entity)
    header = encode_request_header(cls.__api_key__, cls.__version__, correlation_id, client_id)
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    buffer.write(header)
    entity_writer(cls)(buffer, entity)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


def read_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id at the start of a response frame (both header versions)."""
    if len(frame) < 4:
        raise InvalidResponseError("response is shorter than its header")
    return int(_SIZE.unpack_from(frame, 0)[0])


def decode_response(
    api_key: int, api_version: int, body: bytes | bytearray | memoryview, *, header: bool = False
) -> Any:
    """Parse a response body into kio's response entity.

    ``header=True``: ``body`` is the whole frame after the size prefix and starts with the
    response header, which is skipped. Raises UnsupportedVersionError (no schema) or
    InvalidResponseError, nothing else.
    """
    try:
        key = (api_key, api_version)
        reader = _response_readers.get(key)
        if reader is None:
            cls = response_class(api_key, api_version)
            if cls is None:
                raise UnsupportedVersionError(api_key, api_version)
            reader = entity_reader(cls)
            if len(_response_readers) < _CACHE_LIMIT:
                _response_readers[key] = reader
        pos = 0
        if header:
            _, pos = parse_response_header(body, response_header_version(api_key, api_version))
        try:
            response, size = reader(readonly(body), pos)
        except Exception as exc:
            raise InvalidResponseError(
                f"cannot parse response api key {api_key} version {api_version}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if pos + size != len(body):
            raise InvalidResponseError(
                f"{len(body) - pos - size} bytes after the response body "
                f"(api key {api_key} version {api_version})"
            )
        return response
    except ProtocolError:
        raise
    except Exception as exc:
        raise InvalidResponseError(f"cannot parse response: {type(exc).__name__}: {exc}") from exc


def encode_api_versions_error(
    correlation_id: int,
    api_keys: Iterable[tuple[int, int, int]],
    error_code: int = _UNSUPPORTED_VERSION,
) -> bytes:
    """An ApiVersions v0 response (size prefix + header v0) carrying ``error_code``.

    Sent when a client asks for an ApiVersions version the broker does not support; the
    client reads it as v0 and retries with a version from ``api_keys`` ((api_key, min
    version, max version) triples; Kafka sends just ApiVersions' own range).

    v0 body: error_code int16 · api_keys array (int32 count; api_key int16, min_version int16,
    max_version int16 each).
    """
    keys = list(api_keys)
    parts = [_SIZE.pack(correlation_id), struct.pack(">hi", error_code, len(keys))]
    parts.extend(struct.pack(">hhh", key, low, high) for key, low, high in keys)
    body = b"".join(parts)
    return _SIZE.pack(len(body)) + body
