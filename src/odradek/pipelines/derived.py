"""Derived feed: page views per page per minute, from an activity topic to a derived topic.

Input (activity topic): values are JSON objects with at least ``"page"``; the event time is
``"ts"`` (ms since the epoch) when present, else the record timestamp. Records that are not
JSON or have no page are dropped.

Output (derived topic): one record per (page, window) once the watermark has passed the
window's end (append mode: each window is emitted once, final). Key = page (UTF-8), value =
JSON ``{"page": ..., "window_start": "<ISO-8601 UTC>", "window_end": ..., "window_start_ms":
..., "views": n}``, record timestamp = window end.

Events later than the watermark delay (default 1 minute) are dropped by Spark, as the
watermark promises. The sink is the odradek streaming sink (replay fence on by default), the
checkpoint holds source offsets and aggregation state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.pipelines._streaming import Trigger, with_client_options, with_trigger

__all__ = ["build_page_views_query", "page_views_frame"]

ACTIVITY_SCHEMA = "page string, user string, ts long"


def page_views_frame(df: Any, *, window: str = "1 minute", watermark: str = "1 minute") -> Any:
    """Aggregate a DataFrame with the odradek source schema into the derived topic's rows
    (columns key, value, timestamp... ready for the odradek sink)."""
    # lazy: pyspark is optional and slow to import
    from pyspark.sql import functions as F

    events = (
        df.select(
            F.from_json(F.col("value").cast("string"), ACTIVITY_SCHEMA).alias("e"),
            F.col("timestamp"),
        )
        .where(F.col("e.page").isNotNull())
        .select(
            F.col("e.page").alias("page"),
            F.coalesce(F.timestamp_millis(F.col("e.ts")), F.col("timestamp")).alias("event_time"),
        )
    )
    counts = (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("w"), F.col("page"))
        .agg(F.count(F.lit(1)).alias("views"))
    )
    fmt = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    return counts.select(
        F.col("page").cast("binary").alias("key"),
        F.to_json(
            F.struct(
                F.col("page"),
                F.date_format("w.start", fmt).alias("window_start"),
                F.date_format("w.end", fmt).alias("window_end"),
                F.unix_millis(F.col("w.start")).alias("window_start_ms"),
                F.col("views"),
            )
        ).alias("value"),
    )


def build_page_views_query(
    spark: Any,
    *,
    bootstrap_servers: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    window: str = "1 minute",
    watermark: str = "1 minute",
    trigger: Trigger = "available-now",
    interval: str = "10 seconds",
    starting_offsets: str = "earliest",
    client_options: Mapping[str, str] | None = None,
) -> Any:
    """Start the derived-feed query; returns the StreamingQuery."""
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", source_topic)
        .option("startingOffsets", starting_offsets)
    )
    reader = with_client_options(reader, client_options)
    frame = page_views_frame(reader.load(), window=window, watermark=watermark)
    writer = (
        frame.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", sink_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
    )
    writer = with_client_options(writer, client_options)
    return with_trigger(writer, trigger, interval).start()
