"""`odradek consume TOPIC`: print records (like kafka-console-consumer).

Without ``--group`` the consumer assigns itself every partition (or ``--partition``) and starts
at the end, at the beginning with ``--from-beginning``, or at ``--offset N`` (needs
``--partition``). With ``--group`` it joins that consumer group and commits. The value is
printed as text; ``--print-key`` / ``--print-offset`` / ``--print-timestamp`` /
``--print-partition`` / ``--print-headers`` prepend those fields, tab-separated.

With ``--value-format avro`` each value is decoded by its schema id (Confluent's framing, or a
``__value_schema_id`` header) with schemas from ``--schema-registry`` (default
http://127.0.0.1:8081) and printed as one line of JSON; ``--schema-file`` gives a reader schema
to resolve to. A value that cannot be decoded stops the command with an error naming the schema
id and the topic/partition/offset.
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

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

app = typer.Typer(
    add_completion=False, invoke_without_command=True, context_settings={"allow_interspersed_args": True}
)


def _text(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", "backslashreplace")


@app.callback(invoke_without_command=True)
def consume(
    topic: Annotated[str, typer.Argument(help="Topic to consume.")],
    from_beginning: Annotated[bool, typer.Option("--from-beginning", help="Start at the earliest offset.")] = False,
    partition: Annotated[int | None, typer.Option("--partition", "-p", help="Only this partition.")] = None,
    offset: Annotated[int | None, typer.Option("--offset", "-o", help="Start offset (needs --partition).")] = None,
    max_messages: Annotated[int | None, typer.Option("--max-messages", "-n", help="Exit after this many records.")] = None,
    timeout_ms: Annotated[int | None, typer.Option("--timeout-ms", help="Exit when no record arrives for this long.")] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group to join.")] = None,
    print_key: Annotated[bool, typer.Option("--print-key")] = False,
    print_offset: Annotated[bool, typer.Option("--print-offset")] = False,
    print_timestamp: Annotated[bool, typer.Option("--print-timestamp")] = False,
    print_partition: Annotated[bool, typer.Option("--print-partition")] = False,
    print_headers: Annotated[bool, typer.Option("--print-headers")] = False,
    prop: Annotated[list[str] | None, typer.Option("--property", "-X", help="Consumer config key=value, repeatable.")] = None,
    bootstrap_server: Annotated[str, typer.Option("--bootstrap-server", "-b", help=BOOTSTRAP_HELP)] = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
    value_format: Annotated[str, typer.Option("--value-format", help="raw (default) or avro: print values decoded as JSON.")] = "raw",
    schema_file: Annotated[str | None, typer.Option("--schema-file", help="Avro reader schema (.avsc) to resolve values to.")] = None,
    schema_registry: Annotated[str, typer.Option("--schema-registry", help="Schema registry URL.")] = "http://127.0.0.1:8081",
) -> None:
    """Consume records from a topic and print them."""
    from odradek.client import Consumer, KafkaError, TopicPartition

    value_text = _value_decoder(value_format, schema_file, schema_registry)

    if offset is not None and partition is None:
        fail("--offset needs --partition", 2)
    config = {
        **load_command_config(command_config, "consumer"),
        "bootstrap.servers": bootstrap_server,
        "client.id": "odradek-consume",
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        **({"group.id": group} if group else {"enable.auto.commit": "false"}),
        **parse_props(prop),
    }
    out = sys.stdout
    count = 0
    try:
        with Consumer(config) as consumer:
            if group:
                consumer.subscribe([topic])
            else:
                parts = [partition] if partition is not None else sorted(consumer.partitions_for_topic(topic))
                tps = [TopicPartition(topic, p) for p in parts]
                consumer.assign(tps)
                if offset is not None:
                    consumer.seek(tps[0], offset)
                elif from_beginning:
                    consumer.seek_to_beginning(*tps)
                else:
                    consumer.seek_to_end(*tps)
            last = time.monotonic()
            while max_messages is None or count < max_messages:
                wait = 1.0
                if timeout_ms is not None:
                    wait = max(0.0, min(wait, timeout_ms / 1000 - (time.monotonic() - last)))
                records = consumer.poll(wait, max_records=None if max_messages is None else max_messages - count)
                if not records:
                    if timeout_ms is not None and time.monotonic() - last >= timeout_ms / 1000:
                        break
                    continue
                last = time.monotonic()
                for r in records:
                    fields = []
                    if print_partition:
                        fields.append(f"Partition:{r.partition}")
                    if print_offset:
                        fields.append(f"Offset:{r.offset}")
                    if print_timestamp:
                        fields.append(("LogAppendTime:" if r.timestamp_type else "CreateTime:") + str(r.timestamp))
                    if print_headers:
                        fields.append(",".join(f"{k}:{_text(v)}" for k, v in r.headers) or "NO_HEADERS")
                    if print_key:
                        fields.append(_text(r.key))
                    fields.append(value_text(r))
                    out.write("\t".join(fields) + "\n")
                out.flush()
                count += len(records)
    except (KafkaError, ValueError) as exc:  # ValueError: a value that does not decode
        fail(str(exc))
    except KeyboardInterrupt:
        pass
    typer.echo(f"Processed a total of {count} messages", err=True)


def _json_default(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("latin-1")  # Avro's JSON encoding of bytes: one code point per byte
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)  # Decimal, UUID


def _value_decoder(value_format: str, schema_file: str | None, registry: str) -> Callable[[Any], str]:
    """ConsumerRecord -> the printed value: text (raw) or decoded Avro as one line of JSON."""
    if value_format == "raw":
        return lambda r: _text(r.value)
    if value_format != "avro":
        fail(f"--value-format must be raw or avro, not {value_format!r}", 2)
    import json

    from odradek.client.avro import AvroDeserializer, SchemaRegistryError, SerializationError

    reader = None
    if schema_file is not None:
        try:
            with open(schema_file, encoding="utf-8") as f:
                reader = f.read()
        except OSError as exc:
            fail(f"{schema_file}: {exc}")
    deserializer = AvroDeserializer(registry, reader)

    def decode(r: Any) -> str:
        if r.value is None:
            return "null"
        try:
            value = deserializer.decode_record(r)
        except (SerializationError, SchemaRegistryError) as exc:
            raise ValueError(str(exc)) from None
        return json.dumps(value, default=_json_default, ensure_ascii=False)

    return decode
