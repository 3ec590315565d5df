"""Client benchmark: odradek.client vs confluent-kafka, kafka-python and aiokafka.

Same workloads for every client against one broker (odradek by default, or Tansu):
  * produce N records of S bytes (null keys, acks=1, linger.ms=5, 256 KiB batches) to a fresh
    1-partition topic, until all are acknowledged;
  * consume those N records from offset 0;
  * Arrow: decode N records held in memory with odradek.client.columnar.records_to_arrow (one core),
    and read_range_arrow over the network.
Each measurement runs in a fresh subprocess; the table shows the median of --reps runs.

    .venv/bin/python bench/clients.py --broker odradek --records 1000000 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

CLIENTS = ["odradek", "odradek-send_batch", "confluent-kafka", "kafka-python", "aiokafka"]
"""``odradek-send_batch``: odradek.client's columnar ``Producer.send_batch`` (100,000-value
lists per call); it consumes like ``odradek``.

Also selectable with ``--clients``: ``odradek-default`` (odradek.client's defaults: idempotent,
acks=all, linger.ms=5, batch.size 16 KiB) and ``odradek-default-plain`` (the same with
enable.idempotence=false), to measure what idempotence costs."""

ODRADEK_PRODUCE_CONFIGS: dict[str, dict[str, Any]] = {
    "odradek": {"acks": "1", "linger.ms": 5, "batch.size": 262144},
    "odradek-default": {},
    "odradek-default-plain": {"enable.idempotence": False},
}


# -- workloads (run inside a child process) ---------------------------------------------------
def produce(client: str, bs: str, topic: str, n: int, size: int) -> float:
    value = os.urandom(size)
    if client in ODRADEK_PRODUCE_CONFIGS:
        from odradek.client import Producer

        p = Producer({"bootstrap.servers": bs, **ODRADEK_PRODUCE_CONFIGS[client]})
        t = time.perf_counter()
        send = p.send
        for _ in range(n):
            send(topic, value)
        p.flush()
        el = time.perf_counter() - t
        p.close()
        return el
    if client == "odradek-send_batch":
        from odradek.client import Producer

        p = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 5, "batch.size": 262144})
        chunk = [value] * 100_000
        t = time.perf_counter()
        left = n
        while left > 0:
            p.send_batch(topic, chunk if left >= len(chunk) else chunk[:left])
            left -= len(chunk)
        p.flush()
        el = time.perf_counter() - t
        p.close()
        return el
    if client == "confluent-kafka":
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": bs, "acks": 1, "linger.ms": 5, "batch.size": 262144, "queue.buffering.max.messages": 2_000_000})
        t = time.perf_counter()
        produce = p.produce
        for _ in range(n):
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.001)
        p.flush()
        return time.perf_counter() - t
    if client == "kafka-python":
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5, batch_size=262144, enable_idempotence=False)
        t = time.perf_counter()
        send = p.send
        for _ in range(n):
            send(topic, value)
        p.flush()
        el = time.perf_counter() - t
        p.close()
        return el
    if client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        async def run() -> float:
            p = AIOKafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5, max_batch_size=262144)
            await p.start()
            t = time.perf_counter()
            futs = []
            for _ in range(n):
                futs.append(await p.send(topic, value))
                if len(futs) >= 10000:
                    await asyncio.gather(*futs)
                    futs = []
            await asyncio.gather(*futs)
            el = time.perf_counter() - t
            await p.stop()
            return el

        return asyncio.run(run())
    raise ValueError(client)


def consume(client: str, bs: str, topic: str, n: int) -> float:
    if client == "odradek":
        from odradek.client import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest", "max.poll.records": 10000, "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0)])
        t = time.perf_counter()
        got = 0
        while got < n:
            got += len(c.poll(1.0))
        el = time.perf_counter() - t
        c.close()
        return el
    if client == "confluent-kafka":
        import confluent_kafka

        c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "bench-" + uuid.uuid4().hex, "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        t = time.perf_counter()
        got = 0
        while got < n:
            msgs = c.consume(10000, 1.0)
            got += sum(1 for m in msgs if not m.error())
        el = time.perf_counter() - t
        c.close()
        return el
    if client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=10000)
        c.assign([KTP(topic, 0)])
        c.seek(KTP(topic, 0), 0)
        t = time.perf_counter()
        got = 0
        while got < n:
            got += sum(len(v) for v in c.poll(1000).values())
        el = time.perf_counter() - t
        c.close()
        return el
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def run() -> float:
            c = AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False)
            await c.start()
            c.assign([ATP(topic, 0)])
            c.seek(ATP(topic, 0), 0)
            t = time.perf_counter()
            got = 0
            while got < n:
                res = await c.getmany(timeout_ms=1000, max_records=10000)
                got += sum(len(v) for v in res.values())
            el = time.perf_counter() - t
            await c.stop()
            return el

        return asyncio.run(run())
    raise ValueError(client)


def arrow_decode(n: int, size: int) -> float:
    from odradek.client import _records
    from odradek.client.columnar import records_to_arrow

    value = os.urandom(size)
    per_batch = 1000
    batch = [(None, value, None, 1_700_000_000_000 + i) for i in range(per_batch)]
    data = b"".join(_records.encode_batch(batch, base_offset=i) for i in range(0, n, per_batch))
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        rb = records_to_arrow("t", 0, data)
        best = min(best, time.process_time() - t)
        assert rb.num_rows == n
    return best


def arrow_range(bs: str, topic: str, n: int) -> float:
    from odradek.client import read_range_arrow

    t = time.perf_counter()
    rows = sum(b.num_rows for b in read_range_arrow({"bootstrap.servers": bs}, topic, 0, 0, n))
    assert rows == n
    return time.perf_counter() - t


def _child(args: argparse.Namespace) -> None:
    if args.child == "produce":
        el = produce(args.client, args.bootstrap, args.topic, args.records, args.size)
    elif args.child == "consume":
        client = "odradek" if args.client.startswith("odradek") else args.client
        el = consume(client, args.bootstrap, args.topic, args.records)
    elif args.child == "arrow-decode":
        el = arrow_decode(args.records, args.size)
    else:
        el = arrow_range(args.bootstrap, args.topic, args.records)
    print(json.dumps({"seconds": el}))


# -- orchestration ------------------------------------------------------------------------------
def _run_child(kind: str, client: str, bs: str, topic: str, n: int, size: int, timeout: float) -> float | None:
    cmd = [sys.executable, __file__, "--child", kind, "--client", client, "--bootstrap", bs, "--topic", topic,
           "--records", str(n), "--size", str(size)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  {kind} {client}: timed out", file=sys.stderr)
        return None
    if r.returncode != 0:
        print(f"  {kind} {client}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return float(json.loads(r.stdout.strip().splitlines()[-1])["seconds"])


def _create_topic(bs: str, topic: str) -> None:
    from odradek.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 1)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", choices=["odradek", "tansu"], default="odradek")
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--child")
    ap.add_argument("--client")
    ap.add_argument("--topic")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--produce-only", action="store_true", help="skip the consume and Arrow measurements")
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    clients = args.clients.split(",")
    broker: Any = None
    bs = args.bootstrap
    if bs is None:
        if args.broker == "tansu":
            from odradek.testing.tansu import TansuProcess

            broker = TansuProcess().start()
        else:
            from odradek.testing.process import BrokerProcess

            broker = BrokerProcess({"listeners": "PLAINTEXT://127.0.0.1:0"}).start()
        bs = broker.bootstrap_servers
    results: dict[str, dict[str, list[float]]] = {c: {"produce": [], "consume": []} for c in clients}
    arrow: dict[str, list[float]] = {"decode": [], "range": []}
    n = args.records
    try:
        for rep in range(args.reps):
            for client in clients:
                topic = f"bench-{client}-{uuid.uuid4().hex[:6]}"
                _create_topic(bs, topic)
                el = _run_child("produce", client, bs, topic, n, args.size, args.timeout)
                if el:
                    results[client]["produce"].append(n / el)
                if el and not args.produce_only:
                    el = _run_child("consume", client, bs, topic, n, args.size, args.timeout)
                    if el:
                        results[client]["consume"].append(n / el)
                    if client == "odradek":
                        el = _run_child("arrow-range", client, bs, topic, n, args.size, args.timeout)
                        if el:
                            arrow["range"].append(n / el)
                print(f"rep {rep + 1} {client}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in results[client].items() if v), flush=True)
            el = None if args.produce_only else _run_child("arrow-decode", "odradek", bs, "-", n, args.size, args.timeout)
            if el:
                arrow["decode"].append(n / el)
    finally:
        if broker is not None:
            broker.stop()

    def med(v: list[float]) -> float:
        return statistics.median(v) if v else float("nan")

    print(f"\nbroker: {args.broker}, {n:,} records of {args.size} B, median of {args.reps}\n")
    print("| client | produce rec/s | produce MB/s | consume rec/s | consume MB/s |")
    print("|---|---:|---:|---:|---:|")
    for c in clients:
        p, q = med(results[c]["produce"]), med(results[c]["consume"])
        print(f"| {c} | {p:,.0f} | {p * args.size / 1e6:.1f} | {q:,.0f} | {q * args.size / 1e6:.1f} |")
    print(f"\nArrow decode (records_to_arrow, one core, CPU time): {med(arrow['decode']):,.0f} records/s")
    print(f"Arrow over the network (read_range_arrow, wall time): {med(arrow['range']):,.0f} records/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"broker": args.broker, "records": n, "size": args.size, "results": results, "arrow": arrow}, f, indent=1)


if __name__ == "__main__":
    main()
