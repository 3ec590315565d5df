"""`odradek pipeline NAME ...`: run a Spark pipeline (pyspark is imported inside commands).

* ``warehouse``  — topics -> Parquet partitioned by topic/date/hour (odradek.pipelines.warehouse);
                   with ``--schema-registry URL`` (or ``--set schema.registry.url=URL``) Avro
                   values are decoded by schema id into typed Parquet columns
* ``audit``      — per (topic, window): audited vs arrived counts (odradek.pipelines.audit);
                   exit status 1 when a window has missing or extra records
* ``page-views`` — derived feed: page views per page per window (odradek.pipelines.derived)

While a streaming query runs, a rich progress display on stderr counts its micro-batches and
input records (``--progress`` / ``--no-progress``; by default when stderr is a terminal); the
audit shows a spinner while its batch job runs.
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from odradek.spark.options import parse_duration_ms

app = typer.Typer(no_args_is_help=True, add_completion=False)

BOOTSTRAP = typer.Option("127.0.0.1:9092", "--bootstrap-servers", "-b", help="host:port,...")
MASTER = typer.Option("local[2]", "--master", help="Spark master URL.")
TRIGGER = typer.Option(
    "available-now",
    "--trigger",
    help="available-now: catch up and stop; continuous: a micro-batch every --interval.",
)


PROGRESS = typer.Option(
    None, "--progress/--no-progress", help="Progress on stderr (default: on a terminal)."
)


def _stderr_console(show: bool) -> Any:
    from rich.console import Console

    return Console(stderr=True, force_terminal=show or None)


def await_query(query: Any, label: str, progress: bool | None = None, poll_s: float = 0.5) -> int:
    """Wait for a streaming query to stop, showing its micro-batches and input records so far;
    returns the input records of all its batches (counted by batch id, so none is lost when
    Spark's ``recentProgress`` keeps only the last ones)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    show = sys.stderr.isatty() if progress is None else progress
    rows: dict[int, int] = {}

    def count() -> None:
        for p in query.recentProgress or ():
            rows[int(p.get("batchId", -1))] = int(p.get("numInputRows", 0) or 0)

    bar = Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        TextColumn("{task.fields[batches]} batch(es), {task.fields[rows]:,} records"),
        TimeElapsedColumn(),
        console=_stderr_console(show),
        disable=not show,
        transient=True,
    )
    with bar:
        task = bar.add_task(label, total=None, batches=0, rows=0)
        while not query.awaitTermination(poll_s):
            count()
            bar.update(task, batches=len(rows), rows=sum(rows.values()))
        count()
    return sum(rows.values())


@contextmanager
def _spinner(label: str, progress: bool | None) -> Iterator[None]:
    show = sys.stderr.isatty() if progress is None else progress
    if not show:
        yield
        return
    with _stderr_console(show).status(label):
        yield


def _session(master: str, name: str) -> Any:
    from odradek.spark.session import local_session

    return local_session(master=master, app_name=f"odradek-{name}")


def _client_options(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        out[key.strip()] = value.strip()
    return out


@app.command("warehouse")
def warehouse(
    output: Path = typer.Option(..., "--output", "-o", help="Parquet output directory."),
    subscribe: str | None = typer.Option(None, "--subscribe", help="Comma-separated topics."),
    subscribe_pattern: str | None = typer.Option(None, "--subscribe-pattern"),
    bootstrap_servers: str = BOOTSTRAP,
    checkpoint: Path | None = typer.Option(
        None, "--checkpoint", help="Default: <output>/_checkpoint (offsets kept with the data)."
    ),
    trigger: str = TRIGGER,
    interval: str = typer.Option("30 seconds", "--interval"),
    value_format: str = typer.Option("raw", "--value-format", help="raw, json or avro."),
    value_schema: str | None = typer.Option(
        None,
        "--value-schema",
        help="Spark DDL of the decoded value (json/avro), e.g. 'page string'.",
    ),
    avro_schemas: Path | None = typer.Option(
        None, "--avro-schemas", help='JSON file {"<schema id>": <Avro schema>}.'
    ),
    schema_registry: str | None = typer.Option(
        None,
        "--schema-registry",
        help="Schema registry URL: Avro values decoded by schema id into typed columns.",
    ),
    value_subject: str | None = typer.Option(
        None, "--value-subject", help="Reader schema's subject (default: <topic>-value)."
    ),
    max_offsets_per_trigger: int | None = typer.Option(None, "--max-offsets-per-trigger"),
    client_set: list[str] | None = typer.Option(None, "--set", help="Client config KEY=VALUE."),
    master: str = MASTER,
    progress: bool | None = PROGRESS,
) -> None:
    """Load topics into Parquet partitioned by topic, date and hour (UTC)."""
    from odradek.pipelines.warehouse import build_warehouse_query

    from .console import registry_settings, registry_url

    client_options = _client_options(client_set)
    registry = registry_url(schema_registry, client_options.pop("schema.registry.url", None))
    registry_config = registry_settings(registry, client_options)
    if registry is not None:
        if value_format == "raw":  # the default: a registry means Avro values
            value_format = "avro"
        if value_format != "avro":
            raise typer.BadParameter(
                f"a schema registry needs --value-format avro, not {value_format}",
                param_hint="--schema-registry",
            )
        if avro_schemas is not None:
            raise typer.BadParameter(
                "give --schema-registry or --avro-schemas, not both", param_hint="--avro-schemas"
            )
    elif value_subject is not None:
        raise typer.BadParameter("needs --schema-registry", param_hint="--value-subject")
    schemas = None
    if avro_schemas is not None:
        schemas = {int(k): v for k, v in json.loads(avro_schemas.read_text()).items()}
    spark = _session(master, "warehouse")
    q = build_warehouse_query(
        spark,
        bootstrap_servers=bootstrap_servers,
        output=output,
        subscribe=subscribe,
        subscribe_pattern=subscribe_pattern,
        checkpoint=checkpoint,
        trigger=trigger,  # type: ignore[arg-type]
        interval=interval,
        value_format=value_format,  # type: ignore[arg-type]
        value_schema=value_schema,
        avro_schemas=schemas,
        schema_registry_url=registry,
        schema_registry_config=registry_config,
        value_subject=value_subject,
        max_offsets_per_trigger=max_offsets_per_trigger,
        client_options=client_options,
    )
    rows = await_query(q, "warehouse", progress)
    typer.echo(f"warehouse: {rows} records loaded into {output}")


@app.command("audit")
def audit(
    topics: str = typer.Option(..., "--topics", help="Comma-separated topics to audit."),
    bootstrap_servers: str = BOOTSTRAP,
    audit_topic: str = typer.Option("odradek-audit", "--audit-topic"),
    window: str = typer.Option("1m", "--window", help="Audit window, e.g. 1m, 10 minutes."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per window."),
    client_set: list[str] | None = typer.Option(None, "--set", help="Client config KEY=VALUE."),
    master: str = MASTER,
    progress: bool | None = PROGRESS,
) -> None:
    """Compare what producers audited with what arrived, per (topic, window)."""
    from odradek.pipelines.audit import audit_rows, run_audit

    spark = _session(master, "audit")
    with _spinner("auditing", progress):
        rows = audit_rows(
            run_audit(
                spark,
                bootstrap_servers=bootstrap_servers,
                topics=[t.strip() for t in topics.split(",") if t.strip()],
                audit_topic=audit_topic,
                window_ms=parse_duration_ms("--window", window),
                client_options=_client_options(client_set),
            )
        )
    bad = 0
    for r in rows:
        if r["status"] in ("missing", "extra"):
            bad += 1
        if as_json:
            typer.echo(
                json.dumps(
                    {k: v for k, v in r.items() if k != "hosts"}
                    | {"hosts": sorted(r["hosts"] or [])}
                )
            )
        else:
            typer.echo(
                f"{r['topic']}\t{r['window_start_ms']}\texpected={r['expected']}\t"
                f"actual={r['actual']}\t{r['status']}"
            )
    complete = sum(r["status"] == "complete" for r in rows)
    typer.echo(f"audit: {complete} complete, {bad} with missing or extra records", err=True)
    raise typer.Exit(1 if bad else 0)


@app.command("page-views")
def page_views(
    source: str = typer.Option("activity", "--source", help="Activity topic (JSON values)."),
    sink: str = typer.Option("page-views-per-minute", "--sink", help="Derived topic."),
    checkpoint: Path = typer.Option(..., "--checkpoint"),
    bootstrap_servers: str = BOOTSTRAP,
    window: str = typer.Option("1 minute", "--window"),
    watermark: str = typer.Option("1 minute", "--watermark"),
    trigger: str = TRIGGER,
    interval: str = typer.Option("10 seconds", "--interval"),
    client_set: list[str] | None = typer.Option(None, "--set", help="Client config KEY=VALUE."),
    master: str = MASTER,
    progress: bool | None = PROGRESS,
) -> None:
    """Derived feed: page views per page per window, with a watermark."""
    from odradek.pipelines.derived import build_page_views_query

    spark = _session(master, "page-views")
    q = build_page_views_query(
        spark,
        bootstrap_servers=bootstrap_servers,
        source_topic=source,
        sink_topic=sink,
        checkpoint=str(checkpoint),
        window=window,
        watermark=watermark,
        trigger=trigger,  # type: ignore[arg-type]
        interval=interval,
        client_options=_client_options(client_set),
    )
    rows = await_query(q, "page-views", progress)
    typer.echo(f"page-views: {rows} activity records read")
