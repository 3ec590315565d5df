"""Shared helpers of the client-based commands (topics, produce, consume, perf)."""

from __future__ import annotations

from typing import Any

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


def fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
