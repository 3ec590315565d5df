"""`odradek produce TOPIC`: each line of stdin becomes one record (like kafka-console-producer).

With ``--key-separator SEP`` a line ``key SEP value`` is split at the first SEP; lines without
it get a null key. ``--property key=value`` passes producer configs (Java keys).

With ``--value-format avro --schema-file FILE`` each line (the value part) is a JSON value
encoded with that Avro schema in Confluent's wire format (magic 0 + 4-byte schema id); the schema
is registered under ``<topic>-value`` in ``--schema-registry`` (default
http://127.0.0.1:8081) on first use.
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from ._clientopts import (
    BOOTSTRAP_HELP,
    DEFAULT_BOOTSTRAP,
    CommandConfig,
    fail,
    load_command_config,
    parse_props,
)

__all__ = ["app"]

DEFAULT_REGISTRY = "http://127.0.0.1:8081"

app = typer.Typer(
    add_completion=False, invoke_without_command=True, context_settings={"allow_interspersed_args": True}
)


@app.callback(invoke_without_command=True)
def produce(
    topic: Annotated[str, typer.Argument(help="Topic to produce to.")],
    key_separator: Annotated[str | None, typer.Option("--key-separator", help="Split each line into key SEP value.")] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p", help="Send every record to this partition.")] = None,
    header: Annotated[list[str] | None, typer.Option("--header", "-H", help="Header key=value added to every record, repeatable.")] = None,
    prop: Annotated[list[str] | None, typer.Option("--property", "-X", help="Producer config key=value, repeatable.")] = None,
    bootstrap_server: Annotated[str, typer.Option("--bootstrap-server", "-b", help=BOOTSTRAP_HELP)] = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
    value_format: Annotated[str, typer.Option("--value-format", help="raw (default) or avro: each line is JSON encoded with --schema-file.")] = "raw",
    schema_file: Annotated[str | None, typer.Option("--schema-file", help="The Avro schema (.avsc) of the values.")] = None,
    schema_registry: Annotated[str, typer.Option("--schema-registry", help="Schema registry URL.")] = DEFAULT_REGISTRY,
) -> None:
    """Produce lines from stdin to a topic."""
    from odradek.client import KafkaError, Producer

    encode = _value_encoder(value_format, schema_file, schema_registry, topic)

    config = {**load_command_config(command_config, "producer"), "bootstrap.servers": bootstrap_server,
              "client.id": "odradek-produce", **parse_props(prop)}
    headers = [(k, v.encode()) for k, v in parse_props(header).items()] or None
    errors: list[BaseException] = []

    def on_delivery(_md: object, exc: BaseException | None) -> None:
        if exc is not None:
            errors.append(exc)

    count = 0
    try:
        with Producer(config) as producer:
            for line in sys.stdin.buffer:
                line = line.rstrip(b"\r\n")
                key = None
                if key_separator is not None:
                    sep = key_separator.encode()
                    if sep in line:
                        key, line = line.split(sep, 1)
                try:
                    value = encode(line)
                except ValueError as exc:  # SerializationError, a line that is not JSON
                    fail(f"line {count + 1}: {exc}")
                producer.send(topic, value, key=key, headers=headers, partition=partition, on_delivery=on_delivery)
                count += 1
            producer.flush()
    except KafkaError as exc:
        fail(str(exc))
    if errors:
        fail(f"{len(errors)} of {count} records failed: {errors[0]}")


def _value_encoder(
    value_format: str, schema_file: str | None, registry: str, topic: str
) -> Callable[[bytes], bytes]:
    """bytes -> bytes for each line's value: as is (raw), or JSON -> Confluent-framed Avro."""
    if value_format == "raw":
        return lambda line: line
    if value_format != "avro":
        fail(f"--value-format must be raw or avro, not {value_format!r}", 2)
    if schema_file is None:
        fail("--value-format avro needs --schema-file", 2)
        raise AssertionError("fail() exits")
    import json

    from odradek.client.avro import AvroSerializer, SchemaRegistryError, SerializationError

    try:
        with open(schema_file, encoding="utf-8") as f:
            schema = f.read()
        serializer = AvroSerializer(registry, schema, topic=topic)
        serializer.schema_id  # noqa: B018 - register now: a bad schema fails before any line
    except (OSError, ValueError, SchemaRegistryError) as exc:
        fail(f"{schema_file}: {exc}")

    def encode(line: bytes) -> bytes:
        try:
            return serializer(json.loads(line))
        except SerializationError as exc:
            raise ValueError(str(exc)) from None

    return encode
