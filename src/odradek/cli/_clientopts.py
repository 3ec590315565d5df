"""Shared helpers of the client-based commands (topics, produce, consume, groups, perf)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_HELP = "Comma-separated host:port list of brokers."


def parse_props(props: list[str] | None) -> dict[str, Any]:
    """``key=value`` strings (Java client keys) -> dict; a bad item exits with code 2."""
    out: dict[str, Any] = {}
    for item in props or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            typer.echo(f"error: expected key=value, got {item!r}", err=True)
            raise typer.Exit(2)
        out[key.strip()] = value.strip()
    return out


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


COMMAND_CONFIG_HELP = (
    "Java client properties file (security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config, "
    "any other client key)."
)
CommandConfig = Annotated[Path | None, typer.Option("--command-config", help=COMMAND_CONFIG_HELP)]


def load_command_config(path: Path | None, kind: str = "admin") -> dict[str, Any]:
    """The client settings in the properties file ``path`` (Java's properties syntax, as
    Kafka's tools read ``--command-config``), checked as a ``kind`` ("admin", "producer",
    "consumer") client's configuration, TLS files and JAAS text included; keys of the other
    kinds are left out, so one file serves every command. A file that cannot
    be read, does not parse, or holds a key or value the client refuses exits with code 2,
    naming the file (and line) and the key. None -> {}."""
    if path is None:
        return {}
    from odradek.client._config import ADMIN, CONSUMER, PRODUCER, parse_config
    from odradek.client._security import ClientSecurity
    from odradek.client.errors import ConfigError
    from odradek.mirror.config import MirrorConfigError, parse_properties

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--command-config {path}: {exc}", 2)
    try:
        props = parse_properties(text, str(path))
    except MirrorConfigError as exc:
        fail(f"--command-config {exc}", 2)
    spec = {"admin": ADMIN, "producer": PRODUCER, "consumer": CONSUMER}[kind]
    # one file serves every command: a key of another kind of client is left out (an admin
    # command ignores linger.ms); a key no client knows is an error
    values: dict[str, Any] = {
        k: v for k, v in props.values.items() if k in spec or (k not in ADMIN and k not in PRODUCER and k not in CONSUMER)
    }
    values.pop("bootstrap.servers", None)  # --bootstrap-server says where
    try:
        parsed = parse_config({"bootstrap.servers": "127.0.0.1:9092", **values}, spec, kind)
        ClientSecurity.from_config(parsed)
    except ConfigError as exc:
        message = str(exc)
        key = next((k for k in props.lines if repr(k) in message or message.startswith(k)), None)
        where = props.where(key) if key else str(path)
        fail(f"--command-config {where}: {exc}", 2)
    return values
