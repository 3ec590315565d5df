"""Avro shapes in the data source's ``value.format avro``, read by real Spark: unions other
than [null, T] become Spark's from_avro struct (``member0``, ``member1``, ... one nullable field
per non-null branch), [int, long] a bigint; a top-level union value too; a subject whose schema
references named types of other subjects. One broker serving the registry, one SparkSession, a
few records."""

from __future__ import annotations

import io
import json
import re
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.testing.helpers import create_topic
from odradek.testing.process import BrokerProcess

from .conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.timeout(110)]

SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "u",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "either", "type": ["int", "string"]},
        {"name": "maybe", "type": ["null", "int", "string"]},
        {"name": "wide", "type": ["null", "int", "long"]},
        {
            "name": "shape",
            "type": [
                "null",
                {"type": "record", "name": "Circle", "fields": [{"name": "r", "type": "double"}]},
                {
                    "type": "record",
                    "name": "Square",
                    "fields": [{"name": "side", "type": "double"}],
                },
            ],
        },
    ],
}
TOP = ["string", "long", {"type": "array", "items": "int"}]
_REGISTRY_RE = re.compile(r"schema registry listening on (http://\S+)")


@pytest.fixture(scope="module")
def spark_broker() -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "num.partitions": 1,
            "schema.registry.listeners": "http://127.0.0.1:0",
        },
        log_level="info",
    )
    process.start()
    try:
        yield process
    finally:
        process.close()


def registry_url(process: BrokerProcess) -> str:
    deadline = time.monotonic() + 30
    while True:
        m = _REGISTRY_RE.search(process.stderr_tail(1 << 20))
        if m:
            return m.group(1)
        assert time.monotonic() < deadline, process.stderr_tail()
        time.sleep(0.05)


def write(bs: str, url: str, topic: str, schema: Any, values: list[Any]) -> None:
    """``values`` encoded by fastavro, framed with the id confluent-kafka's registry client
    registered."""
    import fastavro
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    schema_id = SchemaRegistryClient({"url": url}).register_schema(
        f"{topic}-value", Schema(json.dumps(schema), "AVRO")
    )
    parsed = fastavro.parse_schema(schema)
    framed = []
    for v in values:
        buf = io.BytesIO()
        buf.write(struct.pack(">bI", 0, schema_id))
        fastavro.schemaless_writer(buf, parsed, v)
        framed.append(buf.getvalue())
    create_topic(bs, topic, 1)
    produce(bs, topic, ((0, None, f, None, None) for f in framed))


def test_unions_read_as_from_avro_structs(spark: Any, spark_broker: BrokerProcess) -> None:
    bs, url = spark_broker.bootstrap_servers, registry_url(spark_broker)
    write(
        bs,
        url,
        "unions",
        SCHEMA,
        [
            {"id": 0, "either": 1, "maybe": None, "wide": 1 << 40, "shape": None},
            {"id": 1, "either": "a", "maybe": 2, "wide": None, "shape": ("u.Circle", {"r": 1.5})},
            {"id": 2, "either": 3, "maybe": "b", "wide": 4, "shape": ("u.Square", {"side": 2.0})},
        ],
    )
    write(bs, url, "top-union", TOP, ["s", 7, [1, 2]])

    def load(topic: str) -> Any:
        return (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", topic)
            .option("value.format", "avro")
            .option("schema.registry.url", url)
            .option("mode", "FAILFAST")
            .load()
        )

    df = load("unions")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:int,either:struct<member0:int,member1:string>,"
        "maybe:struct<member0:int,member1:string>,wide:bigint,"
        "shape:struct<member0:struct<r:double>,member1:struct<side:double>>>"
    )
    rows = sorted(
        (r.asDict(recursive=True) for r in df.select("value.*").collect()), key=lambda r: r["id"]
    )
    assert rows == [
        {
            "id": 0,
            "either": {"member0": 1, "member1": None},
            "maybe": None,
            "wide": 1 << 40,
            "shape": None,
        },
        {
            "id": 1,
            "either": {"member0": None, "member1": "a"},
            "maybe": {"member0": 2, "member1": None},
            "wide": None,
            "shape": {"member0": {"r": 1.5}, "member1": None},
        },
        {
            "id": 2,
            "either": {"member0": 3, "member1": None},
            "maybe": {"member0": None, "member1": "b"},
            "wide": 4,
            "shape": {"member0": None, "member1": {"side": 2.0}},
        },
    ]
    top = load("top-union")
    assert top.schema["value"].dataType.simpleString() == (
        "struct<member0:string,member1:bigint,member2:array<int>>"
    )
    assert [r.value.asDict() for r in top.orderBy("offset").collect()] == [
        {"member0": "s", "member1": None, "member2": None},
        {"member0": None, "member1": 7, "member2": None},
        {"member0": None, "member1": None, "member2": [1, 2]},
    ]


def test_schema_references_in_the_reader_schema(spark: Any, spark_broker: BrokerProcess) -> None:
    import fastavro
    from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

    bs, url = spark_broker.bootstrap_servers, registry_url(spark_broker)
    point = {
        "type": "record",
        "name": "Point",
        "namespace": "geo",
        "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}],
    }
    line = {
        "type": "record",
        "name": "Line",
        "namespace": "geo",
        "fields": [{"name": "a", "type": "Point"}, {"name": "b", "type": "geo.Point"}],
    }
    ck = SchemaRegistryClient({"url": url})
    ck.register_schema("point", Schema(json.dumps(point), "AVRO"))
    schema_id = ck.register_schema(
        "lines-value",
        Schema(json.dumps(line), "AVRO", [SchemaReference("geo.Point", "point", 1)]),
    )
    named: dict[str, Any] = {}
    fastavro.parse_schema(point, named_schemas=named)
    parsed = fastavro.parse_schema(line, named_schemas=named)
    buf = io.BytesIO(struct.pack(">bI", 0, schema_id))
    buf.seek(5)
    fastavro.schemaless_writer(buf, parsed, {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 4}})
    create_topic(bs, "lines", 1)
    produce(bs, "lines", [(0, None, buf.getvalue(), None, None)])
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "lines")
        .option("value.format", "avro")
        .option("schema.registry.url", url)
        .option("mode", "FAILFAST")
        .load()
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<a:struct<x:int,y:int>,b:struct<x:int,y:int>>"
    )
    assert [r.value.asDict(recursive=True) for r in df.collect()] == [
        {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 4}}
    ]
