"""``InterBrokerClient``: the one asyncio client a broker uses to talk to the other brokers
(Kafka's ``NetworkClient`` with the shape of ``InterBrokerSendThread`` /
``BrokerToControllerChannelManager``). The replica fetchers, the controller's channel,
transaction markers, produce-time transaction verification and the requests to the
controller (AlterPartition, ControlledShutdown) all go through it; TLS and SASL between brokers
go into its :class:`ConnectionFactory`.

**Connections.** One connection per (broker id, purpose): a purpose is a short name
(``fetcher-0``, ``controller``, ``txn``, ``to-controller``) so that a long Fetch does not
hold up a LeaderAndIsr. Its client id is ``broker-<own id>-<purpose>`` unless the first
:meth:`~InterBrokerClient.send` names one. A connection opens on the first request
(``ConnectionFactory.connect``, then ApiVersions), and is dropped when a request on it fails
or times out, when the peer closes it, when a request names another address for the same
broker (it moved) and on :meth:`~InterBrokerClient.close_connection`. The next request opens a
new one.

**Versions.** Every new connection asks ApiVersions (v3; a peer that does not know it answers
UNSUPPORTED_VERSION and is asked again at the highest version both know); each request is
then sent at the highest version both this broker and the peer speak
(``protocol.network_client.NodeApiVersions``). No common version: the request fails with
:class:`InterBrokerRequestError` whose cause is ``UnsupportedVersionError``.

**Wire.** Kafka framing (int32 size + frame), request header v1/v2 (v2 when the version is
flexible), correlation ids 1, 2, ... per connection; answers must come back in request order.
Several requests may be in flight on one connection (each caller awaits its own answer);
callers that need one-at-a-time order (the controller's channel) await each answer before
sending the next. A response frame larger than the request's ``max_response_bytes`` (default
``InterBrokerClientConfig.max_response_bytes``) drops the connection.

**Timeouts.** ``send(..., timeout_ms)`` bounds everything the request needs: waiting out a
reconnect backoff, connecting, ApiVersions, writing and the answer. Default:
``InterBrokerClientConfig.request_timeout_ms``. A timed-out request drops its connection (a
late answer would otherwise be read as the next one's), failing the other requests on it.

**Reconnects.** A connection attempt that fails makes the next attempt to that (broker,
purpose) wait ``reconnect_backoff_ms * 2**(failures - 1)``, at most
``reconnect_backoff_max_ms``, counted from the failed attempt (Kafka's
``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``, 50 ms / 1 s); a connection that
opens resets it. A connection that breaks after it opened is opened again at once. The client
never re-sends a request by itself: whether a request may be sent again is its caller's
decision (the controller's channel does, the fetcher asks again next round).

**Failures.** Every failure of :meth:`~InterBrokerClient.send` is an
:class:`InterBrokerRequestError` naming the broker, the purpose and the API, with the cause
(``OSError`` / ``ConnectionError`` / ``EOFError``, ``TimeoutError``, a
``protocol.errors.ProtocolError``) as ``.cause`` and ``__cause__``. Cancellation is not a
failure: a cancelled ``send`` raises ``CancelledError`` and leaves the connection up (its
answer is read and dropped).

**Metrics.** An injected :class:`InterBrokerMetrics` is told of every request sent, every
failure and every reconnection; :class:`InterBrokerCounters` (the default) counts them per
(broker id, purpose) for whoever wants to export them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.clock import Clock, SystemClock
from odradek.protocol.errors import FrameTooLargeError, ProtocolError
from odradek.protocol.framing import DEFAULT_MAX_FRAME_SIZE
from odradek.protocol.network_client import (
    API_VERSIONS_VERSION,
    InFlightRequests,
    InterBrokerRequestError,
    Node,
    NodeApiVersions,
    OutboundRequest,
    api_versions_request,
    outbound_request,
    read_api_versions,
)

__all__ = [
    "ConnectionFactory",
    "InterBrokerClient",
    "InterBrokerClientConfig",
    "InterBrokerCounters",
    "InterBrokerMetrics",
    "InterBrokerRequestError",
    "Node",
    "PlaintextConnectionFactory",
    "SecureConnectionFactory",
]

log = logging.getLogger("odradek.inter_broker")

_SIZE_BYTES = 4


@dataclass(frozen=True, slots=True)
class InterBrokerClientConfig:
    """Timeouts and limits (Kafka's names for the client settings, in ms)."""

    request_timeout_ms: int = 30_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    max_response_bytes: int = DEFAULT_MAX_FRAME_SIZE


class InterBrokerMetrics(Protocol):
    """Hooks for the client's metrics (called on the event loop; must not block or raise)."""

    def request_sent(self, broker_id: int, purpose: str, api_key: int) -> None: ...

    def request_failed(
        self, broker_id: int, purpose: str, api_key: int, cause: BaseException
    ) -> None: ...

    def reconnected(self, broker_id: int, purpose: str) -> None: ...


class InterBrokerCounters:
    """The default :class:`InterBrokerMetrics`: counts per (broker id, purpose)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[int, str], int] = {}
        self.errors: dict[tuple[int, str], int] = {}
        self.reconnects: dict[tuple[int, str], int] = {}

    def request_sent(self, broker_id: int, purpose: str, api_key: int) -> None:
        key = (broker_id, purpose)
        self.requests[key] = self.requests.get(key, 0) + 1

    def request_failed(
        self, broker_id: int, purpose: str, api_key: int, cause: BaseException
    ) -> None:
        key = (broker_id, purpose)
        self.errors[key] = self.errors.get(key, 0) + 1

    def reconnected(self, broker_id: int, purpose: str) -> None:
        key = (broker_id, purpose)
        self.reconnects[key] = self.reconnects.get(key, 0) + 1


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class ConnectionFactory(Protocol):
    """Opens the byte stream to a broker: the seam for TLS and SASL between brokers
    (``security.inter.broker.protocol``). ``connect`` returns a stream ready for Kafka
    requests: a TLS factory wraps the socket (``ssl=`` of ``asyncio.open_connection``), a SASL
    one also runs SaslHandshake/SaslAuthenticate on it before returning; ApiVersions and
    everything after are the client's. Errors: ``OSError`` (``TimeoutError`` past
    ``timeout_s``)."""

    security_protocol: str

    async def connect(self, node: Node, timeout_s: float) -> Streams: ...


class PlaintextConnectionFactory:
    """PLAINTEXT: a TCP connection with TCP_NODELAY (asyncio's default)."""

    security_protocol = "PLAINTEXT"

    async def connect(self, node: Node, timeout_s: float) -> Streams:
        async with asyncio.timeout(timeout_s):
            return await asyncio.open_connection(node.host, node.port)


class SecureConnectionFactory:
    """SSL, SASL_PLAINTEXT or SASL_SSL to the other brokers (Kafka's inter-broker channel).

    TLS: ``ssl_context`` (``security.tls.client_context`` from the inter-broker listener's
    ``ssl.*``: its trust store verifies the peer, its key store is presented as the client
    certificate). SASL: SaslHandshake v1 with ``mechanism`` and SaslAuthenticate v1 tokens from
    ``security.sasl_client.SaslClient`` (PLAIN, SCRAM-SHA-256/512; SCRAM's server signature
    is verified) before the stream is handed over. A refused authentication is an
    ``OSError`` (``ConnectionRefusedError``) naming the broker and the server's message."""

    def __init__(
        self,
        security_protocol: str,
        ssl_context: Any = None,
        mechanism: str | None = None,
        username: str = "",
        password: str = "",
        client_id: str = "broker",
    ) -> None:
        self.security_protocol = security_protocol
        self.ssl_context = ssl_context
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.client_id = client_id

    async def connect(self, node: Node, timeout_s: float) -> Streams:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(
                node.host,
                node.port,
                ssl=self.ssl_context,
                server_hostname=node.host if self.ssl_context is not None else None,
            )
            if self.mechanism is None:
                return reader, writer
            try:
                await self._authenticate(node, reader, writer)
            except BaseException:
                writer.close()
                raise
            return reader, writer

    async def _authenticate(
        self, node: Node, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        from odradek.security import sasl_client as sc

        assert self.mechanism is not None
        client = sc.SaslClient(self.mechanism, self.username, self.password)

        async def call(api_key: int, correlation_id: int, body: bytes) -> bytes:
            writer.write(sc.encode_request(api_key, 1, correlation_id, self.client_id, body))
            await writer.drain()
            size = int.from_bytes(await reader.readexactly(_SIZE_BYTES), "big", signed=True)
            if not 4 <= size <= 1 << 20:
                raise ConnectionError(f"broker {node.id}: bad SASL answer size {size}")
            frame = await reader.readexactly(size)
            if int.from_bytes(frame[:4], "big", signed=True) != correlation_id:
                raise ConnectionError(f"broker {node.id}: SASL answer out of order")
            return frame[4:]

        error, mechanisms = sc.decode_handshake(
            await call(17, 1, sc.handshake_body(self.mechanism))
        )
        if error:
            raise ConnectionRefusedError(
                f"broker {node.id} does not serve SASL mechanism {self.mechanism} "
                f"(it serves {', '.join(mechanisms)})"
            )
        token: bytes | None = client.first()
        correlation_id = 2
        step = 0
        while token is not None:
            answer = sc.decode_authenticate(
                await call(36, correlation_id, sc.authenticate_body(token))
            )
            correlation_id += 1
            if answer.error_code:
                raise ConnectionRefusedError(
                    f"authentication to broker {node.id} failed: {answer.error_message}"
                )
            step += 1
            if self.mechanism == "PLAIN":
                token = None
            elif step == 1:
                token = client.respond(answer.auth_bytes)
            else:
                client.check_final(answer.auth_bytes)
                token = None


class _Connection:
    """One open connection: streams, requests in flight and their futures, the reader task."""

    def __init__(
        self, node: Node, purpose: str, streams: Streams, client_id: str, default_bound: int
    ) -> None:
        self.node = node
        self.purpose = purpose
        self.reader, self.writer = streams
        self.inflight = InFlightRequests(client_id)
        self.waiting: dict[int, asyncio.Future[tuple[int, memoryview]]] = {}
        self.versions: NodeApiVersions | None = None
        self.default_bound = default_bound
        self.closed = False
        self.task: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._read())

    def submit(
        self, request: OutboundRequest, version: int, max_response_bytes: int
    ) -> asyncio.Future[tuple[int, memoryview]]:
        """Write ``request`` at ``version``; a future of (version, answer body)."""
        if self.closed:
            raise ConnectionError("connection closed")
        entry, frame = self.inflight.encode(request, version, max_response_bytes)
        fut: asyncio.Future[tuple[int, memoryview]] = asyncio.get_running_loop().create_future()
        self.waiting[entry.correlation_id] = fut
        self.writer.write(frame)
        return fut

    async def _read(self) -> None:
        reader = self.reader
        try:
            while True:
                head = await reader.readexactly(_SIZE_BYTES)
                size = int.from_bytes(head, "big", signed=True)
                bound = self.inflight.next_response_bound(self.default_bound)
                if size < 0 or size > bound:
                    raise FrameTooLargeError(size, bound)
                frame = await reader.readexactly(size)
                entry, body = self.inflight.complete(frame)
                fut = self.waiting.pop(entry.correlation_id, None)
                if fut is not None and not fut.done():
                    fut.set_result((entry.api_version, body))
        except asyncio.CancelledError:
            self.fail(ConnectionError("connection closed"))
            raise
        except asyncio.IncompleteReadError:
            self.fail(EOFError("the broker closed the connection"))
        except (OSError, ProtocolError) as exc:
            self.fail(exc)
        except Exception as exc:  # a bug: still fail the waiting requests, never hang them
            log.exception("reading from broker %d (%s) failed", self.node.id, self.purpose)
            self.fail(exc)

    def fail(self, cause: BaseException) -> None:
        """Close the connection; every request waiting on it fails with ``cause``."""
        self.closed = True
        waiting, self.waiting = self.waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(cause)
        self.writer.close()

    def close(self) -> None:
        self.fail(ConnectionError("connection closed"))
        self.task.cancel()


class _Backoff:
    """Reconnect backoff of one (broker, purpose): consecutive failed attempts and when the
    next attempt may start (monotonic seconds)."""

    __slots__ = ("connected_before", "failures", "not_before")

    def __init__(self) -> None:
        self.failures = 0
        self.not_before = 0.0
        self.connected_before = False


class InterBrokerClient:
    """Requests from broker ``node_id`` to the others. See the module docstring."""

    def __init__(
        self,
        node_id: int,
        *,
        clock: Clock | None = None,
        config: InterBrokerClientConfig | None = None,
        connection_factory: ConnectionFactory | None = None,
        metrics: InterBrokerMetrics | None = None,
    ) -> None:
        self.node_id = node_id
        self.clock = clock or SystemClock()
        self.config = config or InterBrokerClientConfig()
        self.connection_factory: ConnectionFactory = (
            connection_factory or PlaintextConnectionFactory()
        )
        self.metrics: InterBrokerMetrics = metrics if metrics is not None else InterBrokerCounters()
        self._connections: dict[tuple[int, str], _Connection] = {}
        self._connecting: dict[tuple[int, str], asyncio.Lock] = {}
        self._backoff: dict[tuple[int, str], _Backoff] = {}
        self._closed = False

    # -- requests -------------------------------------------------------------------------------

    async def send(
        self,
        node: Node,
        purpose: str,
        request: Any,
        *,
        timeout_ms: int | None = None,
        client_id: str | None = None,
        max_response_bytes: int | None = None,
    ) -> Any:
        """Send ``request`` (a kio request entity, an ``inter_broker`` controller request or an
        ``OutboundRequest``) to ``node`` on the (``node.id``, ``purpose``) connection, at the
        highest version both sides speak; the decoded answer. ``client_id`` applies when this
        call opens the connection. Raises :class:`InterBrokerRequestError` (module docstring).

        May be awaited outside a task (a request handler the connection drives with
        ``coro.send``): the request then runs in a task of its own, since its timeout needs one."""
        out = outbound_request(request)
        timeout_s = (
            timeout_ms if timeout_ms is not None else self.config.request_timeout_ms
        ) / 1000
        bound = max_response_bytes or self.config.max_response_bytes
        self.metrics.request_sent(node.id, purpose, out.api_key)
        attempt = self._attempt(node, purpose, out, timeout_s, client_id, bound)
        if asyncio.current_task() is None:
            return await asyncio.ensure_future(attempt)
        return await attempt

    async def _attempt(
        self,
        node: Node,
        purpose: str,
        out: OutboundRequest,
        timeout_s: float,
        client_id: str | None,
        bound: int,
    ) -> Any:
        key = (node.id, purpose)
        try:
            async with asyncio.timeout(timeout_s):
                conn = await self._connection(node, purpose, client_id)
                assert conn.versions is not None
                version = conn.versions.latest_usable_version(
                    out.api_key, out.min_version, out.max_version
                )
                return await self._exchange(conn, out, version, bound)
        except asyncio.CancelledError:
            raise
        except (OSError, EOFError, ProtocolError) as exc:  # TimeoutError is an OSError
            if isinstance(exc, TimeoutError):
                self._drop(key, exc)
            self.metrics.request_failed(node.id, purpose, out.api_key, exc)
            raise InterBrokerRequestError(node.id, purpose, out.name, exc) from exc

    async def _exchange(
        self, conn: _Connection, out: OutboundRequest, version: int, bound: int
    ) -> Any:
        try:
            fut = conn.submit(out, version, bound)
            await conn.writer.drain()
            got_version, body = await fut
            return out.decode_body(got_version, body)
        except asyncio.CancelledError:
            raise
        except (OSError, EOFError, ProtocolError) as exc:
            self._drop((conn.node.id, conn.purpose), exc, only=conn)
            raise

    # -- connections ----------------------------------------------------------------------------

    async def _connection(self, node: Node, purpose: str, client_id: str | None) -> _Connection:
        key = (node.id, purpose)
        conn = self._connections.get(key)
        if conn is not None and not conn.closed and conn.node == node:
            return conn
        lock = self._connecting.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is not None and not conn.closed and conn.node == node:
                return conn
            if conn is not None:  # broken, or the broker moved
                self._drop(key, ConnectionError("reconnecting"), only=conn)
            return await self._open(node, purpose, client_id)

    async def _open(self, node: Node, purpose: str, client_id: str | None) -> _Connection:
        if self._closed:
            raise ConnectionError("the inter-broker client is closed")
        key = (node.id, purpose)
        backoff = self._backoff.setdefault(key, _Backoff())
        wait = backoff.not_before - self.clock.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        if backoff.connected_before:
            self.metrics.reconnected(node.id, purpose)
        conn: _Connection | None = None
        try:
            streams = await self.connection_factory.connect(
                node, self.config.request_timeout_ms / 1000
            )
            conn = _Connection(
                node,
                purpose,
                streams,
                client_id or f"broker-{self.node_id}-{purpose}",
                self.config.max_response_bytes,
            )
            conn.versions = await self._negotiate(conn)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if not isinstance(exc, asyncio.CancelledError):
                backoff.failures += 1
                cfg = self.config
                delay = min(
                    cfg.reconnect_backoff_max_ms,
                    cfg.reconnect_backoff_ms * 2 ** min(backoff.failures - 1, 30),
                )
                backoff.not_before = self.clock.monotonic() + delay / 1000
                log.debug("connection to broker %d (%s) failed: %s", node.id, purpose, exc)
            raise
        backoff.failures = 0
        backoff.not_before = 0.0
        backoff.connected_before = True
        self._connections[key] = conn
        return conn

    async def _negotiate(self, conn: _Connection) -> NodeApiVersions:
        version = API_VERSIONS_VERSION
        for _ in range(2):
            request = api_versions_request(version)
            fut = conn.submit(request, version, conn.default_bound)
            await conn.writer.drain()
            got_version, body = await fut
            answer = read_api_versions(request.decode_body(got_version, body), version)
            if isinstance(answer, NodeApiVersions):
                return answer
            version = answer
        raise ConnectionError("ApiVersions negotiation did not settle")

    def _drop(
        self, key: tuple[int, str], cause: BaseException, only: _Connection | None = None
    ) -> None:
        conn = self._connections.get(key)
        if only is not None and conn is not only:  # already replaced: close just that one
            only.close()
            return
        if conn is None:
            return
        del self._connections[key]
        conn.fail(cause)
        conn.task.cancel()

    def close_connection(self, broker_id: int, purpose: str | None = None) -> None:
        """Close the connection of (``broker_id``, ``purpose``), or all of ``broker_id``'s;
        requests on them fail. The next request opens a new one without backoff."""
        for key in [k for k in self._connections if k[0] == broker_id and purpose in (None, k[1])]:
            self._drop(key, ConnectionError("connection closed"))
            self._backoff.pop(key, None)

    def connections(self) -> Iterator[tuple[int, str]]:
        """The (broker id, purpose) of every open connection."""
        return iter([k for k, c in self._connections.items() if not c.closed])

    async def close(self) -> None:
        """Close every connection (their requests fail); later requests fail at once."""
        self._closed = True
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await conn.task
