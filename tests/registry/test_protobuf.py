"""Protobuf: confluent-kafka's own ProtobufSerializer (it registers a base64 FileDescriptorProto)
against the registry, .proto text registration, and the compatibility rules."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.registry.compatibility import check
from odradek.registry.protobuf_format import parse_protobuf

from .conftest import RegistryBroker


def _message_class(package: str, fields: list[tuple[str, int, int]]) -> type:
    """A generated-code-like class for ``message Order`` built from a FileDescriptorProto."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/order.proto", package=package, syntax="proto3"
    )
    msg = fdp.message_type.add(name="Order")
    for name, number, kind in fields:
        msg.field.add(
            name=name,
            number=number,
            type=kind,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order"))


def test_confluent_protobuf_serializer(registry: RegistryBroker) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    package = f"p{uuid.uuid4().hex[:8]}"
    order = _message_class(package, [("id", 1, F.TYPE_INT64), ("item", 2, F.TYPE_STRING)])
    client = SchemaRegistryClient({"url": registry.url})
    topic = f"proto-{package}"
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    data = ser(order(id=7, item="pen"), ctx)
    assert data[:1] == b"\x00"
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF"
    assert int.from_bytes(data[1:5], "big") == latest.schema_id
    back = ProtobufDeserializer(order, {"use.deprecated.format": False})(data, ctx)
    assert (back.id, back.item) == (7, "pen")
    # field 1 turned into a string: refused
    changed = _message_class(package, [("id", 1, F.TYPE_STRING), ("item", 2, F.TYPE_STRING)])
    with pytest.raises(SchemaRegistryError) as exc:
        ProtobufSerializer(changed, client, {"use.deprecated.format": False})(changed(id="x"), ctx)
    assert exc.value.error_code == 40901


def test_proto_text(registry: RegistryBroker) -> None:
    subject = f"pt-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": registry.url})
    v1 = 'syntax = "proto3";\npackage shop;\nmessage Item { int32 n = 1; }\n'
    v2 = 'syntax = "proto3";\npackage shop;\nmessage Item { int64 n = 1; string label = 2; }\n'
    sid = client.register_schema(subject, Schema(v1, "PROTOBUF"))
    assert client.register_schema(subject, Schema(v2, "PROTOBUF")) != sid
    assert client.get_schema(sid).schema_str == v1.strip()
    with pytest.raises(SchemaRegistryError) as exc:
        client.register_schema(subject, Schema("message Broken { int32 n = 1 }", "PROTOBUF"))
    assert (exc.value.http_status_code, exc.value.error_code) == (422, 42201)


@pytest.mark.parametrize(
    ("new", "old", "ok"),
    [
        (
            "message M { int32 a = 1; }",
            "message M { int32 a = 1; int32 b = 2; }",
            True,
        ),  # field removed
        (
            "message M { int32 a = 1; int32 b = 2; }",
            "message M { int32 a = 1; }",
            True,
        ),  # field added
        ("message M { int64 a = 1; }", "message M { int32 a = 1; }", True),  # same wire type
        ("message M { sint32 a = 1; }", "message M { int32 a = 1; }", False),  # zigzag vs varint
        ("message M { bytes a = 1; }", "message M { string a = 1; }", True),
        ("message M { repeated int32 a = 1; }", "message M { int32 a = 1; }", False),
        ("message M { N a = 1; } message N {}", "message M { int32 a = 1; } message N {}", False),
        ("message M { int32 a = 1; }", "message M { int32 a = 1; } message N {}", False),  # removed
        ("package x; message M { int32 a = 1; }", "package y; message M { int32 a = 1; }", False),
        (
            "message M { E a = 1; } enum E { Z = 0; }",
            "message M { int32 a = 1; }",
            True,
        ),  # enum is varint
    ],
)
def test_compatibility_rules(new: str, old: str, ok: bool) -> None:
    messages = check("BACKWARD", parse_protobuf(new), [(1, parse_protobuf(old))])
    assert (messages == []) is ok, messages
