"""TcpControllerChannel against a small TCP server that speaks the inter-broker codecs."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from typing import Any

from odradek.cluster.znodes import BrokerInfo
from odradek.controller.channel import TcpControllerChannel
from odradek.protocol import inter_broker as ib
from odradek.protocol.headers import parse_request_header


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError
        buf += chunk
    return buf


class InterBrokerServer:
    """Answers LeaderAndIsr / UpdateMetadata / StopReplica; drops the first ``drop`` requests unanswered."""

    def __init__(self, drop: int = 0) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[tuple[int, int, str | None, Any]] = []
        self.drop = drop
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    (size,) = struct.unpack(">i", _read_exact(conn, 4))
                    frame = _read_exact(conn, size)
                except (ConnectionError, OSError):
                    return
                header, pos = parse_request_header(frame, header_version=2)
                body = frame[pos:]
                if header.api_key == ib.LEADER_AND_ISR:
                    req: Any = ib.decode_leader_and_isr_request(body, header.api_version)
                    resp = ib.encode_leader_and_isr_response(ib.LeaderAndIsrResponse(0, tuple(
                        ib.LeaderAndIsrPartitionError(s.topic_name, s.partition_index, 0)
                        for s in req.partition_states)), req.topic_ids)
                elif header.api_key == ib.UPDATE_METADATA:
                    req = ib.decode_update_metadata_request(body, header.api_version)
                    resp = ib.encode_update_metadata_response(ib.UpdateMetadataResponse(0))
                else:
                    req = ib.decode_stop_replica_request(body, header.api_version)
                    resp = ib.encode_stop_replica_response(ib.StopReplicaResponse(0, ()))
                with self.lock:
                    if self.drop > 0:
                        self.drop -= 1
                        return  # close without answering: the channel must resend
                    self.received.append((header.api_key, header.api_version, header.client_id, req))
                out = ib.encode_response_frame(resp, header.correlation_id)
                conn.sendall(struct.pack(">i", len(out)) + out)

    def close(self) -> None:
        self.listener.close()


def wait_until(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def test_requests_in_order_with_retry_after_a_dropped_connection() -> None:
    server = InterBrokerServer(drop=1)
    answers: list[tuple[int, Any]] = []
    channel = TcpControllerChannel(1, on_response=lambda b, req, resp: answers.append((b, resp)))
    try:
        channel.update_brokers({2: BrokerInfo(2, "127.0.0.1", server.port, epoch=55)})
        lai = ib.LeaderAndIsrRequest(1, 4, 55, (ib.LeaderAndIsrPartitionState("t", 0, 4, 2, 1, (2,), 3, (2,)),),
                                     (ib.LiveLeader(2, "127.0.0.1", server.port),), {"t": uuid.uuid4()})
        um = ib.UpdateMetadataRequest(1, 4, 55, (), (ib.UpdateMetadataBroker(2, (ib.UpdateMetadataEndpoint(1, "h"),)),))
        stop = ib.StopReplicaRequest(1, 4, 55, (ib.StopReplicaPartitionState("t", 0, 1, True),))
        for r in (lai, um, stop):
            channel.send(2, r)
        channel.send(9, stop)  # unknown broker: dropped
        assert wait_until(lambda: len(answers) == 3)
        assert [(k, v, c) for k, v, c, _ in server.received] == [(4, 7, "controller-1"), (6, 8, "controller-1"),
                                                                 (5, 4, "controller-1")]
        assert [r for *_, r in server.received] == [lai, um, stop]
        assert answers[0] == (2, ib.LeaderAndIsrResponse(0, (ib.LeaderAndIsrPartitionError("t", 0, 0),)))
        # the broker leaves: its sender stops
        channel.update_brokers({})
        channel.send(2, um)
        time.sleep(0.2)  # nothing may arrive; there is no event to wait for
        assert len(server.received) == 3
    finally:
        channel.close()
        server.close()
