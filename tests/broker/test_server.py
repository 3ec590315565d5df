"""The embeddable Broker in-process: lifecycle, handler failures, purgatory, metadata store,
producer state."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.config import BrokerConfig
from odradek.broker.local_metadata_store import (
    FILE_NAME,
    InvalidPartitionsError,
    LocalMetadataStore,
    TopicExistsError,
    UnknownTopicError,
)
from odradek.broker.purgatory import Purgatory
from odradek.broker.server import Broker
from odradek.protocol.records import build_batch
from odradek.storage.producer_state import (
    DUPLICATE,
    INVALID_PRODUCER_EPOCH,
    OK,
    OUT_OF_ORDER,
    ProducerStateManager,
)

from .wire import Wire, create, fetch_request, produce_request, req

pytestmark = pytest.mark.timeout(60)


def _config(tmp_path: Path, **extra: str) -> BrokerConfig:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    props.update(extra)
    return BrokerConfig.from_properties(props)


async def test_embedded_broker_lifecycle(tmp_path: Path) -> None:
    broker = Broker(_config(tmp_path))
    async with broker:
        assert broker.bound_port > 0
        assert broker.metadata is not None and broker.log_manager is not None

        def client() -> int:
            with Wire(f"127.0.0.1:{broker.bound_port}") as w:
                create(w, "embedded")
                r = w.call(produce_request("embedded", 0, build_batch([(None, b"x", (), None)])))
                return int(r.responses[0].partition_responses[0].error_code)

        assert await asyncio.to_thread(client) == 0
    assert (tmp_path / "data" / FILE_NAME).exists()
    # a second broker on the same data dir sees the topic
    async with Broker(_config(tmp_path)) as again:
        handle = again.partition("embedded", 0)
        assert handle is not None and handle.log.log_end_offset == 1


async def test_handler_exception_answers_unknown_server_error_or_closes(tmp_path: Path) -> None:
    broker = Broker(_config(tmp_path, **{"storage.engine": "memory"}))
    async with broker:
        original = broker.registry[0]

        async def failing(ctx: RequestContext, request: Any) -> Any:
            raise RuntimeError("boom")

        # Produce defines error_response: the client gets UNKNOWN_SERVER_ERROR (-1)
        broker.registry[0] = dataclasses.replace(original, handler=failing)
        # ApiVersions does not: the connection is closed
        broker.registry[18] = ApiSpec(18, "ApiVersions", 0, 4, failing)

        def client() -> tuple[int, bool, bool]:
            with Wire(f"127.0.0.1:{broker.bound_port}") as w:
                r = w.call(produce_request("t", 0, build_batch([(None, b"x", (), None)])))
                code = int(r.responses[0].partition_responses[0].error_code)
                w.send(req(18, 3, client_software_name="x", client_software_version="1"))
                closed = w.is_closed_by_peer(5)
            with Wire(f"127.0.0.1:{broker.bound_port}") as w2:
                r2 = w2.call(fetch_request("t", {0: 0}))
                alive = r2 is not None
            return code, closed, alive

        assert await asyncio.to_thread(client) == (-1, True, True)


async def test_purgatory_wakes_and_expires() -> None:
    p = Purgatory()
    waiter = asyncio.ensure_future(p.wait([("t", 0), ("t", 1)], 10))
    await asyncio.sleep(0)
    assert p.watching() == 2
    p.notify("t", 1)
    assert await waiter is True
    assert p.watching() == 0
    assert await p.wait([("t", 0)], 0.01) is False
    assert p.watching() == 0
    late = asyncio.ensure_future(p.wait([("t", 0)], 10))
    await asyncio.sleep(0)
    p.close()
    assert await late is True


def _on(node: int, start: int, stop: int) -> dict[int, list[int]]:
    return {p: [node] for p in range(start, stop)}


async def test_metadata_store_persists_atomically(tmp_path: Path) -> None:
    store = LocalMetadataStore(1, tmp_path)
    t = await store.create_topic("a", _on(1, 0, 2), {"retention.ms": "5"})
    assert isinstance(t.topic_id, uuid.UUID)
    assert [(p.partition, p.leader, p.leader_epoch, p.isr) for p in t.partitions] == [
        (0, 1, 0, [1]),
        (1, 1, 0, [1]),
    ]
    with pytest.raises(TopicExistsError):
        await store.create_topic("a", _on(1, 0, 1))
    with pytest.raises(InvalidPartitionsError):
        await store.create_partitions("a", _on(1, 2, 2))
    await store.create_partitions("a", _on(1, 2, 4))
    await store.alter_topic_configs("a", {"segment.bytes": "1048576"})
    await store.create_topic("__consumer_offsets", _on(1, 0, 3), internal=True)
    data = json.loads((tmp_path / FILE_NAME).read_text())
    assert data["topics"]["a"]["topic_id"] == str(t.topic_id)
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
    again = LocalMetadataStore(1, tmp_path)
    a = again.topic("a")
    assert a is not None and a.num_partitions == 4 and a.configs == {"segment.bytes": "1048576"}
    assert a.topic_id == t.topic_id and again.topic_by_id(t.topic_id) is a
    assert again.cluster_id == store.cluster_id
    offsets = again.topic("__consumer_offsets")
    assert offsets is not None and offsets.internal
    await again.delete_topic("a")
    with pytest.raises(UnknownTopicError):
        await again.delete_topic("a")
    assert LocalMetadataStore(1, tmp_path).topic("a") is None
    mem = LocalMetadataStore(0, None)
    await mem.create_topic("m", _on(0, 0, 1))
    assert mem.topic("m") is not None


def test_producer_state_rules_and_snapshot() -> None:
    s = ProducerStateManager()
    assert s.check(7, 0, 0, 4) == (OK, -1)
    s.update(7, 0, 0, 4, 100, 104)
    assert s.check(7, 0, 0, 4) == (DUPLICATE, 100)
    assert s.check(7, 0, 6, 6)[0] == OUT_OF_ORDER
    assert s.check(7, 0, 5, 9) == (OK, -1)
    for i in range(1, 7):
        s.update(7, 0, 5 * i, 5 * i + 4, 100 + 5 * i, 104 + 5 * i)
    # only the last 5 batches are remembered
    assert s.check(7, 0, 0, 4)[0] == OUT_OF_ORDER
    assert s.check(7, 0, 30, 34) == (DUPLICATE, 130)
    assert s.check(7, 1, 0, 0) == (OK, -1)
    assert s.check(7, 1, 3, 3)[0] == OUT_OF_ORDER
    s.update(7, 1, 0, 0, 200, 200)
    assert s.check(7, 0, 35, 35)[0] == INVALID_PRODUCER_EPOCH
    restored = ProducerStateManager.from_snapshot(json.loads(json.dumps(s.snapshot())))
    assert restored.check(7, 1, 0, 0) == (DUPLICATE, 200)
    assert restored.offset == 201
    restored.truncate_before(201)
    assert len(restored) == 0
    # sequence numbers wrap at 2^31 - 1
    w = ProducerStateManager()
    w.update(1, 0, 2**31 - 2, 2**31 - 1, 0, 1)
    assert w.check(1, 0, 0, 3) == (OK, -1)


async def test_failed_start_releases_the_data_dir(tmp_path: Path) -> None:
    async with Broker(_config(tmp_path)) as first:
        port = first.bound_port
        clash = Broker(
            BrokerConfig.from_properties(
                {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "other")}
            )
        )
        with pytest.raises(OSError):
            await clash.start()
    # the failed broker released its log dir lock: a new broker can use it
    async with Broker(_config(tmp_path, **{"log.dirs": str(tmp_path / "other")})) as again:
        assert again.bound_port > 0


async def test_stop_closes_a_connection_whose_client_stopped_reading(tmp_path: Path) -> None:
    """stop() aborts connections: a client that never reads its responses must not keep its
    socket open waiting for the broker's write buffer to drain."""
    import socket

    from odradek.protocol.messages import encode_request

    broker = Broker(_config(tmp_path, **{"storage.engine": "memory"}))
    await broker.start()
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    frame = encode_request(ApiVersionsRequest(), correlation_id=1, client_id="slow")
    sock = socket.create_connection(("127.0.0.1", broker.bound_port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        # pipeline requests without reading any answer until the broker stops reading us
        for sent in range(1, 200_001):  # bounded
            try:
                sock.send(frame)
            except BlockingIOError:
                break
            if sent % 256 == 0:
                await asyncio.sleep(0)  # let the broker answer into its write buffer
        conns = broker.listener.connections()
        assert conns and any(c.transport.get_write_buffer_size() > 0 for c in conns)
        await asyncio.wait_for(broker.stop(), 5)
        for _ in range(10):  # connection_lost runs a few loop turns after abort()
            await asyncio.sleep(0)
        for c in conns:
            raw = c.transport.get_extra_info("socket")
            assert raw is None or raw.fileno() == -1, "socket still open after stop()"
    finally:
        sock.close()


async def test_a_connection_accepted_after_stop_is_aborted(tmp_path: Path) -> None:
    """A connection whose connection_made runs after stop() began is refused at once (stop()
    has already aborted the ones it knew of, so this one would never be closed)."""
    import socket

    from odradek.broker.connection import KafkaConnection

    broker = Broker(_config(tmp_path, **{"storage.engine": "memory"}))
    await broker.start()
    await broker.stop()
    ours, theirs = socket.socketpair()
    try:
        loop = asyncio.get_running_loop()
        transport, conn = await loop.connect_accepted_socket(lambda: KafkaConnection(broker), ours)
        theirs.settimeout(5)
        assert theirs.recv(1) == b""  # closed by the broker side
        assert broker.connection_count == 0 and conn.transport is transport
    finally:
        theirs.close()


async def test_a_connection_accepted_in_the_loop_turn_before_stop_sees_eof(tmp_path: Path) -> None:
    """stop() in the loop turn after the listener accepted a connection (asyncio accepts in one
    callback and builds the transport in a task a turn later) must still close that connection
    before it returns: the client sees EOF, without help from the cyclic garbage collector.

    Deterministic on selector loops: the connection waits in the listen backlog, ``begin_stop``
    runs in the same turn as the listener's accept callback but before it, so the task it
    creates runs stop() first in the next turn, ahead of the transport-building task."""
    import gc
    import socket

    broker = Broker(_config(tmp_path, **{"storage.engine": "memory", "http.listeners": ""}))
    await broker.start()
    loop = asyncio.get_running_loop()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # an orphaned socket must not be rescued by a lucky collection
    client = socket.create_connection(("127.0.0.1", broker.bound_port))  # in the backlog now
    try:
        stopping: asyncio.Future[asyncio.Task[None]] = loop.create_future()
        loop.call_soon(lambda: stopping.set_result(loop.create_task(broker.stop())))
        await asyncio.wait_for(await stopping, 10)
        client.settimeout(3)
        try:
            data = client.recv(1)
        except ConnectionResetError:
            data = b""
        assert data == b"", "the connection got data instead of EOF"
    except TimeoutError:
        pytest.fail("the connection accepted just before stop() is still open after stop()")
    finally:
        client.close()
        if gc_was_enabled:
            gc.enable()
