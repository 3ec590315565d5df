"""Confluent-framed Avro into Arrow columns: two compatible schema versions read with the
latest, logical types, corrupt values (PERMISSIVE and FAILFAST)."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid

import pyarrow as pa
import pytest

from odradek.client.avro import AvroSerializer, SchemaRegistryClient, SerializationError, frame
from odradek.client.avro_arrow import AvroArrowDecoder, arrow_type

from .conftest import RegistryBroker

V1 = {
    "type": "record",
    "name": "Row",
    "namespace": "arrow",
    "fields": [{"name": "id", "type": "long"}],
}
V2 = {
    **V1,
    "fields": [
        *V1["fields"],
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "score", "type": "double", "default": 1.5},
    ],
}


def test_two_versions_read_with_the_latest(registry: RegistryBroker) -> None:
    topic = f"arrow-{uuid.uuid4().hex[:8]}"
    old = AvroSerializer(registry.url, V1, topic=topic)
    new = AvroSerializer(registry.url, V2, topic=topic)
    values = [old({"id": 1}), new({"id": 2, "name": "b", "score": 2.0}), None, b"junk"]
    client = SchemaRegistryClient(registry.url)
    latest_id, latest = client.latest(f"{topic}-value")
    assert latest_id == new.schema_id
    array, errors = AvroArrowDecoder(client, latest).decode(
        values, [f"{topic}/0/{i}" for i in range(4)]
    )
    assert array.type == pa.struct(
        [pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("score", pa.float64())]
    )
    assert array.to_pylist() == [
        {"id": 1, "name": None, "score": 1.5},  # written with v1: the defaults of v2
        {"id": 2, "name": "b", "score": 2.0},
        None,
        None,
    ]
    assert errors[:3] == [None, None, None]
    assert errors[3] is not None and f"at {topic}/0/3" in errors[3]
    with pytest.raises(SerializationError, match=f"at {topic}/0/3"):
        AvroArrowDecoder(client, latest, mode="FAILFAST").decode(
            values, [f"{topic}/0/{i}" for i in range(4)]
        )
    unknown = frame(987_654, b"\x02")
    _array, errors = AvroArrowDecoder(client, latest).decode([unknown], ["t/1/9"])
    assert errors[0] is not None and "unknown schema id 987654 at t/1/9" in errors[0]


def test_logical_and_nested_types(registry: RegistryBroker) -> None:
    schema = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "attrs", "type": {"type": "map", "values": "long"}},
            {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
            {"name": "either", "type": ["int", "string"]},
            {
                "name": "inner",
                "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]},
            },
        ],
    }
    t = arrow_type(json.dumps(schema))
    assert t.field("ts").type == pa.timestamp("ms", tz="UTC")
    assert t.field("day").type == pa.date32()
    assert t.field("price").type == pa.decimal128(9, 2)
    assert t.field("attrs").type == pa.map_(pa.string(), pa.int64())
    assert t.field("either").type == pa.struct(
        [pa.field("member0", pa.int32()), pa.field("member1", pa.string())]
    )
    ser = AvroSerializer(registry.url, schema, topic=f"logical-{uuid.uuid4().hex[:8]}")
    u = uuid.uuid4()
    row = {
        "ts": datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC),
        "day": datetime.date(2026, 11, 27),
        "price": decimal.Decimal("12.34"),
        "id": str(u),
        "tags": ["a"],
        "attrs": {"k": 3},
        "kind": "B",
        "either": "s",
        "inner": {"x": 1},
    }
    array, errors = AvroArrowDecoder(registry.url, schema).decode([ser(row)])
    assert errors == [None]
    got = array.to_pylist()[0]
    assert got["ts"] == row["ts"] and got["day"] == row["day"] and got["price"] == row["price"]
    assert (got["id"], got["kind"], got["either"], got["inner"]) == (
        str(u),
        "B",
        {"member0": None, "member1": "s"},
        {"x": 1},
    )
    assert got["attrs"] == [("k", 3)]


UNIONS = {
    "type": "record",
    "name": "U",
    "namespace": "u",
    "fields": [
        {"name": "either", "type": ["int", "string"]},
        {"name": "maybe", "type": ["null", "int", "string"]},
        {"name": "wide", "type": ["null", "int", "long"]},
        {"name": "real", "type": ["float", "double"]},
        {
            "name": "shape",
            "type": [
                {"type": "record", "name": "Circle", "fields": [{"name": "r", "type": "double"}]},
                {
                    "type": "record",
                    "name": "Square",
                    "fields": [{"name": "side", "type": "double"}],
                },
                {"type": "enum", "name": "Blob", "symbols": ["SMALL", "BIG"]},
                "string",
            ],
        },
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": ["null", "Circle", {"type": "map", "values": "long"}],
            },
        },
        {
            "name": "when",
            "type": [
                "null",
                {"type": "long", "logicalType": "timestamp-millis"},
                {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1},
            ],
        },
    ],
}


def test_unions_as_spark_from_avro(registry: RegistryBroker) -> None:
    """Unions other than [null, T]: a struct with one nullable ``member<i>`` per non-null
    branch (records told apart by name, other branches by the decoded value's type)."""
    t = arrow_type(UNIONS)
    circle = pa.struct([pa.field("r", pa.float64())])
    assert t.field("either").type == pa.struct(
        [pa.field("member0", pa.int32()), pa.field("member1", pa.string())]
    )
    assert t.field("maybe").type == t.field("either").type
    assert t.field("wide").type == pa.int64()
    assert t.field("real").type == pa.float64()
    assert t.field("shape").type == pa.struct(
        [
            pa.field("member0", circle),
            pa.field("member1", pa.struct([pa.field("side", pa.float64())])),
            pa.field("member2", pa.string()),
            pa.field("member3", pa.string()),
        ]
    )
    ser = AvroSerializer(registry.url, UNIONS, topic=f"unions-{uuid.uuid4().hex[:8]}")
    at = datetime.datetime(2026, 11, 27, 20, 0, tzinfo=datetime.UTC)
    rows = [
        {
            "either": 7,
            "maybe": None,
            "wide": 1 << 40,
            "real": 0.5,
            "shape": ("u.Circle", {"r": 1.0}),
            "items": [None, ("u.Circle", {"r": 2.0}), {"k": 3}],
            "when": at,
        },
        {
            "either": "x",
            "maybe": "y",
            "wide": None,
            "real": 2.5,
            "shape": ("u.Square", {"side": 3.0}),
            "items": [],
            "when": decimal.Decimal("12.5"),
        },
        {
            "either": 1,
            "maybe": 5,
            "wide": 3,
            "real": 1.0,
            "shape": ("u.Blob", "BIG"),
            "items": [],
            "when": None,
        },
        {
            "either": 1,
            "maybe": 5,
            "wide": 3,
            "real": 1.0,
            "shape": "hello",
            "items": [],
            "when": None,
        },
    ]
    array, errors = AvroArrowDecoder(registry.url, UNIONS).decode([ser(r) for r in rows])
    assert errors == [None] * 4
    got = array.to_pylist()

    def m(i: int, v: object, n: int) -> dict[str, object]:
        return {f"member{j}": (v if j == i else None) for j in range(n)}

    assert [g["either"] for g in got] == [m(0, 7, 2), m(1, "x", 2), m(0, 1, 2), m(0, 1, 2)]
    assert [g["maybe"] for g in got] == [None, m(1, "y", 2), m(0, 5, 2), m(0, 5, 2)]
    assert [g["wide"] for g in got] == [1 << 40, None, 3, 3]
    assert [g["shape"] for g in got] == [
        m(0, {"r": 1.0}, 4),
        m(1, {"side": 3.0}, 4),
        m(2, "BIG", 4),
        m(3, "hello", 4),
    ]
    assert got[0]["items"] == [None, m(0, {"r": 2.0}, 2), m(1, [("k", 3)], 2)]
    assert [g["when"] for g in got] == [m(0, at, 2), m(1, decimal.Decimal("12.5"), 2), None, None]
