"""Replication lag of a three-broker cluster under a steady produce rate.

    .venv/bin/python bench/replication_lag.py [--rate 50000] [--seconds 20]

One partition with RF 3 (min.insync.replicas 2) on three local ``odradek broker`` processes on
Debian's ZooKeeper; a confluent-kafka producer (acks=1, so the producer is not held back by the
followers, 100-byte records, linger 5 ms) sends at ``--rate`` records/s (or as fast as it can,
if that is less) for ``--seconds``. A sampler reads the three replicas' segment files every
``--sample-ms`` ms and notes when each one's log end offset got where. The lag of a leader
sample (time t, log end L) is the time until the slowest follower's log end reached L: "leader
log end minus slowest ISR follower, in ms". Reported: the rate reached, and the p50/p99/max of
that lag (resolution: the sample interval), and of the lag in records.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from common import LogEnd, zookeeper_cluster

VALUE = b"x" * 100
TOPIC = "lag"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--sample-ms", type=float, default=5)
    args = ap.parse_args()
    with zookeeper_cluster(3, "odradek-bench-lag-") as (c, _tmp):
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        new = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        for f in admin.create_topics([new], request_timeout=60).values():
            f.result(timeout=60)
        md = c.wait_metadata(
            lambda md: (
                bool(c.partitions(md, TOPIC)) and len(c.partitions(md, TOPIC)[0].isr_nodes) == 3
            )
        )
        leader = c.partitions(md, TOPIC)[0].leader_id
        ends = {b: LogEnd(c.brokers[b].data_dir / f"{TOPIC}-0") for b in c.brokers}
        samples: dict[int, list[tuple[float, int]]] = {b: [] for b in c.brokers}
        stop = threading.Event()

        def sampler() -> None:
            while not stop.is_set():
                for b, end in ends.items():
                    samples[b].append((time.monotonic(), end.read()))
                stop.wait(args.sample_ms / 1000)

        producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "1", "linger.ms": 5})
        producer.list_topics(TOPIC, timeout=30)
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        started = time.monotonic()
        sent = 0
        while (now := time.monotonic()) - started < args.seconds:
            due = int((now - started) * args.rate)
            while sent < due:
                try:
                    producer.produce(TOPIC, VALUE, partition=0)
                    sent += 1
                except BufferError:
                    producer.poll(0.001)
            producer.poll(0)
            time.sleep(0.001)
        assert producer.flush(120) == 0
        elapsed = time.monotonic() - started
        # let the followers finish, then stop sampling
        deadline = time.monotonic() + 60
        while min(e.end for e in ends.values()) < ends[leader].end and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        thread.join()
        followers = [b for b in c.brokers if b != leader]
        lag_ms: list[float] = []
        lag_records: list[int] = []
        for t, end in samples[leader]:
            if end == 0:
                continue
            worst = 0.0
            worst_records = 0
            for f in followers:
                times = [s[0] for s in samples[f]]
                offsets = [s[1] for s in samples[f]]
                i = bisect.bisect_left(offsets, end)
                reached = times[i] if i < len(times) else float("inf")
                worst = max(worst, max(0.0, reached - t))
                j = bisect.bisect_right(times, t) - 1
                worst_records = max(worst_records, end - (offsets[j] if j >= 0 else 0))
            lag_ms.append(worst * 1000)
            lag_records.append(worst_records)
        print(
            f"rate asked {args.rate:,} records/s, reached {sent / elapsed:,.0f} records/s "
            f"({sent:,} records in {elapsed:.1f} s); {len(lag_ms)} leader samples "
            f"every {args.sample_ms} ms"
        )
        print(
            f"replication lag (slowest follower), ms: p50 {statistics.median(lag_ms):.0f}, "
            f"p99 {percentile(lag_ms, 0.99):.0f}, max {max(lag_ms):.0f}"
        )
        print(
            f"replication lag (slowest follower), records: p50 "
            f"{statistics.median(lag_records):.0f}, p99 {percentile(lag_records, 0.99):.0f}, "
            f"max {max(lag_records)}"
        )


if __name__ == "__main__":
    main()
