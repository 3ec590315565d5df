"""The streaming query of the kill test, run as its own process (driver + local executors).

    python tests/spark/eos_query.py BOOTSTRAP SRC DST CHECKPOINT ROWS_PER_BATCH

Reads SRC from earliest with ``maxOffsetsPerTrigger`` = ROWS_PER_BATCH, writes key and value to
DST through the exactly-once sink, ``trigger(availableNow=True)``: it processes everything there
is and exits 0. ``local[2,4]``: a task whose Python worker is killed is retried (up to 4
attempts) in the same query. A failed query (e.g. every attempt of a task killed) is restarted
from the checkpoint, at most 20 times. Prints ``started`` once the session is up.
"""

from __future__ import annotations

import sys


def main() -> int:
    bs, src, dst, ckpt, per_batch = sys.argv[1:6]
    from odradek.spark.session import local_session

    spark = local_session(master="local[2,4]", app_name="odradek-eos-kill")
    print("started", flush=True)
    for _ in range(20):
        q = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", per_batch)
            .load()
            .selectExpr("key", "value")
            .writeStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", dst)
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination()
        except Exception as exc:  # restart from the checkpoint
            print(f"query failed: {str(exc)[:200]}", flush=True)
            continue
        if q.exception() is None:
            print("done", flush=True)
            spark.stop()
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
