"""Exactly-once Spark sink vs the at-least-once sink: rows/s of the same streaming query.

    .venv/bin/python bench/spark_eos.py                       # 1,000,000 rows, 10 micro-batches
    .venv/bin/python bench/spark_eos.py --records 200000 --batches 4

One broker process and one local[2] SparkSession. The source topic (2 partitions, 100-byte
values) is filled once; each run is a fresh streaming query (new checkpoint, new output topic
of 3 partitions) with ``trigger(availableNow=True)`` and ``maxOffsetsPerTrigger`` =
records / batches, writing through ``format("odradek")`` with ``exactlyOnce`` true
(transactions, two-phase commit) or false (idempotent producer, at-least-once). After one
uncounted warm-up run of each, runs alternate between the two modes, --repeat times each; the
median is reported with the ratio.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from odradek.client import Admin, NewTopic, Producer
    from odradek.spark.session import local_session
    from odradek.testing.process import BrokerProcess

    broker = BrokerProcess({"listeners": "PLAINTEXT://127.0.0.1:0", "transaction.state.log.num.partitions": 3})
    broker.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-eos-"))
    try:
        bs = str(broker.bootstrap_servers)
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.create_topics([NewTopic("eos-src", 2)])
        with Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 262144}) as p:
            p.send_batch("eos-src", [b"x" * 100] * args.records, partitions=[i % 2 for i in range(args.records)])
            p.flush()
        spark = local_session()
        results: dict[str, list[float]] = {"exactly-once": [], "at-least-once": []}
        n = 0
        # one uncounted run of each mode first: JVM, Python workers and the transaction
        # coordinator's partitions warm up
        for rep in range(args.repeat + 1):
            for mode in results:
                n += 1
                out = f"eos-out-{n}"
                with Admin({"bootstrap.servers": bs}) as admin:
                    admin.create_topics([NewTopic(out, 3)])
                t = time.perf_counter()
                q = (
                    spark.readStream.format("odradek")
                    .option("kafka.bootstrap.servers", bs)
                    .option("subscribe", "eos-src")
                    .option("startingOffsets", "earliest")
                    .option("maxOffsetsPerTrigger", str(args.records // args.batches))
                    .load()
                    .selectExpr("key", "value")
                    .writeStream.format("odradek")
                    .option("kafka.bootstrap.servers", bs)
                    .option("topic", out)
                    .option("exactlyOnce", "true" if mode == "exactly-once" else "false")
                    .option("checkpointLocation", str(tmp / out))
                    .trigger(availableNow=True)
                    .start()
                )
                q.awaitTermination()
                dt = time.perf_counter() - t
                rows = sum(p["numInputRows"] for p in q.recentProgress)
                assert rows == args.records, rows
                if rep:
                    results[mode].append(rows / dt)
                print(f"{mode}: {rows / dt:,.0f} rows/s ({dt:.1f} s){'' if rep else ' (warm-up)'}", flush=True)
        med = {m: statistics.median(v) for m, v in results.items()}
        print(json.dumps({"records": args.records, "batches": args.batches, "median_rows_per_s": med,
                          "ratio_eos_over_alo": med["exactly-once"] / med["at-least-once"]}, indent=1))
        spark.stop()
    finally:
        broker.close()


if __name__ == "__main__":
    main()
