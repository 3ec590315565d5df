"""Spark typed Avro reads: rows/s of ``value.format avro`` (decoded by schema id into typed
columns) against reading the same rows as raw bytes, in the same run, into Spark's ``noop`` sink.

    .venv/bin/python bench/spark_avro.py                     # 1,000,000 records
    .venv/bin/python bench/spark_avro.py --records 200000    # a smaller run

A broker process serving the schema registry (port 0) and a local[2] SparkSession share the
machine. Half the records are written with schema version 1 and half with a compatible
version 2 (reads resolve both to version 2). The two reads alternate, --repeat times each; the
medians are reported (the machine is shared and noisy). Not a test.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

V1 = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
V2 = {
    **V1,
    "fields": [
        *V1["fields"],
        {"name": "score", "type": ["null", "double"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    ],
}


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def registry_url(broker: Any, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"schema registry listening on (http://\S+)", broker.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise TimeoutError("the broker did not log its registry's address")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2, help="topic partitions")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()

    import fastavro
    import pyarrow as pa

    from odradek.client import Admin, NewTopic, Producer
    from odradek.client.avro import SchemaRegistryClient
    from odradek.spark.session import local_session
    from odradek.testing.process import BrokerProcess

    work = Path(tempfile.mkdtemp(prefix="odradek-bench-spark-avro-"))
    broker = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "schema.registry.listeners": "http://127.0.0.1:0",
            "log.dirs": str(work / "broker"),
        },
        log_level="info",
    )
    broker.start()
    try:
        bs = broker.bootstrap_servers
        url = registry_url(broker)
        topic = "events"
        admin = Admin({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, args.partitions)])
        admin.close()
        registry = SchemaRegistryClient(url)
        ids = [registry.register(f"{topic}-value", json.dumps(s)) for s in (V1, V2)]
        parsed = [fastavro.parse_schema(s) for s in (V1, V2)]

        n = args.records
        t = time.perf_counter()
        with Producer({"bootstrap.servers": bs, "linger.ms": "20"}) as producer:
            chunk = 50_000
            for lo in range(0, n, chunk):
                values = []
                for i in range(lo, min(n, lo + chunk)):
                    v = i % 2
                    record: dict[str, Any] = {
                        "id": i,
                        "user": f"user-{i % 1000}",
                        "kind": "ABC"[i % 3],
                        "at": 1_700_000_000_000 + i,
                    }
                    if v:
                        record.update(score=i / 3, tags=["x", "y"][: i % 3])
                    buf = io.BytesIO()
                    buf.write(struct.pack(">bI", 0, ids[v]))
                    fastavro.schemaless_writer(buf, parsed[v], record)
                    values.append(buf.getvalue())
                producer.send_batch(topic, pa.array(values, type=pa.binary())).result(60)
            producer.flush()
        write_s = time.perf_counter() - t

        spark = local_session(
            master=args.master,
            app_name="odradek-bench-avro",
            conf={"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2"},
        )

        def frame(typed: bool) -> Any:
            r = (
                spark.read.format("odradek")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", topic)
            )
            if typed:
                r = r.option("value.format", "avro").option("schema.registry.url", url)
            return r.load()

        assert frame(False).count() == n
        typed_df = frame(True)
        assert typed_df.where("_corrupt_record is not null").count() == 0
        raw_runs: list[float] = []
        typed_runs: list[float] = []
        for _ in range(args.repeat):
            raw_runs.append(
                timed(lambda: frame(False).write.format("noop").mode("overwrite").save())
            )
            typed_runs.append(
                timed(lambda: frame(True).write.format("noop").mode("overwrite").save())
            )
        spark.stop()
        raw_med, typed_med = statistics.median(raw_runs), statistics.median(typed_runs)
        result = {
            "records": n,
            "partitions": args.partitions,
            "master": args.master,
            "write_s": round(write_s, 2),
            "raw_rows_per_s": round(n / raw_med),
            "typed_rows_per_s": round(n / typed_med),
            "typed_vs_raw": round(raw_med / typed_med, 3),
            "raw_s": [round(x, 2) for x in raw_runs],
            "typed_s": [round(x, 2) for x in typed_runs],
            "cpus": os.cpu_count(),
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(f"records        {n:>12,}, {args.partitions} partitions, {args.master}")
            print(
                f"read raw       {result['raw_rows_per_s']:>12,} rows/s (median) runs {result['raw_s']}"
            )
            print(
                f"read typed     {result['typed_rows_per_s']:>12,} rows/s (median) runs {result['typed_s']}"
            )
            print(f"typed / raw = {result['typed_vs_raw']}")
    finally:
        broker.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
