"""ControllerChannelManager against a small asyncio server that speaks the inter-broker codecs;
requests handed over from another thread, as the controller's event thread does."""

from __future__ import annotations

import asyncio
import datetime
import struct
import threading
import time
import uuid
from typing import Any

from kio.schema.api_versions.v3 import response as av3
from kio.schema.errors import ErrorCode

from odradek.broker.inter_broker_client import InterBrokerClient
from odradek.cluster.znodes import BrokerInfo
from odradek.controller.channel import ControllerChannelManager
from odradek.protocol import inter_broker as ib
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import encode_response, make_entity

_SIZE = struct.Struct(">i")


def _api_versions(correlation_id: int) -> bytes:
    keys = tuple(
        make_entity(av3.ApiVersion, api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted({**ib.SUPPORTED_VERSIONS, 18: (0, 3)}.items())
    )
    response = make_entity(
        av3.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=keys,
        throttle_time=datetime.timedelta(0),
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
    return encode_response(response, correlation_id, api_key=18, api_version=3)


class InterBrokerServer:
    """Answers ApiVersions, LeaderAndIsr / UpdateMetadata / StopReplica; closes the connection
    on the first ``drop`` of the latter unanswered."""

    def __init__(self, drop: int = 0) -> None:
        self.received: list[tuple[int, int, str | None, Any]] = []
        self.drop = drop
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> InterBrokerServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, pos = parse_request_header(frame)
                body = frame[pos:]
                if header.api_key == 18:
                    writer.write(_api_versions(header.correlation_id))
                    continue
                if header.api_key == ib.LEADER_AND_ISR:
                    req: Any = ib.decode_leader_and_isr_request(body, header.api_version)
                    resp = ib.encode_leader_and_isr_response(
                        ib.LeaderAndIsrResponse(
                            0,
                            tuple(
                                ib.LeaderAndIsrPartitionError(s.topic_name, s.partition_index, 0)
                                for s in req.partition_states
                            ),
                        ),
                        req.topic_ids,
                    )
                elif header.api_key == ib.UPDATE_METADATA:
                    req = ib.decode_update_metadata_request(body, header.api_version)
                    resp = ib.encode_update_metadata_response(ib.UpdateMetadataResponse(0))
                else:
                    req = ib.decode_stop_replica_request(body, header.api_version)
                    resp = ib.encode_stop_replica_response(ib.StopReplicaResponse(0, ()))
                if self.drop > 0:
                    self.drop -= 1
                    return  # close without answering: the channel must resend
                self.received.append((header.api_key, header.api_version, header.client_id, req))
                out = ib.encode_response_frame(resp, header.correlation_id)
                writer.write(_SIZE.pack(len(out)) + out)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def wait_until(cond: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.01)
    return bool(cond())


def from_thread(fn: Any) -> None:
    """Run ``fn`` on another thread (the controller's event thread does the calls)."""
    t = threading.Thread(target=fn)
    t.start()
    t.join()


async def test_requests_in_order_with_retry_after_a_dropped_connection() -> None:
    server = await InterBrokerServer(drop=1).start()
    answers: list[tuple[int, Any]] = []
    client = InterBrokerClient(1)
    channel = ControllerChannelManager(
        client,
        asyncio.get_running_loop(),
        1,
        on_response=lambda b, req, resp: answers.append((b, resp)),
    )
    try:
        lai = ib.LeaderAndIsrRequest(
            1,
            4,
            55,
            (ib.LeaderAndIsrPartitionState("t", 0, 4, 2, 1, (2,), 3, (2,)),),
            (ib.LiveLeader(2, "127.0.0.1", server.port),),
            {"t": uuid.uuid4()},
        )
        um = ib.UpdateMetadataRequest(
            1, 4, 55, (), (ib.UpdateMetadataBroker(2, (ib.UpdateMetadataEndpoint(1, "h"),)),)
        )
        stop = ib.StopReplicaRequest(1, 4, 55, (ib.StopReplicaPartitionState("t", 0, 1, True),))

        def controller_thread() -> None:
            channel.update_brokers({2: BrokerInfo(2, "127.0.0.1", server.port, epoch=55)})
            for r in (lai, um, stop):
                channel.send(2, r)
            channel.send(9, stop)  # unknown broker: dropped

        from_thread(controller_thread)
        assert await wait_until(lambda: len(answers) == 3)
        assert [(k, v, c) for k, v, c, _ in server.received] == [
            (4, 7, "controller-1"),
            (6, 8, "controller-1"),
            (5, 4, "controller-1"),
        ]
        assert [r for *_, r in server.received] == [lai, um, stop]
        assert answers[0] == (
            2,
            ib.LeaderAndIsrResponse(0, (ib.LeaderAndIsrPartitionError("t", 0, 0),)),
        )
        # the broker leaves: its sender stops, its connection closes, later requests drop
        from_thread(lambda: channel.update_brokers({}))
        from_thread(lambda: channel.send(2, um))
        done = asyncio.Event()
        asyncio.get_running_loop().call_soon_threadsafe(done.set)  # after the hand-overs
        await done.wait()
        await asyncio.sleep(0)
        assert list(client.connections()) == []
        assert len(server.received) == 3
    finally:
        await channel.close()
        await client.close()
        await server.close()


async def test_a_broker_with_a_new_epoch_gets_a_new_sender_and_connection() -> None:
    server = await InterBrokerServer().start()
    client = InterBrokerClient(1)
    answers: list[int] = []
    channel = ControllerChannelManager(
        client, asyncio.get_running_loop(), 1, on_response=lambda b, req, resp: answers.append(b)
    )
    um = ib.UpdateMetadataRequest(1, 4, 55, (), ())
    try:
        channel.update_brokers({2: BrokerInfo(2, "127.0.0.1", server.port, epoch=55)})
        channel.send(2, um)
        assert await wait_until(lambda: len(answers) == 1)
        channel.update_brokers({2: BrokerInfo(2, "127.0.0.1", server.port, epoch=56)})
        channel.send(2, um)
        assert await wait_until(lambda: len(answers) == 2)
        assert list(client.connections()) == [(2, "controller")]
    finally:
        await channel.close()
        await client.close()
        await server.close()
