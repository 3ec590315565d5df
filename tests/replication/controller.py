"""What the tests send as the controller would: LeaderAndIsr v7 / StopReplica v4 frames
(request header v2, client id ``controller-<id>``) to standalone broker processes, plus
small wire helpers for Produce / Fetch against them."""

from __future__ import annotations

import dataclasses
import socket
import struct
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from broker.wire import (
    Wire,
    fetch_request,
    fetched_batches,
    list_offsets_request,
    produce_request,
)
from odradek.protocol import inter_broker as ib
from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

_SIZE = struct.Struct(">i")

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
STALE_CONTROLLER_EPOCH = 11
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
OFFSET_NOT_AVAILABLE = 78

EARLIEST = -2
LATEST = -1


def address(broker: BrokerProcess) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


class Controller:
    """Sends controller requests to brokers ``{id: BrokerProcess}``."""

    def __init__(self, brokers: Mapping[int, BrokerProcess], controller_id: int = 0) -> None:
        self.brokers = brokers
        self.controller_id = controller_id
        self.epoch = 1
        self.topic_ids: dict[str, uuid.UUID] = {}
        self._correlation_id = 0

    def _call(self, broker_id: int, api_key: int, version: int, body: bytes) -> bytes:
        self._correlation_id += 1
        frame = ib.encode_request_frame(
            api_key, version, body, self._correlation_id, f"controller-{self.controller_id}"
        )
        with socket.create_connection(address(self.brokers[broker_id]), timeout=10) as sock:
            sock.sendall(_SIZE.pack(len(frame)) + frame)
            (size,) = _SIZE.unpack(_recv(sock, 4))
            data = _recv(sock, size)
        (correlation_id,) = _SIZE.unpack_from(data, 0)
        assert correlation_id == self._correlation_id
        assert data[4] == 0  # response header v1, no tagged fields
        return data[5:]

    def leader_and_isr(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        partition_epoch: int = 0,
        controller_epoch: int | None = None,
    ) -> ib.LeaderAndIsrResponse:
        epoch = self.epoch if controller_epoch is None else controller_epoch
        topic_id = self.topic_ids.setdefault(topic, uuid.uuid4())
        state = ib.LeaderAndIsrPartitionState(
            topic,
            partition,
            epoch,
            leader,
            leader_epoch,
            tuple(isr),
            partition_epoch,
            tuple(replicas),
        )
        live = tuple(
            ib.LiveLeader(leader, *address(self.brokers[leader]))
            for _ in (0,)
            if leader in self.brokers and self.brokers[leader].running
        )
        request = ib.LeaderAndIsrRequest(
            self.controller_id, epoch, -1, (state,), live, {topic: topic_id}
        )
        body = self._call(
            broker_id, ib.LEADER_AND_ISR, 7, ib.encode_leader_and_isr_request(request, 7)
        )
        return ib.decode_leader_and_isr_response(body, {topic_id: topic}, 7)

    def elect(
        self,
        topic: str,
        partition: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int],
        partition_epoch: int = 0,
    ) -> None:
        """LeaderAndIsr to every running replica, the leader first (as the controller does,
        a follower then finds its leader ready)."""
        order = [leader, *[r for r in replicas if r != leader]]
        for broker_id in order:
            if broker_id in self.brokers and self.brokers[broker_id].running:
                r = self.leader_and_isr(
                    broker_id,
                    topic,
                    partition,
                    leader=leader,
                    leader_epoch=leader_epoch,
                    isr=isr,
                    replicas=replicas,
                    partition_epoch=partition_epoch,
                )
                assert r.error_code == NONE, r
                assert [e.error_code for e in r.partition_errors] == [NONE], r

    def stop_replica(
        self,
        broker_id: int,
        topic: str,
        partition: int,
        *,
        leader_epoch: int = -1,
        delete: bool = False,
    ) -> ib.StopReplicaResponse:
        request = ib.StopReplicaRequest(
            self.controller_id,
            self.epoch,
            -1,
            (ib.StopReplicaPartitionState(topic, partition, leader_epoch, delete),),
        )
        body = self._call(broker_id, ib.STOP_REPLICA, 4, ib.encode_stop_replica_request(request, 4))
        return ib.decode_stop_replica_response(body, 4)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return bytes(buf)


@contextmanager
def brokers(
    n: int, settings: Mapping[str, Any] | None = None
) -> Iterator[dict[int, BrokerProcess]]:
    """``n`` standalone broker processes with broker.id 1..n (no ZooKeeper)."""
    with ExitStack() as stack:
        procs: dict[int, BrokerProcess] = {}
        for i in range(1, n + 1):
            conf = {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "broker.id": i,
                "auto.create.topics.enable": False,
                **(settings or {}),
            }
            procs[i] = stack.enter_context(BrokerProcess(conf))
        yield procs


def batch(*values: bytes, ts: int = 1_700_000_000_000) -> bytes:
    return build_batch([(None, v, (), ts + i) for i, v in enumerate(values)])  # type: ignore[arg-type]


def produce(
    broker: BrokerProcess,
    topic: str,
    data: bytes,
    *,
    acks: int = -1,
    partition: int = 0,
    timeout_ms: int = 10_000,
) -> tuple[int, int]:
    with Wire(broker.bootstrap_servers, timeout=timeout_ms / 1000 + 10) as w:
        r = w.call(produce_request(topic, partition, data, acks=acks, timeout_ms=timeout_ms))
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def fetch(
    broker: BrokerProcess,
    topic: str,
    offset: int = 0,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
) -> tuple[int, int, list[Any]]:
    """A consumer's fetch: (error, high watermark, batches)."""
    with Wire(broker.bootstrap_servers, timeout=max_wait_ms / 1000 + 10) as w:
        r = w.call(fetch_request(topic, {partition: offset}, max_wait_ms=max_wait_ms))
    p = r.responses[0].partitions[0]
    return int(p.error_code), int(p.high_watermark), fetched_batches(p.records)


def read(broker: BrokerProcess, topic: str, count: int, *, partition: int = 0) -> list[Any]:
    """A consumer reading from offset 0 until it has ``count`` records (a new leader's high
    watermark moves once its followers fetch from it): each fetch at the high watermark
    long-polls until the broker has more (bounded: 20 fetches of at most 2 s)."""
    batches: list[Any] = []
    offset = 0
    for _ in range(20):
        err, _hw, got = fetch(broker, topic, offset, partition=partition, max_wait_ms=2000)
        assert err == NONE, err
        batches += got
        if got:
            offset = got[-1].base_offset + got[-1].last_offset_delta + 1
        if sum(b.record_count for b in batches) >= count:
            return batches
    raise AssertionError(f"{topic}: {values(batches)} after 20 fetches, expected {count} records")


def list_offsets(
    broker: BrokerProcess,
    topic: str,
    timestamp: int,
    isolation_level: int = 0,
    *,
    partition: int = 0,
) -> tuple[int, int]:
    """A consumer's ListOffsets v7 for one partition: (error, offset)."""
    request = list_offsets_request(topic, {partition: timestamp})
    with Wire(broker.bootstrap_servers) as w:
        r = w.call(dataclasses.replace(request, isolation_level=isolation_level))
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.offset)


def values(batches: list[Any]) -> list[bytes | None]:
    return [r.value for b in batches for r in b.records()]
