"""Spark data source throughput: rows/s written to a topic, read from it into Spark's `noop`
sink, and — as the reference — read from Parquet files holding the same rows. The write's
floor: the same rows into a Python Arrow sink that only counts them (run first; it also warms up
the JVM and the Python workers).

    .venv/bin/python bench/spark.py                      # 10,000,000 records of 100 bytes
    .venv/bin/python bench/spark.py --records 1000000    # a smaller run

A broker process (odradek.testing.process.BrokerProcess, file storage in a temporary
directory) and a local[2] SparkSession share the machine. Each read is run --repeat times and
the best run is reported (the machine is shared and noisy). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _null_sink() -> Any:
    """A Python data source ``bench_null`` whose Arrow writer only counts rows."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class NullWriter(DataSourceArrowWriter):
        def write(self, iterator: Any) -> WriterCommitMessage:
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return WriterCommitMessage()

    class NullSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_null"

        def writer(self, schema: Any, overwrite: bool) -> NullWriter:
            return NullWriter()

    return NullSource


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4, help="topic partitions")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--max-rows-per-batch", type=int, help="source option maxRowsPerBatch")
    ap.add_argument("--bootstrap-servers", help="use a running broker instead of starting one")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()

    from odradek.client import Admin, NewTopic
    from odradek.spark.session import local_session

    work = Path(tempfile.mkdtemp(prefix="odradek-bench-spark-"))
    broker = None
    try:
        if args.bootstrap_servers:
            bs = args.bootstrap_servers
        else:
            from odradek.testing.process import BrokerProcess

            broker = BrokerProcess(
                {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(work / "broker")}
            )
            broker.start()
            bs = broker.bootstrap_servers
        topic = f"bench-{int(time.time())}"
        admin = Admin({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, args.partitions)])
        admin.close()

        spark = local_session(
            master=args.master,
            app_name="odradek-bench",
            conf={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2"},
        )
        from pyspark.sql import functions as F

        n = args.records
        pad = args.value_bytes
        rows = spark.range(0, n, 1, numPartitions=args.partitions).select(
            F.lpad(F.col("id").cast("string"), pad, "x").cast("binary").alias("value"),
        )
        # the Spark floor of a Python Arrow sink: the same rows into a writer that only counts
        # them (JVM row generation + Arrow transfer to the Python workers); it also warms the
        # JVM and starts the Python workers, so the odradek write below excludes that start-up
        spark.dataSource.register(_null_sink())
        floor_runs = [
            timed(lambda: rows.write.format("bench_null").mode("append").save())
            for _ in range(args.repeat)
        ]
        write_s = timed(
            lambda: (
                rows.write.format("odradek")
                .mode("append")
                .option("kafka.bootstrap.servers", bs)
                .option("topic", topic)
                .save()
            )
        )

        def topic_df() -> Any:
            r = (
                spark.read.format("odradek")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", topic)
            )
            if args.max_rows_per_batch:
                r = r.option("maxRowsPerBatch", str(args.max_rows_per_batch))
            return r.load()

        count = topic_df().count()
        assert count == n, f"topic holds {count} records, expected {n}"
        read_runs = [
            timed(lambda: topic_df().write.format("noop").mode("overwrite").save())
            for _ in range(args.repeat)
        ]
        parquet = work / "parquet"
        topic_df().write.parquet(str(parquet))
        parquet_runs = [
            timed(
                lambda: (
                    spark.read.parquet(str(parquet)).write.format("noop").mode("overwrite").save()
                )
            )
            for _ in range(args.repeat)
        ]
        result = {
            "records": n,
            "value_bytes": pad,
            "partitions": args.partitions,
            "master": args.master,
            "write_rows_per_s": round(n / write_s),
            "read_rows_per_s": round(n / min(read_runs)),
            "parquet_rows_per_s": round(n / min(parquet_runs)),
            "write_s": round(write_s, 2),
            "write_floor_rows_per_s": round(n / min(floor_runs)),
            "write_floor_s": [round(x, 2) for x in floor_runs],
            "read_s": [round(x, 2) for x in read_runs],
            "parquet_s": [round(x, 2) for x in parquet_runs],
            "cpus": os.cpu_count(),
        }
        result["read_vs_parquet"] = round(
            result["read_rows_per_s"] / result["parquet_rows_per_s"], 2
        )
        if args.json:
            print(json.dumps(result))
        else:
            print(
                f"records          {n:>12,} x {pad} B, {args.partitions} partitions, {args.master}"
            )
            print(f"write (odradek)  {result['write_rows_per_s']:>12,} rows/s  ({write_s:.1f} s)")
            print(
                f"write (floor)    {result['write_floor_rows_per_s']:>12,} rows/s  runs {result['write_floor_s']}"
            )
            print(
                f"read  (odradek)  {result['read_rows_per_s']:>12,} rows/s  runs {result['read_s']}"
            )
            print(
                f"read  (parquet)  {result['parquet_rows_per_s']:>12,} rows/s  runs {result['parquet_s']}"
            )
            print(f"read odradek / parquet = {result['read_vs_parquet']}")
        spark.stop()
    finally:
        if broker is not None:
            broker.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
