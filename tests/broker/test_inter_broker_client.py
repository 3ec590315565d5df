"""InterBrokerClient against a real asyncio server on 127.0.0.1 written here: version
negotiation, timeouts, reconnect with backoff, a broker going away mid-request, pipelining,
connections per (broker, purpose), the failure type and the metrics hooks."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import struct
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from odradek.broker.inter_broker_client import (
    InterBrokerClient,
    InterBrokerClientConfig,
    InterBrokerCounters,
    InterBrokerRequestError,
    Node,
)
from odradek.protocol import inter_broker as ib
from odradek.protocol.errors import FrameTooLargeError, UnsupportedVersionError
from odradek.protocol.headers import RequestHeaderInfo, parse_request_header
from odradek.protocol.messages import encode_response, make_entity

_SIZE = struct.Struct(">i")
TOPIC_ID = uuid.UUID(int=7)

# what the peer answers a request with: a response frame (size prefix included), None to
# stay silent, or "close" to close the connection without answering
Behaviour = Callable[[RequestHeaderInfo, bytes], Awaitable[bytes | str | None]]


def lai_request(epoch: int = 1) -> ib.LeaderAndIsrRequest:
    state = ib.LeaderAndIsrPartitionState("t", 0, epoch, 2, 1, (2,), 3, (2,))
    return ib.LeaderAndIsrRequest(1, epoch, 55, (state,), (), {"t": TOPIC_ID})


def api_versions_frame(
    correlation_id: int, version: int, ranges: dict[int, tuple[int, int]]
) -> bytes:
    module = importlib.import_module(f"kio.schema.api_versions.v{version}.response")
    keys = tuple(
        make_entity(module.ApiVersion, api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(ranges.items())
    )
    response = make_entity(
        module.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
    return encode_response(response, correlation_id, api_key=18, api_version=version)


def unsupported_api_versions_frame(
    correlation_id: int, ranges: dict[int, tuple[int, int]]
) -> bytes:
    """The v0-format UNSUPPORTED_VERSION answer a broker gives an ApiVersions it does not know."""
    body = struct.pack(">hi", 35, len(ranges)) + b"".join(
        struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in sorted(ranges.items())
    )
    return _SIZE.pack(4 + len(body)) + _SIZE.pack(correlation_id) + body


def lai_answer(header: RequestHeaderInfo, body: bytes) -> bytes:
    req = ib.decode_leader_and_isr_request(body, header.api_version)
    errors = tuple(
        ib.LeaderAndIsrPartitionError(s.topic_name, s.partition_index, 0)
        for s in req.partition_states
    )
    out = ib.encode_response_frame(
        ib.encode_leader_and_isr_response(
            ib.LeaderAndIsrResponse(0, errors), req.topic_ids, header.api_version
        ),
        header.correlation_id,
    )
    return _SIZE.pack(len(out)) + out


async def answer_lai(header: RequestHeaderInfo, body: bytes) -> bytes | str | None:
    return lai_answer(header, body)


class Peer:
    """A broker stand-in: answers ApiVersions from ``ranges`` (``api_versions_max``: the
    highest ApiVersions version it knows), every other request with ``behaviour``."""

    def __init__(
        self,
        behaviour: Behaviour = answer_lai,
        ranges: dict[int, tuple[int, int]] | None = None,
        api_versions_max: int = 3,
    ) -> None:
        self.behaviour = behaviour
        self.ranges = ranges if ranges is not None else {4: (0, 7), 18: (0, 3)}
        self.api_versions_max = api_versions_max
        self.requests: list[RequestHeaderInfo] = []
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> Peer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    @property
    def node(self) -> Node:
        return Node(2, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, pos = parse_request_header(frame)
                self.requests.append(header)
                if header.api_key == 18:
                    if header.api_version > self.api_versions_max:
                        out: bytes | str | None = unsupported_api_versions_frame(
                            header.correlation_id, {18: (0, self.api_versions_max)}
                        )
                    else:
                        out = api_versions_frame(
                            header.correlation_id, header.api_version, self.ranges
                        )
                else:
                    out = await self.behaviour(header, frame[pos:])
                if out == "close":
                    return
                if isinstance(out, bytes):
                    writer.write(out)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def of(self, api_key: int) -> list[RequestHeaderInfo]:
        return [h for h in self.requests if h.api_key == api_key]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def client() -> Any:
    c = InterBrokerClient(1, config=InterBrokerClientConfig(request_timeout_ms=5000))
    yield c
    await c.close()


async def test_negotiates_the_highest_common_version(client: InterBrokerClient) -> None:
    peer = await Peer(ranges={4: (0, 6), 18: (0, 3)}).start()
    try:
        answer = await client.send(peer.node, "controller", lai_request())
        assert answer == ib.LeaderAndIsrResponse(0, (ib.LeaderAndIsrPartitionError("t", 0, 0),))
        assert [(h.api_key, h.api_version) for h in peer.requests] == [(18, 3), (4, 6)]
        assert peer.requests[1].client_id == "broker-1-controller"
        # a second request reuses the connection and the negotiated versions
        await client.send(peer.node, "controller", lai_request(2))
        assert peer.connections == 1 and len(peer.of(18)) == 1
    finally:
        await peer.close()


async def test_api_versions_falls_back_when_the_peer_does_not_know_v3(
    client: InterBrokerClient,
) -> None:
    peer = await Peer(api_versions_max=1).start()
    try:
        await client.send(peer.node, "controller", lai_request())
        assert [(h.api_key, h.api_version) for h in peer.requests] == [(18, 3), (18, 1), (4, 7)]
    finally:
        await peer.close()


async def test_no_common_version_fails_with_the_broker_and_the_cause(
    client: InterBrokerClient,
) -> None:
    peer = await Peer(ranges={4: (0, 5), 18: (0, 3)}).start()
    try:
        with pytest.raises(InterBrokerRequestError) as info:
            await client.send(peer.node, "controller", lai_request())
        err = info.value
        assert (err.broker_id, err.purpose, err.api) == (2, "controller", "LeaderAndIsr")
        assert isinstance(err.cause, UnsupportedVersionError) and err.__cause__ is err.cause
        assert peer.of(4) == []  # nothing was sent at a version the peer does not speak
    finally:
        await peer.close()


async def test_a_late_answer_times_out_and_drops_the_connection(client: InterBrokerClient) -> None:
    answered = 0

    async def silent_once(header: RequestHeaderInfo, body: bytes) -> bytes | str | None:
        nonlocal answered
        answered += 1
        return None if answered == 1 else lai_answer(header, body)

    peer = await Peer(silent_once).start()
    try:
        started = time.monotonic()
        with pytest.raises(InterBrokerRequestError) as info:
            await client.send(peer.node, "controller", lai_request(), timeout_ms=200)
        assert isinstance(info.value.cause, TimeoutError)
        assert 0.19 <= time.monotonic() - started < 3.0
        assert list(client.connections()) == []
        # the next request opens a new connection (no backoff: the connection had opened)
        await client.send(peer.node, "controller", lai_request())
        assert peer.connections == 2
        counters = client.metrics
        assert isinstance(counters, InterBrokerCounters)
        assert counters.requests[(2, "controller")] == 2
        assert counters.errors[(2, "controller")] == 1
        assert counters.reconnects[(2, "controller")] == 1
    finally:
        await peer.close()


async def test_a_broker_going_away_mid_request_fails_every_request_on_the_connection(
    client: InterBrokerClient,
) -> None:
    arrived = asyncio.Event()
    seen = 0

    async def close_on_second(header: RequestHeaderInfo, body: bytes) -> bytes | str | None:
        nonlocal seen
        seen += 1
        if seen == 1:
            return None  # held: the broker dies before answering it
        arrived.set()
        return "close"

    peer = await Peer(close_on_second).start()
    try:
        first = asyncio.ensure_future(client.send(peer.node, "controller", lai_request(1)))
        second = asyncio.ensure_future(client.send(peer.node, "controller", lai_request(2)))
        await asyncio.wait_for(arrived.wait(), 5)
        started = time.monotonic()
        for fut in (first, second):
            with pytest.raises(InterBrokerRequestError) as info:
                await fut
            assert isinstance(info.value.cause, EOFError)
        assert time.monotonic() - started < 2.0  # at once, not after the 5 s timeout
    finally:
        await peer.close()


async def test_reconnects_with_exponential_backoff() -> None:
    probe = await Peer().start()
    port = probe.port
    await probe.close()  # nothing listens on the port now
    config = InterBrokerClientConfig(
        request_timeout_ms=5000, reconnect_backoff_ms=100, reconnect_backoff_max_ms=250
    )
    client = InterBrokerClient(1, config=config)
    node = Node(2, "127.0.0.1", port)
    try:
        times = []
        for _ in range(4):
            started = time.monotonic()
            with pytest.raises(InterBrokerRequestError) as info:
                await client.send(node, "fetcher-0", lai_request())
            assert isinstance(info.value.cause, ConnectionRefusedError)
            times.append(time.monotonic() - started)
        # the first attempt is at once; then 100, 200, 250 (the maximum) ms after each failure
        assert times[1] >= 0.09 and times[2] >= 0.19 and times[3] >= 0.24
        peer = await Peer().start(port)
        try:
            await client.send(node, "fetcher-0", lai_request())
            counters = client.metrics
            assert isinstance(counters, InterBrokerCounters)
            assert counters.errors[(2, "fetcher-0")] == 4
            # an open connection resets the backoff: a new failure waits the base again
            await peer.close()
            client.close_connection(2)
            with pytest.raises(InterBrokerRequestError):
                await client.send(node, "fetcher-0", lai_request())
        finally:
            await peer.close()
    finally:
        await client.close()


async def test_one_connection_per_broker_and_purpose(client: InterBrokerClient) -> None:
    peer = await Peer().start()
    try:
        await client.send(peer.node, "controller", lai_request(), client_id="controller-1")
        await client.send(peer.node, "fetcher-0", lai_request())
        await client.send(peer.node, "controller", lai_request())
        assert peer.connections == 2
        assert sorted(client.connections()) == [(2, "controller"), (2, "fetcher-0")]
        assert {h.client_id for h in peer.of(4)} == {"controller-1", "broker-1-fetcher-0"}
        client.close_connection(2, "fetcher-0")
        assert list(client.connections()) == [(2, "controller")]
    finally:
        await peer.close()


async def test_pipelined_requests_get_their_own_answers_in_order(client: InterBrokerClient) -> None:
    peer = await Peer().start()
    try:
        answers = await asyncio.gather(
            *(client.send(peer.node, "txn", lai_request(e)) for e in range(1, 6))
        )
        assert len(answers) == 5 and peer.connections == 1
        ids = [h.correlation_id for h in peer.of(4)]
        assert ids == sorted(ids) and len(set(ids)) == 5
    finally:
        await peer.close()


async def test_a_moved_broker_is_reached_at_its_new_address(client: InterBrokerClient) -> None:
    old, new = await Peer().start(), await Peer().start()
    try:
        await client.send(old.node, "txn", lai_request())
        await client.send(new.node, "txn", lai_request())
        assert (old.connections, new.connections) == (1, 1)
        assert len(list(client.connections())) == 1
    finally:
        await old.close()
        await new.close()


async def test_an_answer_larger_than_the_bound_drops_the_connection(
    client: InterBrokerClient,
) -> None:
    peer = await Peer().start()
    try:
        with pytest.raises(InterBrokerRequestError) as info:
            await client.send(peer.node, "fetcher-0", lai_request(), max_response_bytes=8)
        assert isinstance(info.value.cause, FrameTooLargeError)
        assert list(client.connections()) == []
    finally:
        await peer.close()


async def test_a_wrong_correlation_id_drops_the_connection(client: InterBrokerClient) -> None:
    async def wrong_id(header: RequestHeaderInfo, body: bytes) -> bytes | str | None:
        return lai_answer(header._replace(correlation_id=header.correlation_id + 5), body)

    peer = await Peer(wrong_id).start()
    try:
        with pytest.raises(InterBrokerRequestError) as info:
            await client.send(peer.node, "controller", lai_request())
        assert "correlation id" in str(info.value.cause)
    finally:
        await peer.close()


async def test_a_closed_client_fails_requests_at_once() -> None:
    peer = await Peer().start()
    client = InterBrokerClient(1)
    try:
        await client.send(peer.node, "controller", lai_request())
        await client.close()
        with pytest.raises(InterBrokerRequestError):
            await client.send(peer.node, "controller", lai_request())
    finally:
        await peer.close()


async def test_a_send_started_outside_a_task_works(client: InterBrokerClient) -> None:
    """Request handlers start outside a task (the connection drives them with ``coro.send``
    and wraps only a suspended one): a send from there must not need a current task."""
    peer = await Peer().start()
    loop = asyncio.get_running_loop()
    result: asyncio.Future[Any] = loop.create_future()
    tasks: list[asyncio.Task[None]] = []

    async def finish(coro: Any, yielded: Any) -> None:  # as the connection continues one
        try:
            while True:
                yielded._asyncio_future_blocking = False
                await asyncio.wait((yielded,))
                try:
                    yielded = coro.send(None)
                except StopIteration as stop:
                    result.set_result(stop.value)
                    return
        except BaseException as exc:
            result.set_exception(exc)

    def handler_step() -> None:
        assert asyncio.current_task() is None
        coro = client.send(peer.node, "txn", lai_request())
        try:
            yielded = coro.send(None)
        except BaseException as exc:
            result.set_exception(exc)
            return
        tasks.append(loop.create_task(finish(coro, yielded)))

    try:
        loop.call_soon(handler_step)
        answer = await asyncio.wait_for(result, 5)
        assert answer.error_code == 0
    finally:
        await peer.close()
