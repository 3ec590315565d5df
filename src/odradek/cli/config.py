"""`odradek config list`: every broker and topic key, as docs/configuration.md lists them.

    odradek config list [--changed] [--config server.properties] [--set key=value ...]
                        [--topics] [--markdown]

Without options: one line per broker key, ``key  type  value  (default ...)  dynamic  meaning``,
where the value is the default (no file given). ``--config``/``--set`` read the settings as
``odradek broker`` does (the same validation: an unknown key or a bad value prints
``error: <key>: <reason>`` and exits with code 2); ``--changed`` prints only the keys whose
value is not the default. ``--topics`` lists the topic keys instead, with the defaults these
settings give them. ``--markdown`` prints docs/configuration.md (defaults only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True)

EXIT_CONFIG = 2


@app.command("list")
def list_(
    changed: Annotated[
        bool, typer.Option("--changed", help="Only the keys set to something else than default.")
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="A Java .properties file with broker settings."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-s", help="key=value, repeatable; overrides the config file."),
    ] = None,
    topics: Annotated[bool, typer.Option("--topics", help="The topic keys instead.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print docs/configuration.md.")
    ] = False,
) -> None:
    """Every broker (or topic) key: type, value, default, Kafka's default, dynamic, meaning."""
    from odradek.broker.config import BrokerConfig, ConfigError, load_properties_file
    from odradek.broker.config.reference import (
        broker_rows,
        format_value,
        render_markdown,
        topic_rows,
    )
    from odradek.broker.dynamic_config import DYNAMIC_KEYS

    defaults = BrokerConfig.default()
    if markdown:
        typer.echo(render_markdown(DYNAMIC_KEYS, defaults.topic_defaults()), nl=False)
        return
    props: dict[str, str] = {}
    if config is not None:
        try:
            props.update(load_properties_file(config))
        except OSError as exc:
            typer.echo(f"error: cannot read {config}: {exc.strerror or exc}", err=True)
            raise typer.Exit(EXIT_CONFIG) from None
    for item in set_ or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            typer.echo(f"error: --set {item!r}: expected key=value", err=True)
            raise typer.Exit(EXIT_CONFIG)
        props[key.strip()] = value
    try:
        cfg = BrokerConfig.from_properties(props)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_CONFIG) from None

    if topics:
        default_rows = {r.name: r for r in topic_rows(defaults.topic_defaults())}
        current_rows = topic_rows(cfg.topic_defaults())
        values = {r.name: r.default for r in current_rows}
    else:
        default_rows = {r.name: r for r in broker_rows(DYNAMIC_KEYS)}
        current_rows = list(default_rows.values())
        values = {r.name: format_value(cfg.get(r.name)) for r in current_rows}
    width = max(len(r.name) for r in current_rows)
    for row in current_rows:
        value = values[row.name]
        default = default_rows[row.name].default
        if changed and value == default:
            continue
        parts = [row.name.ljust(width), row.type.ljust(7), value]
        if value != default:
            parts.append(f"(default {default})")
        if row.kafka_default is not None:
            parts.append(f"(Kafka {row.kafka_default})")
        parts.append("dynamic" if row.dynamic else "static")
        parts.append(row.meaning + (f" [{row.note}]" if row.note else ""))
        typer.echo("  ".join(parts))
