"""The `odradek` command.

Each command group lives in its own module under ``odradek.cli`` and exposes a
``typer.Typer`` named ``app``; a module whose app has only a callback is one command
(``odradek broker``), any other is a command group (``odradek topics create``).
Sub-apps are imported lazily so that `odradek broker` starts fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

import typer

from odradek.cli import OWN_PARSER, run_own_parser

app = typer.Typer(
    name="odradek",
    help="odradek: a Kafka-compatible distributed commit log in Python.",
    no_args_is_help=True,
    add_completion=False,
)

# (command name, module under odradek.cli, help). Each module exposes `app: typer.Typer`.
SUBCOMMANDS: list[tuple[str, str, str]] = [
    ("broker", "broker", "Run a broker."),
    ("topics", "topics", "Create, list, describe, alter and delete topics."),
    ("produce", "produce", "Produce lines from stdin to a topic."),
    ("consume", "consume", "Consume records from a topic and print them."),
    ("perf", "perf", "Producer and consumer performance tests."),
    ("groups", "groups", "List, describe, reset and delete consumer groups."),
    ("pipeline", "pipeline", "Run a Spark pipeline (warehouse, audit, derived feed)."),
    ("cluster", "cluster", "A local development cluster on ZooKeeper: up, status, down."),
    ("console", "console", "Serve the web console and /metrics for any Kafka-compatible cluster."),
    ("config", "config", "The configuration reference: every broker and topic key."),
    ("mirror", "mirror", "Mirror topics between clusters, configured as MirrorMaker 2."),
    ("acls", "acls", "Add, list and remove ACLs."),
    ("users", "users", "SCRAM users: add, list, remove (AlterUserScramCredentials)."),
    ("quotas", "quotas", "Client quotas: alter, describe (AlterClientQuotas)."),
]


@app.callback()
def _root() -> None:
    """odradek: a Kafka-compatible distributed commit log in Python."""
    # An explicit callback keeps `odradek` a command group even when only the one command
    # being run is registered (Typer would otherwise make a lone command the whole app).


def _register(only: str | None = None) -> None:
    """Register the command modules; ``only``: just that command's (the others' imports, the
    client and kio among them, would otherwise slow `odradek broker`'s start)."""
    for name, module_name, help_text in SUBCOMMANDS:
        if only is not None and name != only:
            continue
        if name in OWN_PARSER:
            app.command(
                name=name,
                help=help_text,
                add_help_option=False,
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            )(_passthrough(module_name))
            continue
        try:
            module = importlib.import_module(f"odradek.cli.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"odradek.cli.{module_name}":
                raise
            continue
        sub: typer.Typer = module.app
        single = sub.registered_callback
        if not sub.registered_commands and single is not None and single.callback is not None:
            # A module that is one command (broker, produce, consume): register the function
            # itself, so its usage line reads `odradek produce TOPIC`, not `... COMMAND [ARGS]`.
            app.command(name=name, help=help_text)(single.callback)
        else:
            app.add_typer(sub, name=name, help=help_text)


def _passthrough(module_name: str) -> Callable[[typer.Context], None]:
    def command(ctx: typer.Context) -> None:
        module = importlib.import_module(f"odradek.cli.{module_name}")
        raise typer.Exit(module.main(ctx.args))

    return command


def main() -> None:
    run_own_parser(sys.argv[1:])
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    named = args[0] if args and args[0] in {name for name, _, _ in SUBCOMMANDS} else None
    _register(named)  # help, no command or an unknown one: all of them, to list them
    app()
