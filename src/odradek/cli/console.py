"""`odradek console --bootstrap-server HOST:PORT`: the broker's web console and /metrics,
served against any Kafka-compatible cluster (Apache Kafka included) through odradek.client.

    odradek console --bootstrap-server kafka:9092 --listen http://127.0.0.1:9644

It serves the same pages, JSON API and kafka_exporter series as a broker's ``http.listeners``;
broker internals (request latency, log sizes, purgatory) are only known inside an odradek broker.

``--schema-registry URL`` (or ``-X schema.registry.url=URL``, the Kafka ecosystem's name) adds
the Schemas page and decoded Avro values in the message browser, against any
Confluent-compatible registry: Confluent's, Karapace, or an odradek broker's
(``schema.registry.listeners``).
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import asyncio
import re
import signal
import sys
from typing import Annotated

import typer

from ._clientopts import BOOTSTRAP_HELP, DEFAULT_BOOTSTRAP, fail, parse_props

__all__ = ["app"]

app = typer.Typer(add_completion=False, invoke_without_command=True)


@app.callback(invoke_without_command=True)
def console(
    bootstrap_server: Annotated[str, typer.Option("--bootstrap-server", "-b", help=BOOTSTRAP_HELP)] = DEFAULT_BOOTSTRAP,
    listen: Annotated[str, typer.Option("--listen", help="Where to serve: http://host:port (port 0: any free port).")] = "http://127.0.0.1:9644",
    prop: Annotated[list[str] | None, typer.Option("--property", "-X", help="Client config key=value, repeatable.")] = None,
    sample_interval: Annotated[float, typer.Option("--sample-interval", help="Seconds between lag samples (charts, time to clear).")] = 5.0,
    schema_registry: Annotated[str | None, typer.Option("--schema-registry", help="Schema registry URL (http://host:port): the Schemas page and decoded Avro values.")] = None,
) -> None:
    """Serve the web console and /metrics for a Kafka-compatible cluster."""
    from odradek.console.app import Console
    from odradek.console.listeners import parse_http_listeners
    from odradek.console.schemas import SchemaSource
    from odradek.console.source import ClusterSource

    try:
        addresses = parse_http_listeners(listen)
    except ValueError as exc:
        fail(f"--listen: {exc}")
    if not addresses:
        fail("--listen: give http://host:port")
    if listen.strip().lower().startswith("https:"):
        fail("--listen: odradek console serves http:// only (a broker's http.listeners serves https)")
    host, port = addresses[0]
    client_config = parse_props(prop)
    registry = registry_url(schema_registry, client_config.pop("schema.registry.url", None))
    registry_config = registry_settings(registry, client_config)

    async def main() -> None:
        source = ClusterSource(bootstrap_server, client_config=client_config)
        app_ = Console(source, title="odradek console", sample_interval_s=sample_interval, schemas=SchemaSource(registry, config=registry_config))
        try:
            bound = await app_.start(host, port)
        except OSError as exc:
            fail(f"cannot listen on {listen}: {exc}")
        shown = host if ":" not in host else f"[{host}]"
        with_registry = f" (schema registry {registry})" if registry else ""
        sys.stdout.write(f"odradek console on http://{shown}:{bound} for {bootstrap_server}{with_registry}\n")
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        await stop.wait()
        await app_.stop()

    asyncio.run(main())


def registry_settings(url: str | None, props: dict[str, str]) -> dict[str, str]:
    """The schema registry client's settings taken out of ``props``: ``schema.registry.<key>``
    for Confluent's registry client keys (``basic.auth.user.info``, ``bearer.auth.token``,
    ``ssl.ca.location``, ...), returned without the prefix; exits with code 2 when they are
    given without a registry or do not make a valid client."""
    from odradek.client.avro import REGISTRY_CLIENT_KEYS, SchemaRegistryClient

    out = {k: props.pop(f"schema.registry.{k}") for k in REGISTRY_CLIENT_KEYS if f"schema.registry.{k}" in props}
    if out and url is None:
        fail(f"schema.registry.{next(iter(out))} needs a schema registry (--schema-registry)", 2)
    if url is not None:
        try:
            SchemaRegistryClient(url, config=out)
        except (ValueError, OSError) as exc:
            fail(f"schema registry settings: {exc}", 2)
    return out


def registry_url(flag: str | None, prop: str | None) -> str | None:
    """The schema registry URL of ``--schema-registry`` or ``schema.registry.url`` (the same
    one if both are given); exits with code 2 on anything but an http(s) URL."""
    if flag and prop and flag.rstrip("/") != prop.rstrip("/"):
        fail(f"--schema-registry {flag} and schema.registry.url={prop} differ", 2)
    url = (flag or prop or "").strip()
    if not url:
        return None
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        fail(f"schema registry: not an http:// or https:// URL: {url!r}", 2)
    return url.rstrip("/")
