"""`odradek users scram add|list|remove`: SCRAM credentials through any broker (KIP-554's
AlterUserScramCredentials / DescribeUserScramCredentials), like ``kafka-configs --entity-type
users``. The password never leaves this process: a random salt and the salted password are
sent.

``--command-config`` reads a Java client's properties file: ``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config`` (``username=".." password=".."``) or
``sasl.username``/``sasl.password``, ``ssl.truststore.*`` (or librdkafka's ``ssl.ca.location``),
``ssl.keystore.*``, ``ssl.endpoint.identification.algorithm``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from odradek.cli._broker_call import call_broker, load_properties
from odradek.cli._clientopts import BOOTSTRAP_HELP, DEFAULT_BOOTSTRAP, fail

app = typer.Typer(no_args_is_help=True, help="SCRAM users.")
scram = typer.Typer(no_args_is_help=True, help="Add, list and remove SCRAM credentials.")
app.add_typer(scram, name="scram")

_BOOTSTRAP = typer.Option(DEFAULT_BOOTSTRAP, "--bootstrap-server", "-b", help=BOOTSTRAP_HELP)
_CONFIG = typer.Option(None, "--command-config", help="Client security properties file.")
_CLIENT_ID = "odradek-users"


@scram.command("add")
def add(
    user: str = typer.Option(..., "--user", help="User name."),
    password: str = typer.Option(
        ..., "--password", prompt=True, hide_input=True, help="The user's password."
    ),
    mechanism: str = typer.Option("SCRAM-SHA-512", "--mechanism", help="SCRAM-SHA-256 or -512."),
    iterations: int = typer.Option(8192, "--iterations", help="4096..16384."),
    bootstrap: str = _BOOTSTRAP,
    command_config: Path | None = _CONFIG,
) -> None:
    """Set a user's credential for one mechanism (added or replaced)."""
    from kio.schema.alter_user_scram_credentials.v0 import request as r

    from odradek.security.scram import MECHANISM_TYPES, MECHANISMS, salted_password

    mech = mechanism.upper()
    if mech not in MECHANISMS:
        fail(f"unknown mechanism {mechanism} (SCRAM-SHA-256, SCRAM-SHA-512)")
    salt = os.urandom(32)
    salted = salted_password(MECHANISMS[mech], password.encode(), salt, iterations)
    request = r.AlterUserScramCredentialsRequest(
        deletions=(),
        upsertions=(
            r.ScramCredentialUpsertion(
                name=user,
                mechanism=r.i8(MECHANISM_TYPES[mech]),
                iterations=r.i32(iterations),
                salt=salt,
                salted_password=salted,
            ),
        ),
    )
    _report(call_broker(bootstrap, load_properties(command_config), request, _CLIENT_ID), f"{user}: {mech} set")


@scram.command("remove")
def remove(
    user: str = typer.Option(..., "--user", help="User name."),
    mechanism: str = typer.Option("SCRAM-SHA-512", "--mechanism", help="SCRAM-SHA-256 or -512."),
    bootstrap: str = _BOOTSTRAP,
    command_config: Path | None = _CONFIG,
) -> None:
    """Remove a user's credential for one mechanism."""
    from kio.schema.alter_user_scram_credentials.v0 import request as r

    from odradek.security.scram import MECHANISM_TYPES

    mech = mechanism.upper()
    if mech not in MECHANISM_TYPES:
        fail(f"unknown mechanism {mechanism} (SCRAM-SHA-256, SCRAM-SHA-512)")
    request = r.AlterUserScramCredentialsRequest(
        deletions=(r.ScramCredentialDeletion(name=user, mechanism=r.i8(MECHANISM_TYPES[mech])),),
        upsertions=(),
    )
    _report(call_broker(bootstrap, load_properties(command_config), request, _CLIENT_ID), f"{user}: {mech} removed")


def _report(response: Any, ok: str) -> None:
    for result in response.results:
        if result.error_code.value != 0:
            fail(f"{result.user}: {result.error_code.name}: {result.error_message}")
    typer.echo(ok)


@scram.command("list")
def list_users(
    bootstrap: str = _BOOTSTRAP,
    command_config: Path | None = _CONFIG,
) -> None:
    """Every user with a SCRAM credential: mechanism and iterations (never keys)."""
    from kio.schema.describe_user_scram_credentials.v0 import request as r

    from odradek.security.scram import MECHANISM_TYPES

    names = {v: k for k, v in MECHANISM_TYPES.items()}
    response = call_broker(
        bootstrap,
        load_properties(command_config),
        r.DescribeUserScramCredentialsRequest(users=None),
        _CLIENT_ID,
    )
    if response.error_code.value != 0:
        fail(f"{response.error_code.name}: {response.error_message}")
    for result in response.results:
        for info in result.credential_infos:
            mech = names.get(int(info.mechanism), str(info.mechanism))
            typer.echo(f"{result.user}\t{mech}\titerations={info.iterations}")
