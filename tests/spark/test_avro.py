"""Avro by schema id in the odradek data source, against a real broker serving the schema
registry (``schema.registry.listeners`` on port 0): typed reads of records written with two
compatible schema versions (batch and streaming), PERMISSIVE / FAILFAST, the Avro sink (checked
with confluent-kafka's own AvroDeserializer), the warehouse's typed Parquet, a registry that is
down. One SparkSession and one broker for the module.

ODRADEK_SLOW=1 adds the 1,000,000-record read.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import socket
import struct
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from odradek.testing.helpers import create_topic
from odradek.testing.process import BrokerProcess

from .conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(110)]

BROKER_SETTINGS = {"num.partitions": 1, "schema.registry.listeners": "http://127.0.0.1:0"}

V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
V2 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": ["null", "double"], "default": None},
        {
            "name": "seen",
            "type": {"type": "long", "logicalType": "timestamp-millis"},
            "default": 0,
        },
        {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 0},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            "default": "\u0000",
        },
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    ],
}
_REGISTRY_RE = re.compile(r"schema registry listening on (http://\S+)")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def spark_broker() -> Iterator[BrokerProcess]:
    """A broker serving the registry; at INFO, so that it logs the registry's address."""
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            **BROKER_SETTINGS,
        },
        log_level="info",
    )
    process.start()
    try:
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def bs(spark_broker: Any) -> str:
    return str(spark_broker.bootstrap_servers)


@pytest.fixture(scope="module")
def url(spark_broker: Any) -> str:
    """The registry's URL, from the ``schema registry listening on <url>`` log line."""
    deadline = time.monotonic() + 30
    while True:
        m = _REGISTRY_RE.search(spark_broker.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        assert time.monotonic() < deadline, spark_broker.stderr_tail()
        time.sleep(0.05)


def register(url: str, subject: str, schema: Any) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})
    return int(client.register_schema(subject, Schema(json.dumps(schema), "AVRO")))


def framed(schema_id: int, parsed: Any, value: Any) -> bytes:
    import fastavro

    buf = io.BytesIO()
    buf.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buf, parsed, value)
    return buf.getvalue()


def v2_value(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"u{i}",
        "score": i / 4,
        "seen": EPOCH + dt.timedelta(milliseconds=1_700_000_000_000 + i),
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 300),
        "amount": Decimal(i % 100_000) / 100,
        "tags": [f"t{i % 3}"],
    }


def write_two_versions(bs: str, url: str, topic: str, n: int, partitions: int = 2) -> None:
    """``n`` records, even ``i`` with V1 and odd ``i`` with V2, round-robin over partitions."""
    import fastavro

    create_topic(bs, topic, partitions)
    id1 = register(url, f"{topic}-value", V1)
    id2 = register(url, f"{topic}-value", V2)
    p1, p2 = fastavro.parse_schema(V1), fastavro.parse_schema(V2)
    produce(
        bs,
        topic,
        (
            (
                i % partitions,
                None,
                framed(id1, p1, {"id": i, "name": f"u{i}"})
                if i % 2 == 0
                else framed(id2, p2, v2_value(i)),
                None,
                None,
            )
            for i in range(n)
        ),
        **{"linger.ms": 50, "batch.num.messages": 10_000},
    )


def read(spark: Any, bs: str, url: str, topic: str, **options: str) -> Any:
    r = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("value.format", "avro")
        .option("schema.registry.url", url)
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def check_typed_read(spark: Any, bs: str, url: str, topic: str, n: int) -> float:
    from pyspark.sql import functions as F

    df = read(spark, bs, url, topic)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,score:double,seen:timestamp,day:date,"
        "amount:decimal(9,2),tags:array<string>>"
    )
    assert df.columns[-1] == "_corrupt_record"
    t = time.perf_counter()
    row = df.agg(
        F.count("*").alias("n"),
        F.sum("value.id").alias("ids"),
        F.count("value.score").alias("scored"),
        F.sum(F.size("value.tags")).alias("tags"),
        F.count("_corrupt_record").alias("corrupt"),
        F.sum(F.when(F.col("value.name") == F.concat(F.lit("u"), F.col("value.id")), 1)).alias(
            "names"
        ),
        F.sum(F.when(F.col("value.seen") == F.timestamp_seconds(F.lit(0)), 1)).alias("epoch"),
    ).collect()[0]
    elapsed = time.perf_counter() - t
    odd = n // 2
    assert row.n == n and row.ids == n * (n - 1) // 2 and row.corrupt == 0
    assert row.scored == odd and row.tags == odd and row.names == n
    assert row.epoch == n - odd  # V1 records read with V2's default
    return elapsed


def test_typed_read_of_two_compatible_versions(spark: Any, bs: str, url: str) -> None:
    n = 20_000
    write_two_versions(bs, url, "users", n)
    check_typed_read(spark, bs, url, "users", n)
    rows = {
        r.value.id: r.value
        for r in read(spark, bs, url, "users").where("value.id in (6, 7)").collect()
    }
    six = rows[6].asDict()  # V1: V2's defaults
    assert six["name"] == "u6" and six["score"] is None and six["tags"] == []
    assert six["amount"] == Decimal("0.00") and six["day"] == dt.date(1970, 1, 1)
    seven = rows[7].asDict()
    assert seven["score"] == 1.75 and seven["amount"] == Decimal("0.07")
    assert seven["day"] == dt.date(2026, 1, 8) and seven["tags"] == ["t1"]

    # streaming, availableNow, the same records
    got: list[int] = []

    def collect(batch: Any, _batch_id: int) -> None:
        got.extend(r.id for r in batch.select("value.id").collect())

    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "users")
        .option("startingOffsets", "earliest")
        .option("value.format", "avro")
        .option("schema.registry.url", url)
        .option("mode", "FAILFAST")
        .load()
        .writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(90)
    assert q.exception() is None
    assert sorted(got) == list(range(n))


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.environ.get("ODRADEK_SLOW") != "1", reason="ODRADEK_SLOW=1 only")
def test_typed_read_of_a_million_records(spark: Any, bs: str, url: str) -> None:
    n = 1_000_000
    t = time.perf_counter()
    write_two_versions(bs, url, "users_1m", n)
    written = time.perf_counter() - t
    elapsed = check_typed_read(spark, bs, url, "users_1m", n)
    print(f"\n1M Avro records: written in {written:.1f} s, typed read+aggregate {elapsed:.1f} s")


@pytest.fixture(scope="module")
def mixed(bs: str, url: str) -> tuple[str, int]:
    """Topic 'mixed': good V1 records at even offsets 0..8, bad ones at 1 (no frame), 3 (an id
    the registry does not know), 5 (a truncated payload); returns (topic, V1's id)."""
    import fastavro

    create_topic(bs, "mixed", 1)
    sid = register(url, "mixed-value", V1)
    p1 = fastavro.parse_schema(V1)
    good = [framed(sid, p1, {"id": i, "name": f"u{i}"}) for i in range(10)]
    values = list(good)
    values[1] = b"plain text"
    values[3] = struct.pack(">bI", 0, 987654) + good[3][5:]
    values[5] = good[5][:6]
    produce(bs, "mixed", ((0, None, v, None, None) for v in values))
    return "mixed", sid


def test_permissive_puts_undecodable_records_in_corrupt_record(
    spark: Any, bs: str, url: str, mixed: tuple[str, int]
) -> None:
    topic, sid = mixed
    rows = read(spark, bs, url, topic).orderBy("offset").collect()
    assert len(rows) == 10
    for r in rows:
        if r.offset in (1, 3, 5):
            assert r.value is None
            assert f"{topic}/0/{r.offset}" in r._corrupt_record
        else:
            assert r._corrupt_record is None and r.value.id == r.offset
    assert "magic byte" in rows[1]._corrupt_record
    assert "987654" in rows[3]._corrupt_record
    assert f"schema id {sid}" in rows[5]._corrupt_record


def test_failfast_names_schema_id_and_position(
    spark: Any, bs: str, url: str, mixed: tuple[str, int]
) -> None:
    topic, sid = mixed
    df = read(spark, bs, url, topic, mode="FAILFAST", startingOffsets='{"mixed":{"0":4}}')
    assert "_corrupt_record" not in df.columns
    with pytest.raises(Exception) as info:
        df.collect()
    assert f"schema id {sid} at {topic}/0/5" in str(info.value)


def test_sink_round_trip_checked_by_confluent_deserializer(spark: Any, bs: str, url: str) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    create_topic(bs, "sunk", 1)
    df = spark.sql(
        "select struct(cast(id as bigint) as id, concat('n', id) as name, "
        "array(cast(id as int), 7) as nums, map('a', cast(id as int)) as attrs, "
        "timestamp_micros(1700000000000000 + id) as at, date_add(date'2026-01-01', "
        "cast(id as int)) as day, cast(id / 100 as decimal(10, 2)) as amount, "
        "if(id % 2 = 0, null, 'odd') as note) as value, cast(id as string) as key "
        "from range(200)"
    )
    (
        df.write.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", "sunk")
        .option("value.format", "avro")
        .option("schema.registry.url", url)
        .mode("append")
        .save()
    )
    # back through the source: the same rows
    back = read(spark, bs, url, "sunk").select("value").orderBy("value.id").collect()
    want = df.select("value").orderBy("value.id").collect()
    assert [r.value.asDict() for r in back] == [r.value.asDict() for r in want]

    # confluent-kafka's deserializer reads what the sink wrote
    de = AvroDeserializer(SchemaRegistryClient({"url": url}))
    c = Consumer({"bootstrap.servers": bs, "group.id": "oracle", "auto.offset.reset": "earliest"})
    c.subscribe(["sunk"])
    seen: dict[int, Any] = {}
    deadline = time.monotonic() + 30
    try:
        while len(seen) < 200 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            v = de(m.value(), SerializationContext("sunk", MessageField.VALUE))
            seen[v["id"]] = v
    finally:
        c.close()
    assert len(seen) == 200
    assert seen[3]["name"] == "n3" and seen[3]["nums"] == [3, 7] and seen[3]["attrs"] == {"a": 3}
    assert seen[3]["amount"] == Decimal("0.03") and seen[3]["day"] == dt.date(2026, 1, 4)
    assert seen[4]["note"] is None and seen[3]["note"] == "odd"


def test_warehouse_writes_typed_parquet(spark: Any, bs: str, url: str, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.dataset as ds

    from odradek.pipelines.warehouse import build_warehouse_query

    write_two_versions(bs, url, "wh", 500, partitions=1)
    out = tmp_path / "wh"
    q = build_warehouse_query(
        spark,
        bootstrap_servers=bs,
        output=out,
        subscribe="wh",
        value_format="avro",
        schema_registry_url=url,
    )
    q.awaitTermination(90)
    assert q.exception() is None
    table = ds.dataset(str(out / "topic=wh"), format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 500
    value = table.schema.field("value").type
    assert pa.types.is_struct(value)
    assert value.field("id").type == pa.int64() and pa.types.is_timestamp(value.field("seen").type)
    assert pa.types.is_decimal(value.field("amount").type)
    ids = sorted(v["id"] for v in table.column("value").to_pylist())
    assert ids == list(range(500))
    assert table.column("_corrupt_record").null_count == 500


def test_registry_down_fails_naming_the_url(spark: Any, bs: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = f"http://127.0.0.1:{port}"
    with pytest.raises(Exception) as info:
        read(spark, bs, down, "users").collect()
    assert down in str(info.value)


# -- pure: options and type mapping (no session, no broker) ----------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "value.format": "avro"}, "'schema.registry.url' is required"),
        ({"subscribe": "t", "value.format": "protobuf"}, "'value.format' must be 'raw' or 'avro'"),
        (
            {"subscribePattern": "t.*", "value.format": "avro", "schema.registry.url": "http://h"},
            "'value.subject' is required",
        ),
        ({"subscribe": "t", "mode": "FAILFAST"}, "'mode' needs"),
        ({"subscribe": "t", "value.subject": "s"}, "'value.subject' needs 'value.format' avro"),
        (
            {"subscribe": "t", "value.format": "avro", "schema.registry.url": "h:8081"},
            "must be an http(s) URL",
        ),
        (
            {
                "subscribe": "t",
                "value.format": "avro",
                "schema.registry.url": "http://h",
                "mode": "DROPMALFORMED",
            },
            "PERMISSIVE or FAILFAST",
        ),
    ],
)
def test_avro_option_errors_name_the_option(options: dict[str, str], message: str) -> None:
    from odradek.spark.options import OptionError, parse_source_options

    with pytest.raises(OptionError, match=re.escape(message)):
        parse_source_options({"kafka.bootstrap.servers": "h:1", **options}, streaming=False)


def test_avro_options_parsed() -> None:
    from odradek.spark.options import parse_sink_options, parse_source_options

    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "assign": '{"a":[0,1]}',
            "key.format": "AVRO",
            "value.format": "avro",
            "value.subject": "custom",
            "schema.registry.url": "http://h:8081/",
            "mode": "failfast",
        },
        streaming=False,
    )
    f = opts.formats
    assert f.avro_columns == ("key", "value") and f.registry_url == "http://h:8081"
    assert f.subject("key", ("a",)) == "a-key" and f.subject("value", ("a",)) == "custom"
    assert opts.mode == "FAILFAST"
    sink = parse_sink_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "value.format": "avro",
            "schema.registry.url": "http://h",
            "value.schema": "latest",
            "topic": "t",
        }
    )
    assert sink.formats.value_format == "avro" and sink.formats.value_schema == "latest"


def test_avro_to_spark_types_as_from_avro() -> None:
    from odradek.spark.avro import avro_spark_type

    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "b", "type": "boolean"},
            {"name": "i", "type": "int"},
            {"name": "f", "type": "float"},
            {"name": "raw", "type": "bytes"},
            {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 4}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "ltz", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
            {"name": "opt", "type": ["null", {"type": "array", "items": "double"}]},
        ],
    }
    assert avro_spark_type(json.dumps(schema)).simpleString() == (
        "struct<b:boolean,i:int,f:float,raw:binary,fx:binary,e:string,u:string,ts:timestamp,"
        "ltz:timestamp_ntz,tm:int,m:map<string,bigint>,opt:array<double>>"
    )


def test_spark_to_avro_as_to_avro() -> None:
    from pyspark.sql import types as T

    from odradek.spark.avro import spark_avro_schema

    dt_ = T.StructType(
        [
            T.StructField("id", T.LongType(), nullable=False),
            T.StructField("at", T.TimestampType()),
            T.StructField("inner", T.StructType([T.StructField("x", T.IntegerType(), False)])),
        ]
    )
    assert spark_avro_schema(dt_) == {
        "type": "record",
        "name": "topLevelRecord",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "at", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
            {
                "name": "inner",
                "type": [
                    {
                        "type": "record",
                        "name": "inner",
                        "namespace": "topLevelRecord",
                        "fields": [{"name": "x", "type": "int"}],
                    },
                    "null",
                ],
            },
        ],
    }
