"""One asyncio connection to one broker: pipelined requests matched by correlation id.

``BrokerConnection.open`` connects and negotiates API versions (ApiVersions v3, falling back
to v0 when the broker answers UNSUPPORTED_VERSION). ``request(entity)`` sends a kio request and
awaits its decoded response; any number of requests may be in flight; responses are matched by
correlation id (Kafka answers in order per connection, but matching does not rely on it).
When the connection drops, every pending request fails with ``KafkaConnectionError``.

With ``security`` (``_security.ClientSecurity``, None for PLAINTEXT) the socket is TLS-wrapped
by asyncio (the handshake is part of ``open``'s connect timeout) and, after ApiVersions, SASL
authenticates before ``open`` returns; a TLS handshake that fails (the broker's certificate,
or the broker refusing ours) raises ``SslAuthenticationError``, a refused SASL exchange
``SaslAuthenticationError``. Nothing changes per request: a secured connection is the same
protocol object over a TLS transport.

Re-authentication (KIP-368): when SaslAuthenticate tells a session lifetime (the broker's
``connections.max.reauth.ms``, or an OAUTHBEARER token's expiry), the connection authenticates
again on the same socket at 85-95 % of it: new requests are held (written later, in order,
with the correlation ids they were given), the requests already written are answered, then
SaslHandshake and SaslAuthenticate run again, then the held requests go out. The broker closes
a connection whose session expired at its next request, so a lost race costs a reconnect,
which authenticates anew. While nothing is held, ``send_frame`` costs one comparison more.
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from odradek.protocol.framing import FrameDecoder

from . import _protocol as proto
from .errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SslAuthenticationError,
    UnsupportedVersionError,
)

if TYPE_CHECKING:
    from ._security import ClientSecurity

__all__ = ["BrokerConnection"]

_SIZE = struct.Struct(">i")


class BrokerConnection(asyncio.Protocol):
    def __init__(self, node_id: int, host: str, port: int, client_id: str, request_timeout_ms: int) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.transport: asyncio.Transport | None = None
        self.versions: dict[int, int] = {}  # api_key -> negotiated version
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._frames = FrameDecoder(max_frame_size=0x7FFFFFFF)  # the broker's size is trusted
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any], bool]] = {}
        self._next_corr = 1
        self._closed_exc: Exception | None = None
        self._paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        # KIP-368: frames held while re-authenticating (None: not re-authenticating)
        self._held: list[Sequence[bytes | memoryview]] | None = None
        self._security: ClientSecurity | None = None
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._opened = False  # open() returned: a TLS error is no longer about authentication

    # -- connection lifecycle ---------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        node_id: int,
        host: str,
        port: int,
        *,
        client_id: str = "odradek",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        security: ClientSecurity | None = None,
    ) -> BrokerConnection:
        loop = asyncio.get_running_loop()
        conn = cls(node_id, host, port, client_id, request_timeout_ms)
        context = security.ssl_context if security is not None else None
        try:
            if context is None:
                connect = loop.create_connection(lambda: conn, host, port)
            else:
                connect = loop.create_connection(
                    lambda: conn, host, port, ssl=context, server_hostname=host,
                    ssl_handshake_timeout=connect_timeout_ms / 1000,
                )
            await asyncio.wait_for(connect, connect_timeout_ms / 1000)
        except ssl.SSLError as exc:
            raise SslAuthenticationError(f"TLS handshake with {host}:{port} failed: {exc}") from exc
        except (TimeoutError, OSError) as exc:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        try:
            try:
                await conn._negotiate()
            except KafkaConnectionError as exc:
                if context is None:
                    raise
                # closed before answering ApiVersions, right after the handshake: with TLS 1.3
                # this is how a broker refuses our certificate (or its absence)
                raise SslAuthenticationError(
                    f"{host}:{port} closed the connection after the TLS handshake ({exc}): "
                    "does the broker require a client certificate (ssl.keystore.*) it trusts?"
                ) from exc
            if security is not None:
                lifetime_ms = await security.authenticate(conn)
                conn._security = security
                conn._schedule_reauthentication(lifetime_ms)
        except BaseException:
            conn.close()
            raise
        conn._opened = True
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def connection_lost(self, exc: Exception | None) -> None:
        if isinstance(exc, ssl.SSLError) and not self._opened:  # e.g. TLS 1.3's refusal of our certificate
            self._fail_all(SslAuthenticationError(f"TLS with {self.host}:{self.port} failed: {exc}"))
        else:
            self._fail_all(KafkaConnectionError(f"connection to {self.host}:{self.port} lost: {exc or 'closed'}"))
        self.transport = None

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def drain(self) -> None:
        if self._paused and self.transport is not None:
            fut = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(fut)
            await fut

    @property
    def connected(self) -> bool:
        return self.transport is not None and self._closed_exc is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        self._fail_all(KafkaConnectionError("connection closed"))
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    def _fail_all(self, exc: Exception) -> None:
        if self._closed_exc is None:
            self._closed_exc = exc
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        self._held = None
        pending, self._pending = self._pending, {}
        for _k, _v, fut, _raw in pending.values():
            if not fut.done():
                fut.set_exception(exc)
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(exc)
        self._drain_waiters = []

    # -- framing ----------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        pending = self._pending
        for frame in self._frames.feed(data):
            (corr,) = _SIZE.unpack_from(frame, 0)
            entry = pending.pop(corr, None)
            if entry is None:
                continue  # late answer to a timed-out request
            api_key, version, fut, raw = entry
            if fut.done():
                continue
            if raw:
                fut.set_result(bytes(frame))
                continue
            try:
                fut.set_result(proto.decode_response(api_key, version, frame, header=True))
            except Exception as exc:  # malformed response
                fut.set_exception(exc)

    # -- requests ---------------------------------------------------------------------------
    def version(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
        except KeyError:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} supports no version of API {api_key} this client speaks"
            ) from None

    def _corr(self) -> int:
        c = self._next_corr
        self._next_corr = c + 1 if c < 0x7FFFFFFF else 1
        return c

    def _check(self) -> asyncio.Transport:
        if self._closed_exc is not None or self.transport is None:
            raise self._closed_exc or KafkaConnectionError("not connected")
        return self.transport

    def send_frame(
        self, api_key: int, version: int, parts: Sequence[bytes | memoryview], corr: int, *,
        expect_response: bool = True, raw: bool = False,
    ) -> asyncio.Future[Any] | None:
        """Write an encoded frame; return a future of its response (None if no response)."""
        transport = self._check()
        fut: asyncio.Future[Any] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._pending[corr] = (api_key, version, fut, raw)
        if self._held is not None and api_key != 17 and api_key != 36:  # re-authenticating
            self._held.append(parts)
            return fut
        if len(parts) == 1:
            transport.write(parts[0])
        else:
            transport.writelines(parts)
        return fut

    # -- re-authentication (KIP-368) ---------------------------------------------------------
    def _schedule_reauthentication(self, lifetime_ms: int) -> None:
        if lifetime_ms <= 0 or self._closed_exc is not None:
            return
        delay = lifetime_ms / 1000 * random.uniform(0.85, 0.95)
        self._reauth_timer = asyncio.get_running_loop().call_later(delay, self._start_reauthentication)

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._closed_exc is not None or self.transport is None:
            return
        self._held = []
        self._reauth_task = asyncio.ensure_future(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        security = self._security
        assert security is not None
        written = [fut for _k, _v, fut, _raw in self._pending.values() if not fut.done()]
        try:
            if written:  # the broker takes only SASL requests until the exchange completes
                await asyncio.wait(written, timeout=self.request_timeout)
            lifetime_ms = await security.authenticate(self)
        except Exception as exc:
            failure = exc if isinstance(exc, KafkaError) else KafkaConnectionError(
                f"re-authentication to {self.host}:{self.port} failed: {exc}")
            self._fail_all(failure)
            if self.transport is not None:
                self.transport.close()
                self.transport = None
            return
        held, self._held = self._held or [], None
        transport = self.transport
        if transport is None:
            return
        for parts in held:
            transport.writelines(parts)
        self._schedule_reauthentication(lifetime_ms)

    def next_correlation_id(self) -> int:
        return self._corr()

    async def request(self, entity: Any, *, timeout: float | None = None) -> Any:
        """Send kio request ``entity`` and return the decoded response."""
        corr = self._corr()
        frame = proto.encode_request(entity, correlation_id=corr, client_id=self.client_id)
        fut = self.send_frame(int(entity.__api_key__), int(entity.__version__), [frame], corr)
        assert fut is not None
        return await self.wait(fut, corr, timeout)

    async def wait(self, fut: asyncio.Future[Any], corr: int, timeout: float | None = None) -> Any:
        """Await a response future, failing it with KafkaTimeoutError after ``timeout``."""
        loop = asyncio.get_running_loop()
        handle = loop.call_later(timeout or self.request_timeout, self._expire, fut, corr)
        try:
            return await fut
        finally:
            handle.cancel()
            if not fut.done() or fut.cancelled():
                self._pending.pop(corr, None)

    def _expire(self, fut: asyncio.Future[Any], corr: int) -> None:
        self._pending.pop(corr, None)
        if not fut.done():
            fut.set_exception(KafkaTimeoutError(f"request to {self.host}:{self.port} timed out"))

    async def _negotiate(self) -> None:
        mod = proto.request_module(18, 3)
        req = proto.build(mod.ApiVersionsRequest, client_software_name="odradek", client_software_version="0.1.0")
        corr = self._corr()
        fut = self.send_frame(18, 3, [proto.encode_request(req, correlation_id=corr, client_id=self.client_id)], corr, raw=True)
        assert fut is not None
        frame = await self.wait(fut, corr)
        (error,) = struct.unpack_from(">h", frame, 4)
        if error == 35:  # UNSUPPORTED_VERSION: v0-format answer, retry with a version it has
            resp = proto.decode_api_versions_fallback(frame)
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
            hi = min(ranges.get(18, (0, 0))[1], 2)
            req = proto.build(proto.request_module(18, hi).ApiVersionsRequest)
            resp = await self.request(req)
        else:
            resp = proto.decode_response(18, 3, frame, header=True)
        if resp.error_code:
            raise UnsupportedVersionError(f"ApiVersions failed with error {int(resp.error_code)}")
        for k in resp.api_keys:
            key, lo, hi = int(k.api_key), int(k.min_version), int(k.max_version)
            self.broker_versions[key] = (lo, hi)
            mine = proto.CLIENT_VERSIONS.get(key)
            if mine is None:
                continue
            v = min(hi, mine[1])
            if v >= max(lo, mine[0]):
                self.versions[key] = v
