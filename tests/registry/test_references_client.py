"""Schema references (Avro named types registered under other subjects) in odradek's own Avro
deserializer and Arrow decoder: writer schemas with references (nested, two levels) decode by
id, and a subject's latest version comes back self-contained for a reader schema. The schemas
are registered with confluent-kafka's registry client; values are encoded by fastavro."""

from __future__ import annotations

import io
import json
import struct
import uuid
from typing import Any

import fastavro
import pyarrow as pa

from odradek.client.avro import AvroDeserializer, SchemaRegistryClient
from odradek.client.avro_arrow import AvroArrowDecoder

from .conftest import RegistryBroker

COUNTRY = {"type": "enum", "name": "Country", "namespace": "com.acme.geo", "symbols": ["FR", "IT"]}
ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "com.acme",
    "fields": [
        {"name": "city", "type": "string"},
        {"name": "country", "type": "com.acme.geo.Country"},
    ],
}
PERSON = {
    "type": "record",
    "name": "Person",
    "namespace": "com.acme",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "home", "type": "Address"},
        {"name": "work", "type": ["null", "Address"], "default": None},
        {"name": "born", "type": "com.acme.geo.Country"},
    ],
}


def _register(url: str, suffix: str) -> tuple[int, str]:
    from confluent_kafka.schema_registry import Schema, SchemaReference
    from confluent_kafka.schema_registry import SchemaRegistryClient as Ck

    ck = Ck({"url": url})
    ck.register_schema(f"country-{suffix}", Schema(json.dumps(COUNTRY), "AVRO"))
    ck.register_schema(
        f"address-{suffix}",
        Schema(
            json.dumps(ADDRESS),
            "AVRO",
            [SchemaReference("com.acme.geo.Country", f"country-{suffix}", 1)],
        ),
    )
    subject = f"person-{suffix}-value"
    person_id = ck.register_schema(
        subject,
        Schema(
            json.dumps(PERSON),
            "AVRO",
            [SchemaReference("com.acme.Address", f"address-{suffix}", 1)],
        ),
    )
    return int(person_id), subject


def _encode(schema_id: int, value: Any) -> bytes:
    named: dict[str, Any] = {}
    fastavro.parse_schema(COUNTRY, named_schemas=named)
    fastavro.parse_schema(ADDRESS, named_schemas=named)
    parsed = fastavro.parse_schema(PERSON, named_schemas=named)
    buf = io.BytesIO(struct.pack(">bI", 0, schema_id))
    buf.seek(5)
    fastavro.schemaless_writer(buf, parsed, value)
    return buf.getvalue()


VALUE = {
    "name": "ann",
    "home": {"city": "Lyon", "country": "FR"},
    "work": {"city": "Turin", "country": "IT"},
    "born": "IT",
}


def test_writer_schema_references_resolved_by_id(registry: RegistryBroker) -> None:
    schema_id, _subject = _register(registry.url, uuid.uuid4().hex[:8])
    data = _encode(schema_id, VALUE)
    assert AvroDeserializer(registry.url)(data) == VALUE


def test_latest_self_contained_reader_schema(registry: RegistryBroker) -> None:
    schema_id, subject = _register(registry.url, uuid.uuid4().hex[:8])
    client = SchemaRegistryClient(registry.url)
    latest_id, plain = client.latest(subject)
    assert latest_id == schema_id and json.loads(plain) == PERSON  # as registered
    _id, text = client.latest(subject, self_contained=True)
    reader = json.loads(text)
    fastavro.parse_schema(reader)  # parses alone: every named type defined once, where first used
    home = reader["fields"][1]["type"]
    assert home["name"] == "Address" and home["fields"][1]["type"]["name"] == "Country"
    assert reader["fields"][2]["type"] == ["null", "com.acme.Address"]
    assert reader["fields"][3]["type"] == "com.acme.geo.Country"
    array, errors = AvroArrowDecoder(client, reader).decode([_encode(schema_id, VALUE)])
    assert errors == [None]
    address = pa.struct([pa.field("city", pa.string()), pa.field("country", pa.string())])
    assert array.type == pa.struct(
        [
            pa.field("name", pa.string()),
            pa.field("home", address),
            pa.field("work", address),
            pa.field("born", pa.string()),
        ]
    )
    assert array.to_pylist() == [VALUE]


def test_console_decodes_values_whose_schema_references_nest(registry: RegistryBroker) -> None:
    """The console's message browser (``SchemaSource.decode``) parses every schema a writer
    schema references, also those referenced by the referenced ones (Person -> Address ->
    Country)."""
    import asyncio

    from odradek.console.schemas import SchemaSource

    schema_id, _subject = _register(registry.url, uuid.uuid4().hex[:8])
    data = _encode(schema_id, VALUE)
    (decoded,) = asyncio.run(SchemaSource(registry.url).decode([data]))
    assert decoded is not None and decoded.schema_id == schema_id, decoded
    assert decoded.text is not None and json.loads(decoded.text) == VALUE, decoded
