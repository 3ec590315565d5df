"""The connection's request hook into BrokerMetrics: failed and refused requests are counted.

A real ``KafkaConnection`` on a loopback asyncio server, with an owner whose registry holds the
broker's own API specs with handlers that raise (there is no way to make a real handler fail on
purpose from the wire, which is the point of the rest of the suite).
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.wire import metadata_request, produce_request
from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.connection import KafkaConnection, Route
from odradek.broker.registry import load_registry
from odradek.metrics.broker import BrokerMetrics
from odradek.protocol.messages import decode_response, encode_request

pytestmark = pytest.mark.timeout(30)


async def raise_now(ctx: RequestContext, request: Any) -> Any:
    raise RuntimeError("handler bug (test)")


async def raise_later(ctx: RequestContext, request: Any) -> Any:
    await asyncio.sleep(0.01)  # suspends: the connection finishes it in a task
    raise RuntimeError("handler bug after a wait (test)")


class Owner:
    """The ConnectionOwner seam, with the broker's specs for Produce (which has an error
    response) and Metadata (which has none), their handlers replaced by failing ones."""

    def __init__(self) -> None:
        real = load_registry()
        self.registry: dict[int, ApiSpec] = {
            0: dataclasses.replace(real[0], handler=raise_now),
            3: dataclasses.replace(real[3], handler=raise_later),
        }
        self.metrics = BrokerMetrics({0: "Produce", 3: "Metadata"})
        self.routes: dict[tuple[int, int], Route] = {}
        self.stopping = False
        self.services: Any = object()  # the failing handlers never look at it
        self.max_request_bytes = 1 << 20

    def register(self, conn: KafkaConnection) -> int:
        return 1

    def unregister(self, connection_id: int) -> None:
        pass


@pytest.fixture
async def server() -> AsyncIterator[tuple[Owner, int]]:
    owner = Owner()
    srv = await asyncio.get_running_loop().create_server(
        lambda: KafkaConnection(owner), "127.0.0.1", 0
    )
    try:
        yield owner, srv.sockets[0].getsockname()[1]
    finally:
        srv.close()
        await srv.wait_closed()


async def call(port: int, entity: Any) -> Any | None:
    """Send one request; its decoded response, or None when the broker closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_request(entity, correlation_id=7, client_id="t"))
        await writer.drain()
        try:
            head = await asyncio.wait_for(reader.readexactly(4), 10)
        except asyncio.IncompleteReadError:
            return None
        frame = await asyncio.wait_for(reader.readexactly(struct.unpack(">i", head)[0]), 10)
        return decode_response(int(entity.__api_key__), int(entity.__version__), frame, header=True)
    finally:
        writer.close()


async def send_raw_and_wait_close(port: int, frame: bytes) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(struct.pack(">i", len(frame)) + frame)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()


async def test_a_handler_that_raises_is_answered_and_counted(server: tuple[Owner, int]) -> None:
    owner, port = server
    response = await call(port, produce_request("t", 0, b"", version=9))
    assert response is not None
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.unknown_server_error
    m = owner.metrics
    assert m.request_counts() == {("Produce", 9): 1}
    assert m.error_counts() == {("Produce", "UNKNOWN_SERVER_ERROR"): 1}
    text = "\n".join(str(s) for fam in m.collect() for s in fam.samples)
    assert "kafka_network_requestmetrics_errors_total" in text
    assert "'request': 'Produce', 'error': 'UNKNOWN_SERVER_ERROR'" in text


async def test_a_suspended_handler_that_raises_is_counted(server: tuple[Owner, int]) -> None:
    owner, port = server
    assert await call(port, metadata_request([], version=12)) is None  # no error response: closed
    m = owner.metrics
    deadline = asyncio.get_running_loop().time() + 5
    while not m.error_counts() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)  # the task's done callback runs after the close
    assert m.request_counts() == {("Metadata", 12): 1}
    assert m.error_counts() == {("Metadata", "UNKNOWN_SERVER_ERROR"): 1}


async def test_refused_requests_are_errors_not_requests(server: tuple[Owner, int]) -> None:
    owner, port = server
    # Produce v99: not served, refused before any handler
    assert await send_raw_and_wait_close(port, struct.pack(">hhih", 0, 99, 1, 0))
    # Produce v9 whose body does not decode
    assert await send_raw_and_wait_close(port, struct.pack(">hhih", 0, 9, 2, 0) + b"\xff")
    # an unknown API key is not counted at all (its label would be the client's choice)
    assert await send_raw_and_wait_close(port, struct.pack(">hhih", 999, 0, 3, 0))
    m = owner.metrics
    assert m.request_counts() == {}
    assert m.error_counts() == {
        ("Produce", "UNSUPPORTED_VERSION"): 1,
        ("Produce", "INVALID_REQUEST"): 1,
    }
