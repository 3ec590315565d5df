"""Does scraping /metrics every 100 ms change the produce p99? Interleaved A/B rounds.

    .venv/bin/python bench/console_scrape.py                       # 2 brokers x 30 pairs of 4 s rounds
    .venv/bin/python bench/console_scrape.py --brokers 1 --pairs 6 --round 2   # a quick look

One ``odradek broker`` process at a time (console on, ``http.listeners=http://127.0.0.1:0``), a
confluent-kafka producer in this process sending ``--rate`` records/s of 100 bytes (acks=1,
linger.ms=0, one partition; what is due is sent every ``--tick-ms``) for the whole run, and a scraper process that GETs ``/metrics`` every
100 ms *only during S rounds*. The run is a sequence of pairs of rounds, each pair S then N or
N then S (random order, seeded), ``--round`` seconds each:

* S: the scraper is on (a Prometheus scraping 100x faster than the usual 10-15 s);
* N: the scraper is off.

Latency is librdkafka's per-record delivery latency (``msg.latency()``); a record belongs to the
round in which it was produced (its CreateTime), the first 0.3 s of every round left out (the
switch). Per round: p99. Per pair: p99(S) / p99(N) - the same broker, the same load, seconds
apart, so slow drifts of this shared machine cancel. The noise floor is the same ratio between
the N rounds of consecutive pairs (N / N: no difference but time), reported next to it.

``--nice -20`` (as root) runs the broker and this producer process at a higher priority than the
rest of the machine, so that a shared, loaded machine's other work disturbs the rounds less.

Reported, per broker and over all: median p99 of S and N rounds, the median and quartiles of the
per-pair ratios, the pooled p99 of all S records vs all N records, and the broker CPU (% of a
core) in S and N rounds with the CPU per scrape. The scraper runs at nice 19, as a real
Prometheus would run elsewhere.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import KafkaError, Producer

from common import console_broker, cpu_seconds, percentile, print_table

RECORD = os.urandom(100)
TOPIC = "bench-scrape"
GROUP = "bench-scrape-group"
SETTLE_S = 0.3


def _scraper(url: str, on: Any, stop: Any, interval: float, count: Any) -> None:
    os.nice(19)
    while not stop.is_set():
        if not on.is_set():
            on.wait(0.05)
            continue
        t = time.monotonic()
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                r.read()
            with count.get_lock():
                count.value += 1
        except OSError:
            pass
        time.sleep(max(0.0, interval - (time.monotonic() - t)))


@dataclass
class Round:
    kind: str  # "S" or "N"
    start_ms: float
    end_ms: float
    cpu_s: float = 0.0
    scrapes: int = 0
    lats: list[float] = field(default_factory=list)

    @property
    def p99(self) -> float:
        return percentile(self.lats, 99) if self.lats else float("nan")


def one_broker(args: argparse.Namespace, seed: int) -> list[tuple[Round, Round]]:
    rnd = random.Random(seed)
    with console_broker(TOPIC, GROUP) as broker:
        bootstrap = broker.bootstrap_servers
        url = broker.console_url()
        if args.nice:
            os.setpriority(os.PRIO_PROCESS, broker.pid, args.nice)
        on, stop = mp.Event(), mp.Event()
        count: Any = mp.Value("i", 0)
        scraper = mp.Process(target=_scraper, args=(url, on, stop, 0.1, count), daemon=True)
        scraper.start()
        producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
        samples: list[tuple[float, float]] = []  # (CreateTime ms, latency ms)
        errors: list[Any] = []

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                samples.append((msg.timestamp()[1], msg.latency() * 1000.0))

        producer.produce(TOPIC, RECORD)
        producer.flush(30)
        plan = [("S", "N") if rnd.random() < 0.5 else ("N", "S") for _ in range(args.pairs)]
        rounds: list[Round] = []
        start = time.monotonic()
        sent = 0

        def run_round(kind: str) -> Round:
            nonlocal sent
            (on.set if kind == "S" else on.clear)()
            scrapes0 = count.value
            cpu0 = cpu_seconds(broker.pid)
            r = Round(kind, time.time() * 1000 + SETTLE_S * 1000, 0.0)
            t_end = time.monotonic() + args.round
            tick = args.tick_ms / 1000.0
            while time.monotonic() < t_end:
                due = int((time.monotonic() - start) * args.rate)
                while sent < due:
                    producer.produce(TOPIC, RECORD, on_delivery=on_delivery)
                    sent += 1
                # delivery reports while waiting for the next tick (no busy loop: on a loaded
                # machine this process's CPU would be taken from the broker)
                producer.poll(tick)
            r.end_ms = time.time() * 1000
            r.cpu_s = cpu_seconds(broker.pid) - cpu0
            r.scrapes = count.value - scrapes0
            return r

        # one warm-up pair, not counted
        run_round("S")
        run_round("N")
        for a, b in plan:
            rounds.append(run_round(a))
            rounds.append(run_round(b))
        on.clear()
        producer.flush(30)
        stop.set()
        scraper.join(10)
        if errors:
            raise RuntimeError(f"produce errors: {errors[:3]}")
        for ts, lat in samples:
            for r in rounds:
                if r.start_ms <= ts < r.end_ms:
                    r.lats.append(lat)
                    break
    pairs = []
    for i in range(0, len(rounds), 2):
        x, y = rounds[i], rounds[i + 1]
        pairs.append((x, y) if x.kind == "S" else (y, x))
    return pairs


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], statistics.median(values), q[2]


def median_ci(values: list[float], rounds: int = 2000, seed: int = 1) -> tuple[float, float]:
    """95 % bootstrap interval of the median (resampling the pairs)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(values, k=len(values))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def report(label: str, pairs: list[tuple[Round, Round]], seconds: float) -> list[str]:
    ratios = [s.p99 / n.p99 for s, n in pairs if s.lats and n.lats]
    lo, hi = median_ci(ratios)
    floor = [pairs[i][1].p99 / pairs[i + 1][1].p99 for i in range(len(pairs) - 1)]
    s_all = [x for s, _ in pairs for x in s.lats]
    n_all = [x for _, n in pairs for x in n.lats]
    q1, med, q3 = quartiles(ratios)
    f1, fmed, f3 = quartiles(floor)
    s_cpu = sum(s.cpu_s for s, _ in pairs) / (len(pairs) * seconds) * 100
    n_cpu = sum(n.cpu_s for _, n in pairs) / (len(pairs) * seconds) * 100
    scrapes = sum(s.scrapes for s, _ in pairs)
    extra_cpu_ms = (sum(s.cpu_s for s, _ in pairs) - sum(n.cpu_s for _, n in pairs)) * 1000
    return [
        label,
        str(len(pairs)),
        f"{statistics.median(s.p99 for s, _ in pairs):.2f}",
        f"{statistics.median(n.p99 for _, n in pairs):.2f}",
        f"{med:.3f} (IQR {q1:.2f}-{q3:.2f}; 95 % CI {lo:.2f}-{hi:.2f})",
        f"{fmed:.3f} ({f1:.2f}-{f3:.2f})",
        f"{percentile(s_all, 99):.2f} / {percentile(n_all, 99):.2f} = "
        f"{percentile(s_all, 99) / percentile(n_all, 99):.3f}",
        f"{percentile(s_all, 50):.2f} / {percentile(n_all, 50):.2f}",
        f"{s_cpu:.1f} / {n_cpu:.1f}",
        f"{extra_cpu_ms / max(scrapes, 1):.2f}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=2, help="broker processes, one after another")
    ap.add_argument("--pairs", type=int, default=30, help="S/N pairs of rounds per broker")
    ap.add_argument("--round", type=float, default=4.0, help="seconds per round")
    ap.add_argument("--rate", type=int, default=2000, help="records per second")
    ap.add_argument("--tick-ms", type=float, default=2.0,
                    help="the producer sends what is due every tick (records per request ~ "
                         "rate x tick)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--nice", type=int, default=0,
                    help="niceness of the broker and the producer (< 0 needs root)")
    args = ap.parse_args(argv)
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    rows = []
    everything: list[tuple[Round, Round]] = []
    for b in range(args.brokers):
        pairs = one_broker(args, args.seed + b)
        everything += pairs
        rows.append(report(f"broker {b + 1}", pairs, args.round - SETTLE_S))
        print("  ".join(rows[-1]), flush=True)
    if args.brokers > 1:
        rows.append(report("all", everything, args.round - SETTLE_S))
    print()
    print(f"{args.pairs} pairs of {args.round:.0f} s rounds per broker, {args.rate} records/s "
          f"of 100 B, acks=1, linger.ms=0; S = /metrics every 100 ms, N = no scraping")
    print_table(["", "pairs", "p99 S ms (median of rounds)", "p99 N ms", "p99 S/N per pair: median (IQR)",
                 "noise floor N/N (IQR)", "pooled p99 S / N ms", "pooled p50 S / N ms",
                 "broker CPU % S / N", "broker CPU ms per scrape"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
