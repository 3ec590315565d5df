"""`odradek produce TOPIC`: each line of stdin becomes one record (like kafka-console-producer).

With ``--key-separator SEP`` a line ``key SEP value`` is split at the first SEP; lines without
it get a null key. ``--property key=value`` passes producer configs (Java keys).
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import sys
from typing import Annotated

import typer

from ._clientopts import BOOTSTRAP_HELP, DEFAULT_BOOTSTRAP, fail, parse_props

__all__ = ["app"]

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
) -> None:
    """Produce lines from stdin to a topic."""
    from odradek.client import KafkaError, Producer

    config = {"bootstrap.servers": bootstrap_server, "client.id": "odradek-produce", **parse_props(prop)}
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
                producer.send(topic, line, key=key, headers=headers, partition=partition, on_delivery=on_delivery)
                count += 1
            producer.flush()
    except KafkaError as exc:
        fail(str(exc))
    if errors:
        fail(f"{len(errors)} of {count} records failed: {errors[0]}")
