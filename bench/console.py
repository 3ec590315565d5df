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
  delivery latency (librdkafka's msg.latency()). In ``scrape`` the scraper alternates: it scrapes
  during even wall-clock seconds and rests during odd ones, and the p99 of records sent while
  scraping is compared with the p99 of those sent while resting - the same broker under the same
  machine load, which on a shared, noisy machine is the only fair comparison (p99 across separate
  broker processes varies 3x between identical runs here).

The request hook (the one hot-path call) is also timed alone: ns per call, times the Produce
requests per million records counted by the broker itself in the throughput phase.

Idle: broker CPU (% of one core) over 5 s with no clients, before the phases; in ``scrape`` the
scraper is already running then (the cost of /metrics every 100 ms by itself).

RSS: the broker's resident set after both phases (and, for ``on``/``scrape``, after every
console page was served once), ``off`` vs ``on``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from confluent_kafka import KafkaError, Producer

from common import console_broker, cpu_seconds, percentile, print_table

RECORD = os.urandom(100)
TOPIC = "bench-console"
GROUP = "bench-console-group"
PHASE_TIMEOUT = 120.0


def scraping_at(wall_s: float) -> bool:
    """Alternating mode: scrape during even seconds of the wall clock, rest during odd ones."""
    return int(wall_s) % 2 == 0


def _scraper(url: str, stop: Any, interval: float, counts: Any, alternate: bool = False) -> None:
    # a real Prometheus runs elsewhere: keep this process's own CPU out of the broker's way
    os.nice(19)
    n = 0
    errors = 0
    while not stop.is_set():
        t = time.monotonic()
        if alternate and not scraping_at(time.time()):
            time.sleep(0.01)
            continue
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                r.read()
            n += 1
        except OSError:
            errors += 1
        time.sleep(max(0.0, interval - (time.monotonic() - t)))
    counts.put((n, errors))


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


def latency(bootstrap: str, rate: int, seconds: float) -> tuple[float, float, int, float, float]:
    """p50, p99, count; and p99 of the records sent while an alternating scraper was active vs
    resting (records in the first 0.2 s of each second are left out of both)."""
    lats: list[float] = []
    active: list[float] = []
    resting: list[float] = []
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            ms = msg.latency() * 1000.0
            lats.append(ms)
            sent_s = msg.timestamp()[1] / 1000.0  # CreateTime, set by the client at produce()
            if sent_s % 1.0 >= 0.2:
                (active if scraping_at(sent_s) else resting).append(ms)

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
    return (percentile(lats, 50), percentile(lats, 99), len(lats),
            percentile(active, 99) if active else 0.0, percentile(resting, 99) if resting else 0.0)


def hook_cost_ns(calls: int = 1_000_000) -> float:
    """Nanoseconds per BrokerMetrics.request_done call (plus the two perf_counter calls the
    connection makes around the handler)."""
    from odradek.metrics.broker import BrokerMetrics

    m = BrokerMetrics()
    pc = time.perf_counter
    t0 = pc()
    for i in range(calls):
        started = pc()
        m.request_done(0, 9, pc() - started, 180 + (i & 7))
    return (pc() - t0) / calls * 1e9


def produce_requests(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))


def one_run(setup: str, args: argparse.Namespace) -> dict[str, float]:
    with console_broker(TOPIC, GROUP, console=setup != "off") as broker:
        bootstrap = broker.bootstrap_servers
        url = broker.console_url() if setup != "off" else None
        stop = mp.Event()
        counts: Any = mp.Queue()
        scraper = None
        if setup == "scrape":
            assert url is not None
            scraper = mp.Process(target=_scraper, args=(url, stop, 0.1, counts), daemon=True)
            scraper.start()
        scrapes = (0, 0)
        requests_per_m = 0.0
        # idle broker CPU for 5 s: with the scraper running (scrape) or without (off, on)
        time.sleep(1.0)
        cpu0 = cpu_seconds(broker.pid)
        time.sleep(5.0)
        idle_cpu_pct = (cpu_seconds(broker.pid) - cpu0) / 5.0 * 100
        try:
            req0 = produce_requests(url) if url is not None and setup == "on" else 0.0
            cpu = throughput(bootstrap, broker.pid, args.records)
            if url is not None and setup == "on":
                time.sleep(1.1)  # /metrics is rendered at most once per second
                requests_per_m = (produce_requests(url) - req0) / args.records * 1e6
            if scraper is not None:
                stop.set()
                scrapes = counts.get(timeout=30)
                scraper.join(10)
                stop.clear()
                scraper = mp.Process(target=_scraper, args=(url, stop, 0.1, counts, True), daemon=True)
                scraper.start()
            p50, p99, n, p99_active, p99_resting = latency(bootstrap, args.rate, args.seconds)
        finally:
            stop.set()
            if scraper is not None:
                more = counts.get(timeout=30)
                scrapes = (scrapes[0] + more[0], scrapes[1] + more[1])
                scraper.join(10)
        if url is not None:
            for path in ("/", "/topics", f"/topics/{TOPIC}", "/groups", f"/groups/{GROUP}",
                         f"/groups/{GROUP}/lag", f"/topics/{TOPIC}/messages?offset=0&limit=50",
                         "/metrics", "/static/htmx.min.js", "/static/uPlot.iife.min.js"):
                with urllib.request.urlopen(url + path, timeout=10) as r:
                    r.read()
        rss = psutil.Process(broker.pid).memory_info().rss / 2**20
        return {"cpu_s_per_m": cpu, "p50_ms": p50, "p99_ms": p99, "latency_n": n,
                "p99_scraping_ms": p99_active, "p99_resting_ms": p99_resting,
                "produce_requests_per_m": requests_per_m, "idle_cpu_pct": idle_cpu_pct,
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
            f"{med(setup, 'idle_cpu_pct'):.1f}",
        ])
    print()
    print(f"{args.runs} run(s) per setup, medians; throughput {args.records} records, "
          f"latency {args.rate} rec/s for {args.seconds:.0f} s")
    print_table(["setup", "broker CPU s / M records", "p50 ms", "p99 ms", "p99 / off", "RSS MB",
                 "scrapes", "idle CPU % (5 s)"], rows)
    ratios = [r["p99_scraping_ms"] / r["p99_resting_ms"] for r in results["scrape"] if r["p99_resting_ms"]]
    print(f"\nRSS added by the console: {med('on', 'rss_mb') - med('off', 'rss_mb'):.1f} MB")
    print("produce p99 while /metrics is scraped every 100 ms vs in the same run's resting "
          "seconds (alternating each second, same broker, same load): "
          + ", ".join(f"{r['p99_scraping_ms']:.2f}/{r['p99_resting_ms']:.2f} ms" for r in results["scrape"])
          + f"; median ratio {statistics.median(ratios):.3f}" if ratios else "")
    control = [r["p99_scraping_ms"] / r["p99_resting_ms"] for s_ in ("off", "on") for r in results[s_]
               if r["p99_resting_ms"]]
    if control:
        print("the same split without any scraper (off and on runs: the machine's noise floor): "
              + ", ".join(f"{c:.2f}" for c in control) + f"; median {statistics.median(control):.3f}")
    ns = hook_cost_ns()
    per_m = med("on", "produce_requests_per_m")
    print(f"request hook: {ns:.0f} ns per request (BrokerMetrics.request_done + 2 perf_counter); "
          f"{per_m:,.0f} Produce requests per million records in the throughput phase -> "
          f"{ns * per_m / 1e9:.4f} s of broker CPU per million records "
          f"(broker total: {med('on', 'cpu_s_per_m'):.3f} s with the console on, "
          f"{med('off', 'cpu_s_per_m'):.3f} s off)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
