"""What the console and the metrics cost the broker: produce latency, broker CPU and RSS.

    .venv/bin/python bench/console.py              # 3 runs per setup, medians
    .venv/bin/python bench/console.py --quick      # 1 run, shorter phases

Setups, each a fresh ``odradek broker`` process (odradek.testing.process.BrokerProcess, file
storage in a temporary dir), run in rotation so that machine noise spreads evenly:

* ``off``: ``http.listeners`` empty: no console, no BrokerMetrics (the request hook is one
  ``time.perf_counter()`` and a None check);
* ``on``: ``http.listeners=http://127.0.0.1:0``: the request hook counts every request into
  BrokerMetrics, the console samples the cluster every 5 s;
* ``scrape``: ``on`` plus a child process GETting ``/metrics`` every 100 ms during both phases.

Phases (confluent-kafka producer in this process, 100-byte records, acks=1, one partition; a
consumer group with a committed offset on the topic so that every snapshot computes lag, lag in
seconds and time to clear):

* throughput: N records as fast as possible (linger.ms=5); broker CPU seconds per million
  records (utime+stime of the broker process);
* latency: a fixed rate (``--rate`` records/s, linger.ms=0) for ``--seconds``; p50/p99 of the
  delivery latency (librdkafka's msg.latency()).

RSS: the broker's resident set after both phases (and, for ``on``/``scrape``, after every
console page was served once), ``off`` vs ``on``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common import cpu_seconds, percentile, print_table
from odradek.client import Admin, TopicPartition
from odradek.testing.process import BrokerProcess

RECORD = os.urandom(100)
TOPIC = "bench-console"
GROUP = "bench-console-group"
PHASE_TIMEOUT = 120.0


def _scraper(url: str, stop: Any, interval: float, counts: Any) -> None:
    n = 0
    errors = 0
    while not stop.is_set():
        t = time.monotonic()
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                r.read()
            n += 1
        except OSError:
            errors += 1
        time.sleep(max(0.0, interval - (time.monotonic() - t)))
    counts.put((n, errors))


def _console_url(process: BrokerProcess) -> str | None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(r"console listening on (http://\S+)", process.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        time.sleep(0.05)
    return None


def throughput(bootstrap: str, pid: int, n: int) -> float:
    errors: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
        }
    )

    def on_error(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer.produce(TOPIC, RECORD, on_delivery=on_error)
    producer.flush(30)
    cpu0 = cpu_seconds(pid)
    deadline = time.monotonic() + PHASE_TIMEOUT
    sent = 0
    while sent < n and time.monotonic() < deadline:
        try:
            producer.produce(TOPIC, RECORD, on_delivery=on_error)
            sent += 1
        except BufferError:
            producer.poll(0.005)
    left = producer.flush(60)
    cpu1 = cpu_seconds(pid)
    if errors or left or sent < n:
        raise RuntimeError(f"throughput: {sent}/{n} sent, {left} left, {errors[:3]}")
    return (cpu1 - cpu0) / n * 1e6


def latency(bootstrap: str, rate: int, seconds: float) -> tuple[float, float, int]:
    lats: list[float] = []
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            lats.append(msg.latency() * 1000.0)

    producer.produce(TOPIC, RECORD)
    producer.flush(30)
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate)
        while sent < due:
            producer.produce(TOPIC, RECORD, on_delivery=on_delivery)
            sent += 1
        producer.poll(0.0005)
    producer.flush(30)
    if errors:
        raise RuntimeError(f"latency: {errors[:3]}")
    return percentile(lats, 50), percentile(lats, 99), len(lats)


def one_run(setup: str, args: argparse.Namespace) -> dict[str, float]:
    http = "" if setup == "off" else "http://127.0.0.1:0"
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "http.listeners": http,
                "group.initial.rebalance.delay.ms": 0}
    with BrokerProcess(settings, log_level="info") as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        with Admin({"bootstrap.servers": bootstrap}) as oa:
            oa.alter_group_offsets(GROUP, {TopicPartition(TOPIC, 0): 0})
        url = _console_url(broker) if setup != "off" else None
        stop = mp.Event()
        counts: Any = mp.Queue()
        scraper = None
        if setup == "scrape":
            assert url is not None
            scraper = mp.Process(target=_scraper, args=(url, stop, 0.1, counts), daemon=True)
            scraper.start()
        try:
            cpu = throughput(bootstrap, broker.pid, args.records)
            p50, p99, n = latency(bootstrap, args.rate, args.seconds)
        finally:
            stop.set()
            scrapes = (0, 0)
            if scraper is not None:
                scrapes = counts.get(timeout=30)
                scraper.join(10)
        if url is not None:
            for path in ("/", "/topics", f"/topics/{TOPIC}", "/groups", f"/groups/{GROUP}",
                         f"/groups/{GROUP}/lag", f"/topics/{TOPIC}/messages?offset=0&limit=50",
                         "/metrics", "/static/htmx.min.js", "/static/uPlot.iife.min.js"):
                with urllib.request.urlopen(url + path, timeout=10) as r:
                    r.read()
        rss = psutil.Process(broker.pid).memory_info().rss / 2**20
        return {"cpu_s_per_m": cpu, "p50_ms": p50, "p99_ms": p99, "latency_n": n,
                "rss_mb": rss, "scrapes": scrapes[0], "scrape_errors": scrapes[1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rate", type=int, default=5_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.records, args.seconds = 1, 100_000, 5.0
    setups = ["off", "on", "scrape"]
    results: dict[str, list[dict[str, float]]] = {s: [] for s in setups}
    for run in range(args.runs):
        order = setups[run % 3:] + setups[: run % 3]
        for setup in order:
            r = one_run(setup, args)
            results[setup].append(r)
            print(f"run {run + 1} {setup}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)

    def med(setup: str, key: str) -> float:
        return statistics.median(r[key] for r in results[setup])

    rows = []
    for setup in setups:
        rows.append([
            setup,
            f"{med(setup, 'cpu_s_per_m'):.3f}",
            f"{med(setup, 'p50_ms'):.2f}",
            f"{med(setup, 'p99_ms'):.2f}",
            f"{med(setup, 'p99_ms') / med('off', 'p99_ms'):.3f}",
            f"{med(setup, 'rss_mb'):.1f}",
            f"{med(setup, 'scrapes'):.0f}",
        ])
    print()
    print(f"{args.runs} run(s) per setup, medians; throughput {args.records} records, "
          f"latency {args.rate} rec/s for {args.seconds:.0f} s")
    print_table(["setup", "broker CPU s / M records", "p50 ms", "p99 ms", "p99 / off", "RSS MB",
                 "scrapes"], rows)
    print(f"\nRSS added by the console: {med('on', 'rss_mb') - med('off', 'rss_mb'):.1f} MB; "
          f"p99 with /metrics every 100 ms vs console on without scrapes: "
          f"{(med('scrape', 'p99_ms') / med('on', 'p99_ms') - 1) * 100:+.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
