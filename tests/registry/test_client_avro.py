"""odradek.client.avro against the registry in a broker process, cross-checked with
confluent-kafka's own Avro serializer and deserializer; ``odradek produce/consume
--value-format avro``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.client import Consumer, Producer, TopicPartition
from odradek.client.avro import (
    AvroDeserializer,
    AvroSerializer,
    SchemaRegistryClient,
    SchemaRegistryError,
    SerializationError,
    frame,
)
from odradek.client.types import ConsumerRecord

from .conftest import RegistryBroker

V1 = {
    "type": "record",
    "name": "Event",
    "namespace": "t",
    "fields": [{"name": "n", "type": "long"}],
}
V2 = {
    **V1,
    "fields": [*V1["fields"], {"name": "tag", "type": ["null", "string"], "default": None}],
}


def _topic() -> str:
    return f"avro-{uuid.uuid4().hex[:8]}"


def test_framing_matches_confluents(registry: RegistryBroker) -> None:
    topic = _topic()
    ctx = SerializationContext(topic, MessageField.VALUE)
    confluent = ConfluentClient({"url": registry.url})
    ours = AvroSerializer(registry.url, V1, topic=topic)
    theirs = ConfluentSerializer(confluent, json.dumps(V1))
    value = {"n": 42}
    data = ours(value)
    assert data == theirs(value, ctx)  # same id, same bytes
    assert data[:1] == b"\x00" and int.from_bytes(data[1:5], "big") == ours.schema_id
    assert ConfluentDeserializer(confluent)(data, ctx) == value
    assert AvroDeserializer(registry.url)(theirs({"n": -1}, ctx)) == {"n": -1}


def test_reader_schema_resolution_and_headers(registry: RegistryBroker) -> None:
    topic = _topic()
    old = AvroSerializer(registry.url, V1, topic=topic)
    new = AvroSerializer(registry.url, V2, topic=topic)
    reader = AvroDeserializer(registry.url, V2)
    assert reader(old({"n": 1})) == {"n": 1, "tag": None}  # written with v1, read as v2
    assert reader(new({"n": 2, "tag": "x"})) == {"n": 2, "tag": "x"}
    bare = old({"n": 3})[5:]
    record = ConsumerRecord(
        topic, 0, 9, 0, 0, None, bare, [("__value_schema_id", frame(old.schema_id, b""))]
    )
    assert reader.decode_record(record) == {"n": 3, "tag": None}


def test_unknown_id_names_id_and_position(registry: RegistryBroker) -> None:
    de = AvroDeserializer(registry.url)
    record = ConsumerRecord("tp", 2, 17, 0, 0, None, frame(999_999, b"\x02"), [])
    with pytest.raises(SerializationError, match=r"unknown schema id 999999 at tp/2/17"):
        de.decode_record(record)
    with pytest.raises(SerializationError, match="magic byte 0"):
        de(b"plain text")


def test_registry_down_names_the_url() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = SchemaRegistryClient(f"http://127.0.0.1:{port}", retries=1, timeout=2)
    with pytest.raises(SchemaRegistryError, match=f"127.0.0.1:{port} unreachable"):
        client.get_schema(1)


def test_producer_and_consumer_with_serializers(registry: RegistryBroker) -> None:
    topic = _topic()
    conf = {"bootstrap.servers": registry.bootstrap_servers}
    ser = AvroSerializer(registry.url, V2, topic=topic)
    with Producer({**conf, "value.serializer": ser}) as p:
        for i in range(3):
            p.send(topic, {"n": i, "tag": None if i % 2 else f"t{i}"})
        p.flush()
    got = []
    with Consumer(
        {
            **conf,
            "value.deserializer": AvroDeserializer(registry.url),
            "enable.auto.commit": "false",
        }
    ) as c:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        for _ in range(100):
            got += [r.value for r in c.poll(0.2)]
            if len(got) == 3:
                break
    assert got == [{"n": 0, "tag": "t0"}, {"n": 1, "tag": None}, {"n": 2, "tag": "t2"}]


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_produce_and_consume_avro(registry: RegistryBroker, tmp_path: Path) -> None:
    topic = _topic()
    schema = tmp_path / "event.avsc"
    schema.write_text(json.dumps(V2))
    common = ["-b", registry.bootstrap_servers, "--schema-registry", registry.url]
    lines = '{"n": 1, "tag": "a"}\n{"n": 2, "tag": null}\n'
    out = _cli(
        "produce",
        topic,
        "--value-format",
        "avro",
        "--schema-file",
        str(schema),
        *common,
        stdin=lines,
    )
    assert out.returncode == 0, out.stderr
    out = _cli("consume", topic, "--from-beginning", "-n", "2", "--value-format", "avro", *common)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        {"n": 1, "tag": "a"},
        {"n": 2, "tag": None},
    ]
    # a line that does not match the schema is refused with its line number
    out = _cli(
        "produce",
        topic,
        "--value-format",
        "avro",
        "--schema-file",
        str(schema),
        *common,
        stdin='{"n": "x"}\n',
    )
    assert out.returncode == 1 and "line 1" in out.stderr
    # a raw record in the topic: the consumer names the position
    assert (
        _cli("produce", topic, "-b", registry.bootstrap_servers, stdin="not avro\n").returncode == 0
    )
    out = _cli("consume", topic, "--from-beginning", "-n", "3", "--value-format", "avro", *common)
    assert out.returncode == 1 and f"at {topic}/0/2" in out.stderr


def test_schema_id_translation_between_registries(registry: RegistryBroker) -> None:
    from odradek.client.avro import SchemaIdTranslator

    from .conftest import start_registry_broker

    process, target_url = start_registry_broker()
    try:
        # the target has other schemas first, so the same schema gets another id there
        for i in range(3):
            AvroSerializer(target_url, {**V1, "name": f"Filler{i}"}, topic=f"filler{i}").schema_id  # noqa: B018
        topic = _topic()
        ser = AvroSerializer(registry.url, V2, topic=topic)
        data = ser({"n": 9, "tag": "m"})
        translate = SchemaIdTranslator(registry.url, target_url)
        moved = translate(data, f"{topic}-value")
        target_id = int.from_bytes(moved[1:5], "big")
        assert target_id != ser.schema_id and moved[5:] == data[5:]
        assert AvroDeserializer(target_url)(moved) == {"n": 9, "tag": "m"}
        assert translate(data, f"{topic}-value") == moved  # cached: same answer
    finally:
        process.close()
