"""The registry's state lives in ``_schemas`` only: a restarted broker replays it."""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from .conftest import registry_url, start_registry_broker


def _schema(name: str) -> Schema:
    return Schema(
        json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]}),
        "AVRO",
    )


def test_restart_replays_and_never_reuses_ids() -> None:
    process, url = start_registry_broker()
    try:
        client = SchemaRegistryClient({"url": url})
        a = client.register_schema("keep-value", _schema("A"))
        b = client.register_schema("gone-value", _schema("B"))
        client.set_compatibility("keep-value", "FULL")
        client.delete_subject("gone-value")
        client.delete_subject("gone-value", permanent=True)

        process.restart()
        client = SchemaRegistryClient({"url": registry_url(process)})
        assert client.get_subjects() == ["keep-value"]
        assert client.get_compatibility("keep-value") == "FULL"
        assert client.get_latest_version("keep-value").schema_id == a
        # b was deleted permanently; its id is not handed out again after the replay
        assert client.register_schema("new-value", _schema("C")) == b + 1
    finally:
        process.close()
