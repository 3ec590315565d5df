"""A Faust app for test_faust_table.py: sums the int values of topic "events" per key in the
table "counts" (changelog topic "restore-counts-changelog", compacted, tiny segments) and writes
the table to the JSON file $STATE every 0.3 s. Memory store: a restart restores the table from
the changelog alone."""

import json
import os

import faust

app = faust.App(
    "restore",
    broker=os.environ["BROKER"],
    store="memory://",
    web_enabled=False,
    topic_partitions=1,
    topic_replication_factor=1,
)
events = app.topic("events", key_type=str, value_type=int, partitions=1)
counts = app.Table(
    "counts",
    default=int,
    partitions=1,
    extra_topic_configs={
        "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0",
    },
)


@app.agent(events)
async def count(stream):
    async for key, value in stream.items():
        counts[key] += value


@app.timer(0.3)
async def dump():
    tmp = os.environ["STATE"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(counts.items()), f)
    os.replace(tmp, os.environ["STATE"])
