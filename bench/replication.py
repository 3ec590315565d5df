"""Replication throughput: confluent-kafka producing with acks=all to a partition replicated on
three local broker processes (RF 3, min.insync.replicas 2), against acks=1 to one broker (RF 1),
same workload, same run; reported as a ratio (target: ≥ 0.5), with the CPU seconds
the leader and each follower spent.

The three brokers run standalone (no ZooKeeper): the benchmark sends them the LeaderAndIsr a
controller would send (the topic is created in the leader's own metadata so the client finds
it there). Usage::

    .venv/bin/python bench/replication.py [--records 200000] [--size 100] [--runs 3]

Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cpu_seconds, median, produce_to_partition_0
from odradek.protocol import inter_broker as ib
from odradek.testing.process import BrokerProcess

_SIZE = struct.Struct(">i")


def _address(broker: BrokerProcess) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def leader_and_isr(brokers: dict[int, BrokerProcess], topic: str, leader: int) -> None:
    replicas = tuple(sorted(brokers))
    state = ib.LeaderAndIsrPartitionState(topic, 0, 1, leader, 0, replicas, 0, replicas)
    live = (ib.LiveLeader(leader, *_address(brokers[leader])),)
    request = ib.LeaderAndIsrRequest(0, 1, -1, (state,), live, {topic: uuid.uuid4()})
    body = ib.encode_leader_and_isr_request(request, 7)
    for broker_id in [leader, *[b for b in replicas if b != leader]]:
        frame = ib.encode_request_frame(ib.LEADER_AND_ISR, 7, body, 1, "controller-0")
        with socket.create_connection(_address(brokers[broker_id]), timeout=10) as sock:
            sock.sendall(_SIZE.pack(len(frame)) + frame)
            (size,) = _SIZE.unpack(sock.recv(4, socket.MSG_WAITALL))
            sock.recv(size, socket.MSG_WAITALL)


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    """Records per second for ``n`` records of ``size`` bytes (all acknowledged)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 262144}
    )
    start = time.perf_counter()
    produce_to_partition_0(producer, topic, b"x" * size, n)
    return n / (time.perf_counter() - start)


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)


def run(records: int, size: int) -> dict[str, float]:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "min.insync.replicas": 2}
    out: dict[str, float] = {}
    with BrokerProcess({**settings, "broker.id": 1}) as single:
        create(single.bootstrap_servers, "rf1")
        cpu0 = cpu_seconds(single.pid or 0)
        out["rf1_acks1"] = produce(single.bootstrap_servers, "rf1", records, size, "1")
        out["rf1_cpu_s"] = cpu_seconds(single.pid or 0) - cpu0
    brokers = {i: BrokerProcess({**settings, "broker.id": i}) for i in (1, 2, 3)}
    try:
        for b in brokers.values():
            b.start()
        create(brokers[1].bootstrap_servers, "rf3")
        leader_and_isr(brokers, "rf3", 1)
        cpu = {i: cpu_seconds(b.pid or 0) for i, b in brokers.items()}
        out["rf3_acks_all"] = produce(brokers[1].bootstrap_servers, "rf3", records, size, "all")
        for i, b in brokers.items():
            out[f"rf3_cpu_s_broker{i}"] = cpu_seconds(b.pid or 0) - cpu[i]
    finally:
        for b in brokers.values():
            b.close()
    out["ratio"] = out["rf3_acks_all"] / out["rf1_acks1"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    results = [run(args.records, args.size) for _ in range(args.runs)]
    for r in results:
        print({k: round(v, 3) for k, v in r.items()})
    keys = results[0].keys()
    print("median:", {k: round(median([r[k] for r in results]), 3) for k in keys})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
