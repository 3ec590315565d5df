"""The first read_committed ListOffsets on a partition whose producer state is not loaded yet
(the producer-state gap): it waits for the state to be built, which replays the log when
there is nothing better, and stalls the broker's event loop meanwhile.

Two cases, ``--records`` records of ``--size`` bytes produced by confluent-kafka with
idempotence (batch.size 16384, so there are many batches):

* **failover**: two standalone brokers (no ZooKeeper; the benchmark sends the LeaderAndIsr a
  controller would), the partition led by broker 1 and followed by broker 2; then broker 2 is
  elected (epoch 1) and the first read_committed ListOffsets is sent to it.
* **restart**: one broker, produced to, killed (SIGKILL, before its periodic producer-state
  snapshot) and started again on the same data
  directory; then the first read_committed ListOffsets.

Each prints the first request's latency, the second's (the state is loaded by then) and the
stall: the longest ApiVersions round trip another connection saw during the first request, in
ms (how long the event loop was blocked).
Usage::

    .venv/bin/python bench/producer_state.py [--records 200000] [--size 100] [--runs 3]

Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

_ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT.parent / "tests"))
from broker.wire import Wire, list_offsets_request, req  # noqa: E402
from common import median, produce_to_partition_0  # noqa: E402
from odradek.protocol import inter_broker as ib  # noqa: E402
from odradek.testing.process import BrokerProcess  # noqa: E402

_SIZE = struct.Struct(">i")
_SETTINGS = {"listeners": "PLAINTEXT://127.0.0.1:0", "replica.fetch.backoff.ms": 100}


def _address(broker: BrokerProcess) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


def leader_and_isr(
    brokers: dict[int, BrokerProcess], topic: str, leader: int, epoch: int, topic_id: uuid.UUID
) -> None:
    replicas = tuple(sorted(brokers))
    isr = (leader, *[b for b in replicas if b != leader])
    state = ib.LeaderAndIsrPartitionState(topic, 0, 1, leader, epoch, isr, epoch, replicas)
    live = (ib.LiveLeader(leader, *_address(brokers[leader])),)
    request = ib.LeaderAndIsrRequest(0, 1, -1, (state,), live, {topic: topic_id})
    body = ib.encode_leader_and_isr_request(request, 7)
    for broker_id in isr:
        frame = ib.encode_request_frame(ib.LEADER_AND_ISR, 7, body, 1, "controller-0")
        with socket.create_connection(_address(brokers[broker_id]), timeout=30) as sock:
            sock.sendall(_SIZE.pack(len(frame)) + frame)
            (size,) = _SIZE.unpack(sock.recv(4, socket.MSG_WAITALL))
            sock.recv(size, socket.MSG_WAITALL)


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 16384,
        }
    )
    produce_to_partition_0(producer, topic, b"x" * size, n)


def read_committed_end_ms(broker: BrokerProcess, topic: str) -> tuple[float, int]:
    """(latency in ms, offset) of one ListOffsets(latest, read_committed) that succeeds
    (bounded retries while the new leader settles)."""
    request = list_offsets_request(topic, {0: -1}, version=7)
    request = dataclasses.replace(request, isolation_level=1)
    with Wire(broker.bootstrap_servers, timeout=120) as w:
        for _ in range(100):
            start = time.perf_counter()
            r = w.call(request)
            elapsed = (time.perf_counter() - start) * 1000
            p = r.topics[0].partitions[0]
            if int(p.error_code) == 0:
                return elapsed, int(p.offset)
            time.sleep(0.05)
    raise RuntimeError("ListOffsets did not succeed")


def first_with_probe(broker: BrokerProcess, topic: str) -> tuple[float, float]:
    """(first read_committed ListOffsets latency, the longest ApiVersions round trip another
    connection saw meanwhile), in ms: the probe measures how long the event loop stalled."""
    stop = threading.Event()
    longest = [0.0]
    probing = threading.Event()

    def probe() -> None:
        request = req(18, 3, client_software_name="probe", client_software_version="1")
        with Wire(broker.bootstrap_servers, timeout=120) as w:
            w.call(request)
            probing.set()
            for _ in range(1_000_000):  # bounded; stopped right after the ListOffsets
                if stop.is_set():
                    return
                start = time.perf_counter()
                w.call(request)
                longest[0] = max(longest[0], (time.perf_counter() - start) * 1000)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    probing.wait(30)
    try:
        first, _ = read_committed_end_ms(broker, topic)
    finally:
        stop.set()
        thread.join(30)
    return first, longest[0]


def wait_for_end(broker: BrokerProcess, topic: str, records: int) -> None:
    """Check every record is there: a new leader's high watermark (hence its last stable
    offset) reaches its log end once its follower fetched from it (bounded: 10 s)."""
    deadline = time.monotonic() + 10
    end = -1
    while time.monotonic() < deadline:
        _, end = read_committed_end_ms(broker, topic)
        if end == records:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the partition ends at {end}, expected {records}")


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)


def failover(records: int, size: int) -> tuple[float, float, float]:
    brokers = {i: BrokerProcess({**_SETTINGS, "broker.id": i}) for i in (1, 2)}
    try:
        for b in brokers.values():
            b.start()
        topic, topic_id = "ps", uuid.uuid4()
        create(brokers[1].bootstrap_servers, topic)
        leader_and_isr(brokers, topic, 1, 0, topic_id)
        produce(brokers[1].bootstrap_servers, topic, records, size)
        leader_and_isr(brokers, topic, 2, 1, topic_id)
        first, stall = first_with_probe(brokers[2], topic)
        second, _ = read_committed_end_ms(brokers[2], topic)
        wait_for_end(brokers[2], topic, records)
        return first, second, stall
    finally:
        for b in brokers.values():
            b.close()


def restart(records: int, size: int) -> tuple[float, float, float]:
    with BrokerProcess({**_SETTINGS, "broker.id": 1}) as broker:
        create(broker.bootstrap_servers, "ps")
        produce(broker.bootstrap_servers, "ps", records, size)
        broker.restart(kill=True)
        first, stall = first_with_probe(broker, "ps")
        second, _ = read_committed_end_ms(broker, "ps")
        wait_for_end(broker, "ps", records)
        return first, second, stall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--case", choices=("failover", "restart", "both"), default="both")
    args = parser.parse_args(argv)
    cases = ("failover", "restart") if args.case == "both" else (args.case,)
    for case in cases:
        fn = failover if case == "failover" else restart
        results = [fn(args.records, args.size) for _ in range(args.runs)]
        for first, second, stall in results:
            print(f"{case}: first {first:.1f} ms, second {second:.1f} ms, stall {stall:.1f} ms")
        print(
            f"{case} median: first {median([r[0] for r in results]):.1f} ms, "
            f"second {median([r[1] for r in results]):.1f} ms, "
            f"stall {median([r[2] for r in results]):.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
