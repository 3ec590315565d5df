"""The odradek Spark data source against a real broker: batch and streaming reads and writes.

One SparkSession and one broker for the whole module (start-up is the expensive part).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from odradek.testing.helpers import create_topic, wait_until

from .conftest import BROKER_SETTINGS as BROKER_SETTINGS
from .conftest import latest_offsets, produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

# Record timestamps T0 + i seconds: recent, or retention (7 days) would delete them.
T0 = (int(time.time()) - 3600) * 1000


def read(spark: Any, bs: str, **options: str) -> Any:
    r = spark.read.format("odradek").option("kafka.bootstrap.servers", bs)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


@pytest.fixture(scope="module")
def bs(spark_broker: Any) -> str:
    return str(spark_broker.bootstrap_servers)


@pytest.fixture(scope="module")
def events(bs: str) -> str:
    """Topic 'events': 3 partitions, 100 records each, keys, headers, explicit timestamps."""
    create_topic(bs, "events", 3)
    produce(
        bs,
        "events",
        (
            (
                i % 3,
                f"k{i}".encode(),
                f"v{i}".encode(),
                [("h1", f"x{i}".encode()), ("h2", b"")],
                T0 + i * 1000,
            )
            for i in range(300)
        ),
    )
    return "events"


def test_batch_read_every_record_once_with_exact_schema(spark: Any, bs: str, events: str) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    df = read(spark, bs, subscribe=events, includeHeaders="true")
    expected = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            ),
        ]
    )
    assert [(f.name, f.dataType) for f in df.schema.fields] == [
        (f.name, f.dataType) for f in expected.fields
    ]
    rows = df.collect()
    assert len(rows) == 300
    assert len({(r.partition, r.offset) for r in rows}) == 300
    for r in rows:
        i = int(r.value.decode()[1:])
        assert r.key == f"k{i}".encode() and r.topic == "events" and r.partition == i % 3
        assert r.offset == i // 3
        assert int(r.timestamp.timestamp() * 1000) == T0 + i * 1000
        assert r.timestampType == 0
        assert [(h.key, bytes(h.value)) for h in r.headers] == [
            ("h1", f"x{i}".encode()),
            ("h2", b""),
        ]
    # without includeHeaders: Kafka's seven columns
    assert read(spark, bs, subscribe=events).columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]


def test_batch_offsets_timestamps_and_min_partitions(spark: Any, bs: str, events: str) -> None:
    df = read(
        spark,
        bs,
        subscribe=events,
        startingOffsets=json.dumps({"events": {"0": 10, "1": -2, "2": 95}}),
        endingOffsets=json.dumps({"events": {"0": 20, "1": 5, "2": -1}}),
    )
    got = Counter(r.partition for r in df.select("partition").collect())
    assert got == {0: 10, 1: 5, 2: 5}
    # startingTimestamp: records with timestamp >= T0 + 150 s, i.e. i >= 150, on every partition
    df = read(spark, bs, subscribe=events, startingTimestamp=str(T0 + 150_000))
    assert sorted(int(r.value.decode()[1:]) for r in df.select("value").collect()) == list(
        range(150, 300)
    )
    # endingTimestamp and startingOffsetsByTimestamp
    df = read(
        spark,
        bs,
        subscribe=events,
        startingOffsetsByTimestamp=json.dumps({"events": {"0": T0, "1": T0, "2": T0 + 280_000}}),
        endingTimestamp=str(T0 + 30_000),
    )
    # partition 2 starts after it ends: an option error naming the option
    with pytest.raises(Exception, match="startingOffsets"):
        df.collect()
    # consumer-only client settings reach the reads, not the Admin used for ListOffsets
    df = read(
        spark,
        bs,
        subscribe=events,
        endingTimestamp=str(T0 + 30_000),
        **{"kafka.fetch.max.bytes": "1048576", "kafka.client.id": "spark-test"},
    )
    assert df.count() == 30
    df = read(spark, bs, assign=json.dumps({"events": [1]}), minPartitions="7")
    assert df.rdd.getNumPartitions() == 7 and df.count() == 100


def test_invalid_options_fail_at_load_naming_the_option(spark: Any, bs: str) -> None:
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, bs, subscribe="events", startingOffsets="yesterday")
    with pytest.raises(Exception, match="subscribe"):
        read(spark, bs)
    with pytest.raises(Exception, match=r"kafka\.auto\.offset\.reset"):
        read(spark, bs, subscribe="events", **{"kafka.auto.offset.reset": "earliest"})
    with pytest.raises(Exception, match="endingOffsets"):
        (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "events")
            .option("endingOffsets", "latest")
            .load()
            .writeStream.format("noop")
            .start()
            .awaitTermination(30)
        )


def test_batch_write_roundtrip(spark: Any, bs: str) -> None:
    create_topic(bs, "written", 2)
    src = spark.createDataFrame(
        [(f"k{i}", f"v{i}".encode(), i % 2, [("h", f"{i}".encode())]) for i in range(500)],
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    src.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bs).option(
        "topic", "written"
    ).save()
    back = read(spark, bs, subscribe="written", includeHeaders="true").collect()
    assert len(back) == 500
    for r in back:
        i = int(r.value.decode()[1:])
        assert r.key == f"k{i}".encode() and r.partition == i % 2
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("h", f"{i}".encode())]
    # values only (string column) with the topic option: the sink's fast path
    spark.createDataFrame([(f"s{i}",) for i in range(300)], "value string").write.format(
        "odradek"
    ).mode("append").option("kafka.bootstrap.servers", bs).option("topic", "written").save()
    back = read(spark, bs, subscribe="written").select("key", "value").collect()
    assert sorted(r.value for r in back if r.key is None) == sorted(
        f"s{i}".encode() for i in range(300)
    )
    with pytest.raises(Exception, match="value"):
        spark.createDataFrame([("x",)], "key string").write.format("odradek").mode("append").option(
            "kafka.bootstrap.servers", bs
        ).option("topic", "written").save()


def _parquet_query(spark: Any, bs: str, topic: str, out: Path, **options: str) -> Any:
    r = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        r = r.option(k, v)
    return (
        r.load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )


def test_streaming_available_now_parquet_exactly_once_across_runs(
    spark: Any, bs: str, tmp_path: Path
) -> None:
    create_topic(bs, "stream-in", 2)
    produce(bs, "stream-in", ((i % 2, None, f"a{i}".encode(), None, None) for i in range(230)))
    q = _parquet_query(spark, bs, "stream-in", tmp_path, maxOffsetsPerTrigger="50")
    q.awaitTermination(120)
    assert q.exception() is None
    sizes = [p["numInputRows"] for p in q.recentProgress]
    assert sum(sizes) == 230 and max(sizes) <= 50 and len([s for s in sizes if s]) >= 5
    # more records, then a rerun from the same checkpoint
    produce(bs, "stream-in", ((i % 2, None, f"b{i}".encode(), None, None) for i in range(70)))
    q = _parquet_query(spark, bs, "stream-in", tmp_path, maxOffsetsPerTrigger="50")
    q.awaitTermination(120)
    sizes2 = [p["numInputRows"] for p in q.recentProgress]
    assert sum(sizes2) == 70 and max(sizes2) <= 50
    # a rerun with nothing new reads nothing
    q = _parquet_query(spark, bs, "stream-in", tmp_path)
    q.awaitTermination(120)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 0
    rows = spark.read.parquet(str(tmp_path / "data")).collect()
    assert len(rows) == 300
    assert len({(r.partition, r.offset) for r in rows}) == 300
    assert {r.value for r in rows} == {f"a{i}".encode() for i in range(230)} | {
        f"b{i}".encode() for i in range(70)
    }


def test_new_partitions_and_pattern_topics_are_picked_up(
    spark: Any, bs: str, tmp_path: Path
) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    create_topic(bs, "pat-1", 1)
    produce(bs, "pat-1", ((0, None, f"p1-{i}".encode(), None, None) for i in range(10)))

    def query() -> Any:
        return (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribePattern", "pat-.*")
            .option("startingOffsets", "earliest")
            .load()
            .select("topic", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "data"))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )

    q = query()
    q.awaitTermination(120)
    create_topic(bs, "pat-2", 2)
    produce(bs, "pat-2", ((i % 2, None, b"x", None, None) for i in range(20)))
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions("pat-1", 2)])["pat-1"].result(10)
    produce(bs, "pat-1", ((1, None, b"y", None, None) for i in range(5)))
    q = query()
    q.awaitTermination(120)
    assert q.exception() is None
    rows = spark.read.parquet(str(tmp_path / "data")).collect()
    got = Counter((r.topic, r.partition) for r in rows)
    assert got == {("pat-1", 0): 10, ("pat-1", 1): 5, ("pat-2", 0): 10, ("pat-2", 1): 10}


def _sink_query(spark: Any, bs: str, src: str, dst: str, ckpt: Path) -> Any:
    return (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("kafka.linger.ms", "5")  # a producer-only key: not passed to marker reads
        .option("topic", dst)
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )


def _run_until_done(
    spark: Any, bs: str, src: str, dst: str, ckpt: Path, runs: int = 4
) -> list[str]:
    """Run the query, restarting after failures; returns the failures seen."""
    failures = []
    for _ in range(runs):
        q = _sink_query(spark, bs, src, dst, ckpt)
        try:
            if not q.awaitTermination(300):
                q.stop()
                raise AssertionError("query still running after 300 s")
        except AssertionError:
            raise
        except Exception as exc:
            failures.append(str(exc))
            continue
        if q.exception() is None:
            return failures
    raise AssertionError(f"query did not finish: {failures}")


def test_streaming_sink_replay_after_commit_failures_is_exactly_once(
    spark: Any, bs: str, tmp_path: Path, faults_dir: Path
) -> None:
    create_topic(bs, "sink-src", 2)
    create_topic(bs, "sink-dst", 3)
    produce(
        bs, "sink-src", ((i % 2, f"{i}".encode(), f"r{i}".encode(), None, None) for i in range(400))
    )
    # The driver fails in each phase of the two-phase commit, so Spark replays the batch:
    # batch 1 before its intent (the tasks' open transactions are aborted by the replay's
    # init_transactions and written again); batch 2 after its intent, before committing task
    # 1's transaction (task 0's is committed: the replay rolls both forward and writes nothing).
    (faults_dir / "commit-1").touch()
    (faults_dir / "commit-txn-2-1").touch()
    failures = _run_until_done(spark, bs, "sink-src", "sink-dst", tmp_path / "ckpt")
    assert len(failures) == 2 and all("injected fault" in f for f in failures)
    values = [r.value for r in read(spark, bs, subscribe="sink-dst").select("value").collect()]
    assert Counter(values) == Counter(f"r{i}".encode() for i in range(400))
    # read_uncommitted also sees the aborted attempts: batch 1's first (100 rows), and batch
    # 2's task 1 if Spark's abort() after the failed commit aborted it before the replay
    everything = read(spark, bs, subscribe="sink-dst", **{"kafka.isolation.level": "read_uncommitted"})
    assert everything.count() in (500, 550)


def test_streaming_sink_task_dying_after_its_flush_no_longer_duplicates(
    spark: Any, bs: str, tmp_path: Path, faults_dir: Path
) -> None:
    """The marker scheme's duplicate window (a task killed after its rows were acknowledged)
    is closed: those rows were in an open transaction, aborted when the batch is replayed."""
    create_topic(bs, "dup-src", 2)
    create_topic(bs, "dup-dst", 1)
    produce(bs, "dup-src", ((i % 2, None, f"d{i}".encode(), None, None) for i in range(400)))
    # Batch 0, task 1 (= partition 1's first 50 records: 100 per batch shared by 2 partitions)
    # dies after its rows were acknowledged.
    (faults_dir / "after-flush-0-1").touch()
    failures = _run_until_done(spark, bs, "dup-src", "dup-dst", tmp_path / "ckpt")
    assert len(failures) == 1 and "injected fault" in failures[0]
    rows = read(spark, bs, subscribe="dup-dst").select("value").collect()
    assert Counter(r.value for r in rows) == Counter(f"d{i}".encode() for i in range(400))


def test_fail_on_data_loss_both_ways(spark: Any, bs: str, tmp_path: Path) -> None:
    create_topic(bs, "lossy", 1, {"segment.bytes": "2048", "retention.ms": "3600000"})
    small = {"batch.num.messages": 5}
    produce(bs, "lossy", ((0, None, b"x" * 100, None, None) for _ in range(20)), **small)

    def query(fail: bool, ckpt: str) -> Any:
        return (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "lossy")
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", str(fail).lower())
            .load()
            .select("offset")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / ckpt / "data"))
            .option("checkpointLocation", str(tmp_path / ckpt / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )

    for name in ("strict", "lenient"):
        q = query(True, name)
        q.awaitTermination(120)
        assert q.exception() is None
    # more records, then retention deletes the old segments before the queries read them
    produce(bs, "lossy", ((0, None, b"y" * 100, None, None) for _ in range(40)), **small)
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(
        "topic", "lossy", set_config={"retention.ms": "1", "segment.bytes": "2048"}
    )
    admin.alter_configs([res])[res].result(10)
    wait_until(
        lambda: latest_offsets(bs, "lossy", 1)[0][0] > 20, 30, "retention to delete segments"
    )
    res = ConfigResource(
        "topic", "lossy", set_config={"retention.ms": "3600000", "segment.bytes": "2048"}
    )
    admin.alter_configs([res])[res].result(10)
    log_start = latest_offsets(bs, "lossy", 1)[0][0]
    produce(bs, "lossy", ((0, None, b"z" * 100, None, None) for _ in range(5)), **small)
    q = query(True, "strict")
    with pytest.raises(Exception, match="failOnDataLoss"):
        q.awaitTermination(120)
    q = query(False, "lenient")
    q.awaitTermination(120)
    assert q.exception() is None
    offsets = sorted(
        r.offset for r in spark.read.parquet(str(tmp_path / "lenient" / "data")).collect()
    )
    # 0..19 from the first run, then a gap (deleted unread), then everything still there
    assert offsets[:20] == list(range(20))
    assert offsets[20] > 20 and offsets[20] >= log_start
    assert offsets[20:] == list(range(offsets[20], 65))


def test_stream_reader_offsets_and_limits_against_the_broker(bs: str) -> None:
    """The stream reader driven directly (no Spark session): what Spark's micro-batch engine
    calls, in order, against a real broker."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from odradek.spark.options import parse_source_options
    from odradek.spark.source import OdradekStreamReader

    create_topic(bs, "limits", 2)
    produce(bs, "limits", ((i % 2, None, b"x", None, None) for i in range(30)))
    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": bs,
            "subscribe": "limits",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "10",
            "minOffsetsPerTrigger": "5",
            "maxTriggerDelay": "1h",
        },
        streaming=True,
    )
    r = OdradekStreamReader(opts)
    start = r.initialOffset()
    assert start == {"limits": {"0": 0, "1": 0}}
    assert r.getDefaultReadLimit() == ReadMaxRows(10)
    end = r.latestOffset(start, ReadMaxRows(10))
    assert end == {"limits": {"0": 5, "1": 5}}
    parts = r.partitions(start, end)
    assert sorted(p.value for p in parts) == [("limits", 0, 0, 5), ("limits", 1, 0, 5)]
    end = r.latestOffset(end, ReadAllAvailable())  # Trigger.Once-like: no limit
    assert end == {"limits": {"0": 15, "1": 15}}
    # minOffsetsPerTrigger: 3 new records < 5 -> no new batch (start returned as is)
    produce(bs, "limits", ((0, None, b"y", None, None) for _ in range(3)))
    assert r.latestOffset(end, ReadMaxRows(10)) == end
    produce(bs, "limits", ((1, None, b"y", None, None) for _ in range(3)))
    assert r.latestOffset(end, ReadMaxRows(10)) == {"limits": {"0": 18, "1": 18}}
    # availableNow: the target is fixed when it starts; min is ignored; max still applies
    r.prepareForTriggerAvailableNow()
    produce(bs, "limits", ((0, None, b"z", None, None) for _ in range(50)))
    a = r.latestOffset({"limits": {"0": 18, "1": 18}}, ReadMaxRows(10))
    assert a == {"limits": {"0": 18, "1": 18}}  # nothing below the target is left
    # a new partition is picked up between micro-batches and read from its earliest offset
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_partitions([NewPartitions("limits", 3)])["limits"].result(10)
    produce(bs, "limits", ((2, None, b"n", None, None) for _ in range(4)))
    r2 = OdradekStreamReader(opts)
    e = r2.latestOffset({"limits": {"0": 68, "1": 18}}, ReadAllAvailable())
    assert e == {"limits": {"0": 68, "1": 18, "2": 4}}
    assert [p.value for p in r2.partitions({"limits": {"0": 68, "1": 18}}, e)] == [
        ("limits", 2, 0, 4)
    ]
