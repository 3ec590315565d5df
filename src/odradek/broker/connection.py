"""One client connection: Kafka's wire protocol over an asyncio Protocol.

Per connection (``KafkaConnection``):

* every received chunk goes through protocol.framing.FrameDecoder; all whole frames are handled at once;
* a frame size < 0 or > ``socket.request.max.bytes`` closes the connection; so does a request
  whose header or body does not decode, an unknown API key or an unsupported version (except
  ApiVersions, which gets a v0 UNSUPPORTED_VERSION answer) — never the broker;
* handlers are coroutines, but most finish without suspending: the connection drives them
  with ``coro.send(None)`` and only wraps the rare suspended one (a long-polling Fetch) in a
  Task. Responses go out in request order (``ResponseQueue``, below, sans I/O); everything
  answered while handling one chunk is written with a single ``transport.writelines``;
* a handler exception is logged; the API's ``ApiSpec.error_response`` answers with
  UNKNOWN_SERVER_ERROR when the API defines one, else the connection is closed;
* every request that reaches its handler is reported to ``ConnectionOwner.metrics``:
  ``request_done`` when answered, ``request_failed(..., error)`` when its handler or its
  response encoding raised (``UNKNOWN_SERVER_ERROR``); a request of a known API refused before
  its handler (``UNSUPPORTED_VERSION``, ``INVALID_REQUEST``) is reported with ``request_refused``;
* a client that does not read its responses is not read from either: above 4 MiB of unsent
  responses the transport pauses reading (pause_writing / resume_writing);
* FileRegion parts (record bytes in segment files) are read into bytes and written with the
  rest (measured cheaper on loopback); with ODRADEK_SENDFILE=1 they go out with ``os.sendfile``
  when the transport's buffer is empty;
* old request versions that kio cannot decode (those Kafka 3.9 serves and 4.0 dropped, KIP-896)
  go through ``protocol.legacy_versions``: the body is upgraded to the API's oldest kio version,
  the handler runs unchanged, and its answer is written back at the old version with response
  header v0. A Fetch below v4 answers with ``LazyDownConversion`` parts: they are converted one
  chunk at a time *as the socket drains* (a paused transport stops the conversion; whatever
  follows waits in a backlog and the connection is not read meanwhile), so a slow old consumer
  holds at most the transport's buffer plus one chunk of the broker's memory.

The connection knows its owner (the Broker) only as a ``ConnectionOwner``: the API registry,
the handlers' services, the route cache, the request size limit, and (un)registration.

Security (``odradek.broker.endpoints.ListenerEndpoint``, one per listener): on an SSL listener
the principal is the client certificate's DN mapped by ``ssl.principal.mapping.rules``
(``User:ANONYMOUS`` without a certificate). On a SASL listener the connection holds a
``SaslServerAuthenticator`` (security/sasl.py): until it is COMPLETE, a request it does not
allow closes the connection, frames are limited to ``sasl.server.max.receive.size``, raw token
frames (SaslHandshake v0) go to it without a request header, and a failed authentication is
answered and then closed. After it, the principal is ``User:<name>``. With
``connections.max.reauth.ms``, a request other than SaslHandshake/SaslAuthenticate after the
session expired closes the connection (KIP-368). Every handler's ``RequestContext`` carries
the principal, the listener's name and security protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.endpoints import ListenerEndpoint
from odradek.broker.api import ApiSpec, EncodedResponse, RequestContext, TopicMetrics
from odradek.broker.apis import fetch as fetch_api
from odradek.broker.request_quota import is_exempt, with_throttle_time
from odradek.broker.services import BrokerServices
from odradek.protocol.errors import FrameTooLargeError, InvalidRequestError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import encode_response_header, parse_request_header
from odradek.protocol.legacy_records import LazyDownConversion, RecordsSource
from odradek.protocol.legacy_versions import LegacyCodec, LegacyRequest, legacy_codec
from odradek.protocol.messages import (
    RequestCodec,
    encode_api_versions_error,
    encode_body,
    request_codec,
)
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SaslServerAuthenticator,
    SaslState,
)
from odradek.security.scram import AuthenticationError
from odradek.security.tls import distinguished_name

__all__ = ["CLOSE", "ConnectionOwner", "KafkaConnection", "ResponseQueue", "Route"]

log = logging.getLogger("odradek.broker")

_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_I16 = struct.Struct(">h")
USE_SENDFILE = os.environ.get("ODRADEK_SENDFILE", "0") == "1" and hasattr(os, "sendfile")
"""os.sendfile for record bytes: off by default. Measured here (loopback, page cache, uvloop,
confluent-kafka consumer): broker CPU 0.10 s per million 100-byte records consumed with
sendfile vs 0.07 s reading the region into bytes and writing it with the rest of the response
(one writelines per chunk). ODRADEK_SENDFILE=1 turns it on (worth it when the data is not in
the page cache or the link is slower than the copy)."""
_HANDLER_ERROR = "UNKNOWN_SERVER_ERROR"
"""The error a request whose handler raised is answered with (and counted under)."""
SENDFILE_MIN = 16384
"""Regions smaller than this are read and written with the rest (a syscall pair costs more)."""

Route = tuple[ApiSpec[Any, Any], RequestCodec, bool, LegacyCodec | None] | str
"""(spec, decoding info, whether the reader is kio's, the old version's codec or None) for an
(api key, version), or the reason to close the connection."""


def records_source(records: Any) -> tuple[RecordsSource, int]:
    """A Fetch response's records (bytes, or a storage FileRegion) as (source, length) for
    LazyDownConversion: a FileRegion is read with ``os.pread`` a chunk at a time."""
    if isinstance(records, (bytes, bytearray, memoryview)):
        return records, len(records)
    fd: int = records.fd
    base: int = records.position

    def read(position: int, size: int) -> bytes:
        return os.pread(fd, size, base + position)

    return read, int(records.length)


class RequestMetrics(TopicMetrics, Protocol):
    """Where a connection reports each request (odradek.metrics.BrokerMetrics); handlers get it
    as ``RequestContext.metrics`` for per-topic traffic (``TopicMetrics``)."""

    def request_done(
        self, api_key: int, version: int, seconds: float, request_bytes: int
    ) -> None: ...

    def request_failed(
        self, api_key: int, version: int, seconds: float, request_bytes: int, error: str
    ) -> None:
        """A request whose handler (or response encoding) raised; ``error`` is the Kafka error
        name it was answered with (or would have been, when the connection is closed)."""

    def request_refused(self, api_key: int, error: str) -> None:
        """A request of a known API refused before its handler ran (the connection closes)."""


class ConnectionOwner(Protocol):
    """What a connection needs from the broker that accepted it."""

    registry: dict[int, ApiSpec[Any, Any]]
    metrics: RequestMetrics | None
    """Request count, latency and size; None when nothing collects them (no console)."""
    routes: dict[tuple[int, int], Route]
    """Shared cache of ``KafkaConnection._route`` answers."""
    stopping: bool

    @property
    def services(self) -> BrokerServices: ...

    @property
    def max_request_bytes(self) -> int: ...

    def register(self, conn: KafkaConnection) -> int: ...

    def unregister(self, connection_id: int) -> None: ...


# -- response ordering (sans I/O) -------------------------------------------------------------


class _Close:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CLOSE"


CLOSE: Any = _Close()
"""A response that closes the connection (a handler failed without an error response)."""


class _Slot:
    """One response in the queue: parts (None: no response, acks=0), or CLOSE."""

    __slots__ = ("done", "parts")

    def __init__(self) -> None:
        self.done = False
        self.parts: Any = None


class ResponseQueue:
    """The responses of one connection, released in request order.

    A response known while its request is handled is ``add``ed; one known later (a suspended
    handler) gets a ``reserve``d slot that ``fill`` completes. Both append to ``out`` the parts
    that may be written now — never one queued behind an unfilled slot — and return True when
    the connection must close now (a CLOSE reached the head of the queue). Responses are
    ``list``s of parts, ``None`` (no response) or ``CLOSE``.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: deque[_Slot] = deque()

    def __len__(self) -> int:
        """Responses waiting behind an unfilled slot (the slots included)."""
        return len(self._pending)

    def add(self, parts: Any, out: list[Any]) -> bool:
        if self._pending:
            slot = _Slot()
            slot.parts = parts
            slot.done = True
            self._pending.append(slot)
            return False
        if parts is CLOSE:
            return True
        if parts:
            out.extend(parts)
        return False

    def reserve(self) -> _Slot:
        slot = _Slot()
        self._pending.append(slot)
        return slot

    def fill(self, slot: _Slot, parts: Any, out: list[Any]) -> bool:
        slot.parts = parts
        slot.done = True
        pending = self._pending
        while pending and pending[0].done:
            s = pending.popleft()
            if s.parts is CLOSE:
                return True
            if s.parts:
                out.extend(s.parts)
        return False

    def clear(self) -> None:
        self._pending.clear()


class KafkaConnection(asyncio.Protocol):
    """One client connection. See the module docstring for the rules."""

    def __init__(self, owner: ConnectionOwner, endpoint: ListenerEndpoint | None = None) -> None:
        self.owner = owner
        self.endpoint = endpoint
        self.principal = KafkaPrincipal.ANONYMOUS
        self.listener_name = endpoint.name if endpoint is not None else "PLAINTEXT"
        self.security_protocol = endpoint.security_protocol if endpoint is not None else "PLAINTEXT"
        self._auth: SaslServerAuthenticator | None = None
        self._advertised: tuple[str, int] | None = None
        """This broker's address on the connection's listener (set once accepted)."""
        self.registry = owner.registry
        self.splitter = FrameDecoder(owner.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.connection_id = 0
        self.client_host = ""
        self._services: BrokerServices | None = None
        self._responses = ResponseQueue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._close_after_answers = False
        """A failed authentication: close once its answer is written."""
        self._sock_fd = -1
        self._paused = False
        self._backlog: deque[Any] | None = None
        """Parts waiting behind a down-conversion stream that the paused socket stopped."""
        self._muted_until = 0.0
        """The loop time a connection muted for a quota is read from again (0: not muted)."""
        self._held: list[memoryview] = []
        """Requests read but not handled: they came with one that muted the connection."""

    # asyncio callbacks -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.owner.stopping:
            # accepted in the same loop turn as stop(): stop() has already aborted the
            # connections it knew of, so this one would never be closed
            self._closing = True
            transport.abort()  # type: ignore[attr-defined]
            return
        self.connection_id = self.owner.register(self)
        self._services = self.owner.services
        peer = transport.get_extra_info("peername")
        self.client_host = peer[0] if peer else ""
        if self.endpoint is not None:
            self._advertised = self.endpoint.address
            if not self._secure(transport, self.endpoint):
                return
        with contextlib.suppress(Exception):
            transport.set_write_buffer_limits(high=4 * 1024 * 1024)  # type: ignore[attr-defined]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                self._sock_fd = sock.fileno()
            except Exception:
                self._sock_fd = -1

    def _secure(self, transport: asyncio.BaseTransport, endpoint: ListenerEndpoint) -> bool:
        """The TLS principal and the SASL state of a new connection; False: closed."""
        tls = endpoint.tls
        if tls is not None:
            sslobj = transport.get_extra_info("ssl_object")
            der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
            if der:
                try:
                    name = tls.mapper.name(distinguished_name(der))
                except Exception as exc:
                    endpoint.counters.tls_failed(endpoint.name, self.client_host, str(exc))
                    self.abort(None)
                    return False
                self.principal = KafkaPrincipal.user(name)
        sasl = endpoint.sasl
        if sasl is not None:
            self._auth = sasl.authenticator(self.client_host, self._now_ms)
            self.splitter.max_frame_size = min(self.splitter.max_frame_size, sasl.max_receive_size)
        return True

    def _now_ms(self) -> int:
        return self.owner.services.clock.now_ms()

    def _before_authenticated(self, frame: memoryview, out: list[Any]) -> bool:
        """A frame on a SASL connection not (or no longer) authenticated; True: handled here
        (a raw token, or the connection closed)."""
        auth = self._auth
        assert auth is not None
        if auth.raw_tokens:
            try:
                answer = auth.raw_token(bytes(frame))
            except AuthenticationError:
                self._emit(out, CLOSE)
                return True
            self._emit(out, [_I32.pack(len(answer)) + answer])
            self._after_auth()
            return True
        if len(frame) < 4:
            self.abort("request header too short")
            return True
        api_key = _I16.unpack_from(frame, 0)[0]
        if auth.authenticated and api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            log.info(
                "closing connection %d from %s: its SASL session expired",
                self.connection_id,
                self.client_host,
            )
            self.abort(None)
            return True
        if not auth.allows(api_key):
            reason = f"unexpected request with api key {api_key} during SASL {auth.state.value}"
            if self.endpoint is not None:
                self.endpoint.counters.authentication_failed(
                    self.listener_name, auth.mechanism or "-", self.client_host, reason
                )
            self.abort(None)
            return True
        return False

    def _after_auth(self) -> None:
        """After a SASL request: adopt the principal on success, close after a failure."""
        auth = self._auth
        assert auth is not None
        if auth.state is SaslState.COMPLETE and auth.principal is not None:
            self.principal = auth.principal
            self.splitter.max_frame_size = self.owner.max_request_bytes
        elif auth.state is SaslState.FAILED:
            self._close_after_answers = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.owner.unregister(self.connection_id)
        for task in list(self._tasks):
            task.cancel()
        self._responses.clear()
        self._backlog = None  # unsent down-conversion streams: drop them with their regions

    def pause_writing(self) -> None:
        # the client does not read its responses fast enough: stop reading its requests
        self._paused = True
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        if self.transport is None or self._closing:
            return
        backlog = self._backlog
        if backlog is not None:
            self._backlog = None
            self._write(list(backlog))
            if self._backlog is not None:  # paused again: keep not reading
                return
        if not self._muted_until:  # muted for a quota: _unmute resumes
            self.transport.resume_reading()

    def mute(self, ms: int) -> None:
        """Read no request for ``ms`` milliseconds (a client over its quota; Kafka mutes the
        channel once the throttled response is sent: responses already due still go out)."""
        if self.transport is None or self._closing or ms <= 0:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        self.transport.pause_reading()
        loop.call_at(until, self._unmute, until)

    def _unmute(self, until: float) -> None:
        if until != self._muted_until or self.transport is None or self._closing:
            return
        self._muted_until = 0.0
        held, self._held = self._held, []
        if held:
            self._handle_frames(held)
        if not self._paused and not self._muted_until and not self._closing:
            self.transport.resume_reading()

    def abort(self, reason: str | None) -> None:
        """Close at once, dropping unsent responses; ``reason`` is logged (None: shutdown)."""
        if reason is not None:
            log.warning(
                "closing connection %d from %s: %s", self.connection_id, self.client_host, reason
            )
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            frames = self.splitter.feed(data)
        except FrameTooLargeError as exc:
            self.abort(str(exc))
            return
        if frames:
            self._handle_frames(frames)

    def _handle_frames(self, frames: list[memoryview]) -> None:
        if self._held:  # muted for a quota: after the requests held already
            self._held.extend(frames)
            return
        out: list[Any] = []
        auth = self._auth
        for i, frame in enumerate(frames):
            try:
                if (
                    auth is not None
                    and (not auth.authenticated or auth.session_expired())
                    and self._before_authenticated(frame, out)
                ):
                    if self._closing or self._close_after_answers:
                        break
                    continue
                self._handle_frame(frame, out)
                if auth is not None and not self._closing:
                    self._after_auth()
            except Exception:
                log.exception(
                    "unexpected error handling a request on connection %d", self.connection_id
                )
                self.abort("internal error")
                return
            if self._closing or self._close_after_answers:
                break
            if self._muted_until and i + 1 < len(frames):
                # muted: the requests read with this one wait too (Kafka reads none meanwhile)
                self._held.extend(frames[i + 1 :])
                break
        if out and not self._closing:
            self._write(out)
        if self._close_after_answers and not self._closing and not self._responses:
            self._closing = True
            if self.transport is not None:
                self.transport.close()  # after the answers written above

    # request handling --------------------------------------------------------------------

    def _route(self, api_key: int, version: int) -> Route:
        """(spec, decoding info, whether the reader is kio's) for a request, or why the
        connection must be closed."""
        spec = self.registry.get(api_key)
        if spec is None:
            return f"unknown api key {api_key}"
        if version > spec.max_version or version < spec.min_version:
            return f"unsupported version {version} of api key {api_key} ({spec.name})"
        info = request_codec(api_key, version) if version >= spec.oldest_served else None
        if info is None:
            codec = legacy_codec(api_key, version)
            if codec is None:
                return f"cannot decode version {version} of api key {api_key} ({spec.name})"
            legacy_info = RequestCodec(
                codec.decode, codec.header_version, codec.response_header_version
            )
            return spec, legacy_info, False, codec
        decoder = spec.decoder
        if decoder is not None:  # the API's own body decoder (frame, pos, version)
            reader = functools.partial(decoder, version=version)
            return spec, info._replace(reader=reader), False, None
        return spec, info, True, None

    def _handle_frame(self, frame: memoryview, out: list[Any]) -> None:
        n = len(frame)
        if n < 10:
            self.abort(f"request header too short ({n} bytes)")
            return
        api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        routes = self.owner.routes
        route = routes.get((api_key, version))
        if route is None:
            route = self._route(api_key, version)
            if isinstance(route, str) and api_key == 18 and api_key in self.registry:
                ranges = sorted(
                    (s.key, s.min_version, s.max_version) for s in self.registry.values()
                )
                self._emit(out, [encode_api_versions_error(correlation_id, ranges)])
                return
            if len(routes) < 4096 and self.registry is self.owner.registry:
                routes[(api_key, version)] = route
        if isinstance(route, str):
            self._refused(api_key, "UNSUPPORTED_VERSION")
            self.abort(route)
            return
        spec, info, kio_reader, codec = route
        if kio_reader and not frame.readonly:  # kio decodes read-only buffers only
            frame = frame.toreadonly()
        try:
            header, pos = parse_request_header(frame, info.header_version)
        except InvalidRequestError as exc:
            self._refused(api_key, "INVALID_REQUEST")
            self.abort(f"bad request header: {exc}")
            return
        try:
            request, _size = info.reader(frame, pos)
        except Exception as exc:
            self._refused(api_key, "INVALID_REQUEST")
            self.abort(f"malformed {spec.name} v{version} request: {exc!r}")
            return
        legacy: LegacyRequest | None = None
        if codec is not None:  # an old version: the handler takes the upgraded request
            legacy = request
            request = legacy.request
        services = self._services
        assert services is not None
        metrics = self.owner.metrics
        ctx = RequestContext(
            services,
            header,
            self.client_host,
            self.connection_id,
            metrics,
            self.principal,
            self.listener_name,
            self.security_protocol,
            self._advertised,
            self._auth,
            throttle=self.mute,
        )
        started = time.perf_counter()
        coro: Any = spec.handler(ctx, request)
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            response = stop.value
            if services.quotas.configs and response is not None:  # request_percentage
                response = self._charge(spec, request, response, header.client_id, started)
            try:
                parts = self._encode(spec, info, correlation_id, response, request, legacy)
            except Exception:
                log.exception("%s v%d response encoding failed", spec.name, version)
                parts = self._error(spec, info, correlation_id, request, legacy)
                if metrics is not None:
                    metrics.request_failed(
                        api_key, version, time.perf_counter() - started, n, _HANDLER_ERROR
                    )
                self._emit(out, parts)
                return
            self._emit(out, parts)
            if metrics is not None:
                metrics.request_done(api_key, version, time.perf_counter() - started, n)
            return
        except Exception:
            log.exception("%s v%d handler failed", spec.name, version)
            if metrics is not None:
                metrics.request_failed(
                    api_key, version, time.perf_counter() - started, n, _HANDLER_ERROR
                )
            self._emit(out, self._error(spec, info, correlation_id, request, legacy))
            return
        # the handler suspended: finish it in a task, answer in order (request_percentage
        # charges the time until it suspended)
        slot = self._responses.reserve()
        task = asyncio.get_running_loop().create_task(_finish(coro, yielded))
        self._tasks.add(task)
        charge = (header.client_id, started, time.perf_counter())
        task.add_done_callback(
            lambda t: self._task_done(
                t,
                slot,
                spec,
                info,
                correlation_id,
                (request, legacy),
                (version, started, n),
                charge,
            )
        )

    def _task_done(
        self,
        task: asyncio.Task[Any],
        slot: _Slot,
        spec: ApiSpec[Any, Any],
        info: RequestCodec,
        correlation_id: int,
        requests: tuple[Any, LegacyRequest | None],
        timing: tuple[int, float, int],
        charge: tuple[str | None, float, float] | None = None,
    ) -> None:
        """Answer a handler that suspended (e.g. a long-polling Fetch); ``requests`` is (the
        handler's request, the old version's LegacyRequest or None); ``timing`` is (version,
        perf_counter at arrival, request bytes) for the request metrics."""
        request, legacy = requests
        self._tasks.discard(task)
        failed = not task.cancelled() and task.exception() is not None
        parts: Any = None
        if not failed and not task.cancelled() and not self._closing:
            try:
                response = task.result()
                services = self._services
                if charge is not None and services is not None and services.quotas.configs:
                    client_id, started_at, suspended_at = charge
                    if response is not None:
                        response = self._charge(
                            spec, request, response, client_id, started_at, suspended_at
                        )
                parts = self._encode(spec, info, correlation_id, response, request, legacy)
            except Exception:
                log.exception("%s response encoding failed", spec.name)
                failed = True
        metrics = self.owner.metrics
        if metrics is not None:
            version, started, request_bytes = timing
            seconds = time.perf_counter() - started
            if failed:
                metrics.request_failed(spec.key, version, seconds, request_bytes, _HANDLER_ERROR)
            else:
                metrics.request_done(spec.key, version, seconds, request_bytes)
        if self._closing:
            return
        if failed:
            exc = task.exception()
            if exc is not None:
                log.error("%s handler failed", spec.name, exc_info=exc)
            parts = self._error(spec, info, correlation_id, request, legacy)
        out: list[Any] = []
        if self._responses.fill(slot, parts, out):
            self.abort("handler failed without an error response")
            return
        if out:
            self._write(out)

    def _charge(
        self,
        spec: ApiSpec[Any, Any],
        request: Any,
        response: Any,
        client_id: str | None,
        started: float,
        until: float | None = None,
    ) -> Any:
        """Charge the request's handler time (from ``started`` to ``until``, default now) to
        its client's ``request_percentage`` (KIP-124, broker/request_quota.py): over the
        quota, the connection is muted and the response carries the throttle time."""
        auth = self._auth
        if is_exempt(spec.key, request) or (auth is not None and not auth.authenticated):
            return response  # (a SASL exchange is not a client's request: Kafka's neither)
        services = self._services
        assert services is not None
        seconds = (time.perf_counter() if until is None else until) - started
        ms = services.quotas.record_request_time(
            self.principal.name, client_id, seconds, services.clock
        )
        if ms <= 0:
            return response
        self.mute(ms)
        if spec.key == fetch_api.API.key:  # Kafka: a consumer's Fetch over it gets no partition
            return fetch_api.throttled_response(request, ms)
        version = int(getattr(request, "__version__", 0))
        return with_throttle_time(spec.key, version, response, ms)

    def _refused(self, api_key: int, error: str) -> None:
        metrics = self.owner.metrics
        if metrics is not None and api_key in self.registry:
            metrics.request_refused(api_key, error)

    def _emit(self, out: list[Any], parts: Any) -> None:
        if self._responses.add(parts, out):
            if out:
                self._write(out)
                out.clear()
            self.abort("handler failed without an error response")

    def _encode(
        self,
        spec: ApiSpec[Any, Any],
        info: RequestCodec,
        correlation_id: int,
        response: Any,
        request: object,
        legacy: LegacyRequest | None = None,
    ) -> list[Any] | None:
        if response is None:
            return None
        header = encode_response_header(correlation_id, info.response_header_version)
        if legacy is not None:
            codec = legacy_codec(legacy.api_key, legacy.version)
            assert codec is not None
            parts, size = codec.encode_response(response, legacy, records_source_of=records_source)
            return [_I32.pack(len(header) + size) + header, *parts]
        if isinstance(response, EncodedResponse):
            return [_I32.pack(len(header) + response.size) + header, *response.parts]
        body = encode_body(response)
        return [_I32.pack(len(header) + len(body)) + header + body]

    def _error(
        self,
        spec: ApiSpec[Any, Any],
        info: RequestCodec,
        correlation_id: int,
        request: object,
        legacy: LegacyRequest | None = None,
    ) -> Any:
        make_error = spec.error_response
        if make_error is not None:
            try:
                response = make_error(request, ErrorCode.unknown_server_error)
                parts = self._encode(spec, info, correlation_id, response, request, legacy)
                if parts is not None:
                    return parts
            except Exception:
                log.exception("%s error response failed", spec.name)
        return CLOSE

    # writing -----------------------------------------------------------------------------

    def _write(self, parts: list[Any]) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        if self._backlog is not None:  # behind a stopped down-conversion stream
            self._backlog.extend(parts)
            return
        chunk: list[Any] = []
        for i, part in enumerate(parts):
            if isinstance(part, (bytes, bytearray, memoryview)):
                chunk.append(part)
                continue
            if isinstance(part, LazyDownConversion):
                part = part.chunks()
            if hasattr(part, "__next__"):  # a down-conversion stream: convert as we drain
                if chunk:
                    transport.writelines(chunk)
                    chunk = []
                if not self._stream(part):
                    self._backlog = deque([part, *parts[i + 1 :]])
                    return
                continue
            # a FileRegion
            length = part.length
            if length == 0:
                continue
            if USE_SENDFILE and length >= SENDFILE_MIN and self._sock_fd >= 0:
                if chunk:
                    transport.writelines(chunk)
                    chunk = []
                if transport.get_write_buffer_size() == 0:
                    sent = self._sendfile(part.fd, part.position, length)
                    if sent < length:
                        chunk.append(os.pread(part.fd, length - sent, part.position + sent))
                    continue
            chunk.append(part.read())
        if chunk:
            transport.writelines(chunk)

    def _stream(self, pieces: Any) -> bool:
        """Write converted chunks until the stream ends (True) or the transport pauses us
        (False: the rest of ``pieces`` waits for resume_writing)."""
        transport = self.transport
        assert transport is not None
        for piece in pieces:
            transport.write(piece)
            if self._paused or self._closing:
                return False
        return True

    def _sendfile(self, fd: int, position: int, length: int) -> int:
        sent = 0
        while sent < length:
            try:
                n = os.sendfile(self._sock_fd, fd, position + sent, length - sent)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                if exc.errno == errno.EINTR:
                    continue
                break
            if n == 0:
                break
            sent += n
        return sent


async def _finish(coro: Any, yielded: Any) -> Any:
    """Continue a handler coroutine that suspended on ``yielded`` (as a Task would)."""
    try:
        while True:
            if yielded is None:
                await asyncio.sleep(0)
            else:
                yielded._asyncio_future_blocking = False
                await asyncio.wait((yielded,))
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                return stop.value
    except BaseException:
        coro.close()
        raise
