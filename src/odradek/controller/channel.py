"""The controller's requests over TCP (Kafka's ``ControllerChannelManager`` / ``RequestSendThread``).

One sender thread per live broker sends that broker's requests in order, one at a time: a frame
of LeaderAndIsr v7, UpdateMetadata v8 or StopReplica v4 (request header v2, client id
``controller-<id>``), then waits for the answer. A request whose connection fails is sent again
on a new connection (backing off up to 1 s) until it is answered or the broker leaves
(``update_brokers`` without it). Answers go to ``on_response(broker_id, request, response)``.
"""

from __future__ import annotations

import logging
import queue
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

from odradek.cluster.znodes import BrokerInfo
from odradek.controller.decisions import BrokerRequest
from odradek.protocol import inter_broker as ib

__all__ = ["TcpControllerChannel", "encode_broker_request"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
ResponseCallback = Callable[[int, BrokerRequest, Any], None]


def encode_broker_request(request: BrokerRequest) -> tuple[int, int, bytes, Callable[[bytes], Any]]:
    """(api key, version, body, response decoder) for a controller request."""
    if isinstance(request, ib.LeaderAndIsrRequest):
        names = {v: k for k, v in request.topic_ids.items()}
        return (ib.LEADER_AND_ISR, 7, ib.encode_leader_and_isr_request(request, 7),
                lambda b: ib.decode_leader_and_isr_response(b, names, 7))
    if isinstance(request, ib.UpdateMetadataRequest):
        return ib.UPDATE_METADATA, 8, ib.encode_update_metadata_request(request, 8), ib.decode_update_metadata_response
    return ib.STOP_REPLICA, 4, ib.encode_stop_replica_request(request, 4), ib.decode_stop_replica_response


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


class _Sender:
    def __init__(self, channel: TcpControllerChannel, broker: BrokerInfo) -> None:
        self.channel = channel
        self.broker = broker
        self.queue: queue.Queue[BrokerRequest | None] = queue.Queue()
        self.stopped = threading.Event()
        self.sock: socket.socket | None = None
        self.correlation_id = 0
        self.thread = threading.Thread(target=self._run, name=f"controller-to-broker-{broker.id}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.queue.put(None)
        sock = self.sock
        if sock is not None:  # wake a thread waiting for an answer
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _run(self) -> None:
        while not self.stopped.is_set():
            request = self.queue.get()
            if request is None:
                break
            backoff = 0.05
            while not self.stopped.is_set():
                try:
                    response = self._round_trip(request)
                except (OSError, ValueError) as e:
                    log.info("controller -> broker %d: %s; retrying", self.broker.id, e)
                    self._close()
                    self.stopped.wait(backoff)
                    backoff = min(1.0, backoff * 2)
                    continue
                if self.channel.on_response is not None:
                    self.channel.on_response(self.broker.id, request, response)
                break
        self._close()

    def _round_trip(self, request: BrokerRequest) -> Any:
        if self.sock is None:
            self.sock = socket.create_connection((self.broker.host, self.broker.port),
                                                 timeout=self.channel.request_timeout_s)
        api_key, version, body, decode = encode_broker_request(request)
        self.correlation_id += 1
        frame = ib.encode_request_frame(api_key, version, body, self.correlation_id, self.channel.client_id)
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        (size,) = _SIZE.unpack(_read_exact(self.sock, 4))
        data = _read_exact(self.sock, size)
        (correlation_id,) = _SIZE.unpack_from(data, 0)
        if correlation_id != self.correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {self.correlation_id}")
        if data[4] != 0:  # response header v1: an empty tagged-field section
            raise ValueError("unexpected tagged fields in the response header")
        return decode(data[5:])

    def _close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class TcpControllerChannel:
    """A :class:`~odradek.controller.controller.ControllerChannel` over the brokers' listeners."""

    def __init__(
        self, controller_id: int, *, on_response: ResponseCallback | None = None, request_timeout_s: float = 30.0
    ) -> None:
        self.client_id = f"controller-{controller_id}"
        self.on_response = on_response
        self.request_timeout_s = request_timeout_s
        self._senders: dict[int, _Sender] = {}
        self._lock = threading.Lock()

    def update_brokers(self, live: Mapping[int, BrokerInfo]) -> None:
        with self._lock:
            for broker_id in list(self._senders):
                sender = self._senders[broker_id]
                info = live.get(broker_id)
                if info is None or (info.host, info.port, info.epoch) != (
                        sender.broker.host, sender.broker.port, sender.broker.epoch):
                    sender.stop()
                    del self._senders[broker_id]
            for broker_id, info in live.items():
                if broker_id not in self._senders:
                    self._senders[broker_id] = _Sender(self, info)

    def send(self, broker_id: int, request: BrokerRequest) -> None:
        with self._lock:
            sender = self._senders.get(broker_id)
        if sender is None:
            log.debug("no sender for broker %d: request dropped", broker_id)
            return
        sender.queue.put(request)

    def close(self) -> None:
        with self._lock:
            senders = list(self._senders.values())
            self._senders.clear()
        for s in senders:
            s.stop()
        for s in senders:
            s.thread.join(5)
