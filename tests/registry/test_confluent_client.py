"""confluent-kafka-python's own SchemaRegistryClient and Avro serializers against the registry
inside a real broker process: the library is the oracle for the REST API."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from .conftest import RegistryBroker

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [{"name": "name", "type": "string"}],
}
USER_V2 = {  # BACKWARD-compatible: the new field has a default
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "age", "type": "int", "default": 0}],
}
USER_BAD = {  # not BACKWARD-compatible: a new field without a default
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}],
}


def _subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}-value"


def _avro(obj: object) -> Schema:
    return Schema(json.dumps(obj), "AVRO")


@pytest.fixture
def client(registry: RegistryBroker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def test_register_evolve_and_refuse(client: SchemaRegistryClient) -> None:
    subject = _subject()
    id1 = client.register_schema(subject, _avro(USER_V1))
    assert client.register_schema(subject, _avro(USER_V1)) == id1  # same schema: same id
    id2 = client.register_schema(subject, _avro(USER_V2))
    assert id2 > id1
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, id2)
    assert json.loads(latest.schema.schema_str)["fields"][1]["name"] == "age"
    assert client.test_compatibility(subject, _avro(USER_BAD)) is False
    with pytest.raises(SchemaRegistryError) as exc:
        client.register_schema(subject, _avro(USER_BAD))
    assert exc.value.http_status_code == 409
    assert exc.value.error_code == 40901
    assert "incompatible with an earlier schema" in exc.value.error_message
    assert client.get_versions(subject) == [1, 2]


def test_lookup_and_by_id(client: SchemaRegistryClient) -> None:
    subject = _subject()
    sid = client.register_schema(subject, _avro(USER_V1))
    # whitespace and key order do not matter: the same schema
    found = client.lookup_schema(subject, Schema(json.dumps(USER_V1, indent=2), "AVRO"))
    assert (found.schema_id, found.version, found.subject) == (sid, 1, subject)
    fetched = client.get_schema(sid)
    assert json.loads(fetched.schema_str) == USER_V1
    assert subject in client.get_subjects_by_schema_id(sid)  # ids are global: other subjects too
    with pytest.raises(SchemaRegistryError) as exc:
        client.lookup_schema(subject, _avro(USER_V2))
    assert (exc.value.http_status_code, exc.value.error_code) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as exc:
        client.get_schema(987654)
    assert (exc.value.http_status_code, exc.value.error_code) == (404, 40403)


def test_ids_are_global(client: SchemaRegistryClient) -> None:
    a, b = _subject(), _subject()
    assert client.register_schema(a, _avro(USER_V1)) == client.register_schema(b, _avro(USER_V1))
    assert client.register_schema(a, _avro(USER_V2)) != client.register_schema(
        _subject(), _avro({**USER_V1, "name": "Other"})
    )


def test_delete_soft_then_permanent(client: SchemaRegistryClient) -> None:
    subject = _subject()
    sid = client.register_schema(subject, _avro(USER_V1))
    client.register_schema(subject, _avro(USER_V2))
    with pytest.raises(SchemaRegistryError) as exc:
        client.delete_subject(subject, permanent=True)
    assert exc.value.error_code == 40405
    assert client.delete_subject(subject) == [1, 2]
    assert subject not in client.get_subjects()
    assert client.get_schema(sid).schema_str  # still readable by id after a soft delete
    with pytest.raises(SchemaRegistryError) as exc:
        client.delete_subject(subject)
    assert exc.value.error_code == 40404
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as exc:
        client.get_versions(subject)
    assert exc.value.error_code == 40401
    # the id is not handed out again
    new_id = client.register_schema(_subject(), _avro({**USER_V1, "name": "Fresh"}))
    assert new_id > sid


def test_delete_version(registry: RegistryBroker, client: SchemaRegistryClient) -> None:
    subject = _subject()
    client.register_schema(subject, _avro(USER_V1))
    client.register_schema(subject, _avro(USER_V2))
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    with pytest.raises(SchemaRegistryError) as exc:
        client.get_version(subject, 2)
    assert exc.value.error_code == 40402
    with pytest.raises(SchemaRegistryError) as exc:
        client.delete_version(subject, 1, permanent=True)
    assert exc.value.error_code == 40407
    assert client.delete_version(subject, 2, permanent=True) == 2
    # the next version is one above the highest kept (a new client: this one caches ids)
    SchemaRegistryClient({"url": registry.url}).register_schema(subject, _avro(USER_V2))
    assert client.get_versions(subject) == [1, 2]
    client.delete_version(subject, 1)
    SchemaRegistryClient({"url": registry.url}).register_schema(subject, _avro(USER_V1))
    assert client.get_versions(subject) == [2, 3]  # soft-deleted versions still count


def test_config_and_mode(client: SchemaRegistryClient) -> None:
    subject = _subject()
    client.register_schema(subject, _avro(USER_V1))
    assert client.get_compatibility() == "BACKWARD"
    with pytest.raises(SchemaRegistryError) as exc:
        client.get_compatibility(subject)
    assert exc.value.error_code == 40408
    client.set_compatibility(subject, "NONE")
    assert client.get_compatibility(subject) == "NONE"
    client.register_schema(subject, _avro(USER_BAD))  # NONE lets it through
    with pytest.raises(SchemaRegistryError) as exc:
        client.set_compatibility(subject, "SIDEWAYS")
    assert (exc.value.http_status_code, exc.value.error_code) == (422, 42203)
    client.delete_config(subject)
    with pytest.raises(SchemaRegistryError) as exc:
        client.get_compatibility(subject)
    assert exc.value.error_code == 40408

    assert client.get_global_mode() == "READWRITE"
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as exc:
        client.register_schema(subject, _avro(USER_V2))
    assert (exc.value.http_status_code, exc.value.error_code) == (422, 42205)
    assert client.delete_mode(subject) == "READONLY"
    client.register_schema(subject, _avro(USER_V2))


def test_invalid_schema(client: SchemaRegistryClient) -> None:
    with pytest.raises(SchemaRegistryError) as exc:
        client.register_schema(_subject(), Schema('{"type":"record","name":"X"}', "AVRO"))
    assert (exc.value.http_status_code, exc.value.error_code) == (422, 42201)


def test_avro_serializer_round_trip(registry: RegistryBroker, client: SchemaRegistryClient) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    ser1 = AvroSerializer(client, json.dumps(USER_V1))
    ser2 = AvroSerializer(client, json.dumps(USER_V2))
    producer = Producer({"bootstrap.servers": registry.bootstrap_servers})
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer.produce(topic, ser1({"name": "ann"}, ctx))
    producer.produce(topic, ser2({"name": "bob", "age": 7}, ctx))
    assert producer.flush(20) == 0
    de = AvroDeserializer(client)
    consumer = Consumer(
        {
            "bootstrap.servers": registry.bootstrap_servers,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(de(msg.value(), ctx))
            if len(got) == 2:
                break
    finally:
        consumer.close()
    assert got == [{"name": "ann"}, {"name": "bob", "age": 7}]
    assert client.get_versions(f"{topic}-value") == [1, 2]


def test_json_schema_serializer_round_trip(client: SchemaRegistryClient) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    topic = f"j-{uuid.uuid4().hex[:8]}"
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
    }
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = JSONSerializer(json.dumps(schema), client)({"id": 7, "item": "pen"}, ctx)
    assert data[:1] == b"\x00"
    assert JSONDeserializer(None, schema_registry_client=client)(data, ctx) == {
        "id": 7,
        "item": "pen",
    }
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    # a narrowing change is refused by the default BACKWARD level
    narrowed = {**schema, "required": ["id", "item"]}
    with pytest.raises(SchemaRegistryError) as exc:
        client.register_schema(f"{topic}-value", Schema(json.dumps(narrowed), "JSON"))
    assert exc.value.error_code == 40901
