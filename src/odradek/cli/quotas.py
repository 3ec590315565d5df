"""`odradek quotas alter|describe`: client quotas through any broker (AlterClientQuotas,
DescribeClientQuotas), in ``kafka-configs``' terms::

    odradek quotas alter --user alice --client-id app \\
        --add producer_byte_rate=1024,consumer_byte_rate=2048 --delete request_percentage
    odradek quotas alter --user-defaults --add request_percentage=50
    odradek quotas describe --user alice          # that user's own entity
    odradek quotas describe --entity-type users   # every user entity
    odradek quotas describe                       # everything

Entities: ``--user NAME`` or ``--user-defaults`` (``<default>``), ``--client-id NAME`` or
``--client-defaults``, either or both (``kafka-configs --entity-type users --entity-name ..``
is the same as ``--user``). ``--add``/``--add-config`` takes ``key=value,...`` and
``--delete``/``--delete-config`` takes ``key,...`` with Kafka's keys ``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage`` and ``controller_mutation_rate``. ``describe``
filters as ``kafka-configs --describe`` does (only entities with exactly the parts given; a
part given by ``--entity-type`` matches any name); with no filter every entity is listed.
Output lines: ``Quota configs for user-principal 'alice', client-id 'app' are
producer_byte_rate=1024.0, consumer_byte_rate=2048.0``. Bad arguments: a message, exit 2;
a broker's refusal: a message, exit 1.

``--command-config`` reads a Java client's properties file (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config`` or ``sasl.username``/``sasl.password``,
``ssl.truststore.*``, ``ssl.keystore.*``), as ``odradek users`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from odradek.cli._broker_call import call_broker, load_properties
from odradek.cli._clientopts import BOOTSTRAP_HELP, DEFAULT_BOOTSTRAP, fail

app = typer.Typer(no_args_is_help=True, help="Client quotas: alter and describe.")

KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
USER, CLIENT_ID = "user", "client-id"

_BOOTSTRAP = typer.Option(DEFAULT_BOOTSTRAP, "--bootstrap-server", "-b", help=BOOTSTRAP_HELP)
_CONFIG = typer.Option(None, "--command-config", help="Client security properties file.")
_USER = typer.Option(None, "--user", help="User principal name.")
_USER_DEFAULTS = typer.Option(False, "--user-defaults", help="The default user (<default>).")
_CLIENT = typer.Option(None, "--client-id", help="Client id.")
_CLIENT_DEFAULTS = typer.Option(
    False, "--client-defaults", help="The default client id (<default>)."
)
_ENTITY_TYPE = typer.Option(
    None, "--entity-type", help="users or clients (kafka-configs); repeatable."
)
_ENTITY_NAME = typer.Option(
    None, "--entity-name", help="Name for the --entity-type at the same position."
)


def _usage(message: str) -> None:
    fail(message, 2)


def _call(bootstrap: str, command_config: Path | None, request: Any) -> Any:
    return call_broker(bootstrap, load_properties(command_config), request, "odradek-quotas")


def _entity(
    user: str | None,
    user_defaults: bool,
    client_id: str | None,
    client_defaults: bool,
    entity_types: list[str] | None,
    entity_names: list[str] | None,
) -> dict[str, str | None]:
    """{entity type: name, None for <default>}; kafka-configs' --entity-type/--entity-name
    pairs too (a missing name: the type's default, as kafka-configs' --entity-default)."""
    parts: dict[str, str | None] = {}

    def add(kind: str, name: str | None) -> None:
        if kind in parts:
            _usage(f"the {kind} is given twice")
        if name is not None and name == "":
            _usage(f"empty {kind} name")
        parts[kind] = name

    if user is not None and user_defaults:
        _usage("give --user or --user-defaults, not both")
    if client_id is not None and client_defaults:
        _usage("give --client-id or --client-defaults, not both")
    if user is not None or user_defaults:
        add(USER, user)
    if client_id is not None or client_defaults:
        add(CLIENT_ID, client_id)
    names = list(entity_names or [])
    for i, kind in enumerate(entity_types or []):
        add(_entity_type(kind), names[i] if i < len(names) else None)
    if len(names) > len(entity_types or []):
        _usage("--entity-name without its --entity-type")
    return parts


def _entity_type(kind: str) -> str:
    mapping = {"users": USER, "user": USER, "clients": CLIENT_ID, "client-id": CLIENT_ID}
    if kind not in mapping:
        _usage(f"--entity-type: users or clients, got {kind!r}")
    return mapping[kind]


def _parse_add(items: list[str] | None) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for item in items or []:
        for pair in item.split(","):
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep:
                _usage(f"--add: expected key=value, got {pair!r}")
            if key not in KEYS:
                _usage(f"unknown quota {key!r} (one of {', '.join(KEYS)})")
            try:
                number = float(value)
            except ValueError:
                _usage(f"{key}: not a number: {value!r}")
            if number <= 0:
                _usage(f"{key}: must be positive, got {value}")
            out.append((key, number))
    return out


def _parse_delete(items: list[str] | None) -> list[str]:
    out: list[str] = []
    for item in items or []:
        for key in (k.strip() for k in item.split(",")):
            if not key:
                continue
            if key not in KEYS:
                _usage(f"unknown quota {key!r} (one of {', '.join(KEYS)})")
            out.append(key)
    return out


def _describe_entity(parts: dict[str, str | None]) -> str:
    words = []
    for kind, label in ((USER, "user-principal"), (CLIENT_ID, "client-id")):
        if kind in parts:
            name = parts[kind]
            words.append(f"the default {label}" if name is None else f"{label} '{name}'")
    return ", ".join(words)


@app.command("alter")
def alter(
    user: str | None = _USER,
    user_defaults: bool = _USER_DEFAULTS,
    client_id: str | None = _CLIENT,
    client_defaults: bool = _CLIENT_DEFAULTS,
    entity_type: list[str] | None = _ENTITY_TYPE,
    entity_name: list[str] | None = _ENTITY_NAME,
    add: list[str] | None = typer.Option(
        None, "--add", "--add-config", help="key=value[,key=value...] to set."
    ),
    delete: list[str] | None = typer.Option(
        None, "--delete", "--delete-config", help="key[,key...] to remove."
    ),
    validate_only: bool = typer.Option(False, "--validate-only", help="Check, change nothing."),
    bootstrap: str = _BOOTSTRAP,
    command_config: Path | None = _CONFIG,
) -> None:
    """Set (--add) and remove (--delete) quotas of one entity."""
    from kio.schema.alter_client_quotas.v1 import request as r

    parts = _entity(user, user_defaults, client_id, client_defaults, entity_type, entity_name)
    if not parts:
        _usage("name an entity: --user/--user-defaults and/or --client-id/--client-defaults")
    sets, removes = _parse_add(add), _parse_delete(delete)
    if not sets and not removes:
        _usage("nothing to change: give --add and/or --delete")
    keys = [k for k, _ in sets] + removes
    if len(set(keys)) != len(keys):
        _usage("a quota is named twice in --add/--delete")
    request = r.AlterClientQuotasRequest(
        entries=(
            r.EntryData(
                entity=tuple(
                    r.EntityData(entity_type=kind, entity_name=name) for kind, name in parts.items()
                ),
                ops=tuple(r.OpData(key=k, value=r.f64(v), remove=False) for k, v in sets)
                + tuple(r.OpData(key=k, value=r.f64(0.0), remove=True) for k in removes),
            ),
        ),
        validate_only=validate_only,
    )
    response = _call(bootstrap, command_config, request)
    for entry in response.entries:
        if entry.error_code.value != 0:
            fail(f"{entry.error_code.name}: {entry.error_message}")
    verb = "Validated" if validate_only else "Completed updating"
    typer.echo(f"{verb} config for {_describe_entity(parts)}.")


@app.command("describe")
def describe(
    user: str | None = _USER,
    user_defaults: bool = _USER_DEFAULTS,
    client_id: str | None = _CLIENT,
    client_defaults: bool = _CLIENT_DEFAULTS,
    entity_type: list[str] | None = _ENTITY_TYPE,
    bootstrap: str = _BOOTSTRAP,
    command_config: Path | None = _CONFIG,
) -> None:
    """The quotas of the entities the filter matches."""
    from kio.schema.describe_client_quotas.v1 import request as r

    from odradek.security.quotas import java_double

    components: list[Any] = []
    given: set[str] = set()

    def component(kind: str, match_type: int, match: str | None) -> None:
        if kind in given:
            _usage(f"the {kind} is given twice")
        given.add(kind)
        components.append(
            r.ComponentData(entity_type=kind, match_type=r.i8(match_type), match=match)
        )

    if user is not None and user_defaults:
        _usage("give --user or --user-defaults, not both")
    if client_id is not None and client_defaults:
        _usage("give --client-id or --client-defaults, not both")
    if user is not None:
        component(USER, 0, user)
    elif user_defaults:
        component(USER, 1, None)
    if client_id is not None:
        component(CLIENT_ID, 0, client_id)
    elif client_defaults:
        component(CLIENT_ID, 1, None)
    for kind in entity_type or []:
        component(_entity_type(kind), 2, None)
    request = r.DescribeClientQuotasRequest(components=tuple(components), strict=bool(components))
    response = _call(bootstrap, command_config, request)
    if response.error_code.value != 0:
        fail(f"{response.error_code.name}: {response.error_message}")
    lines = []
    for entry in response.entries or ():
        parts = {e.entity_type: e.entity_name for e in entry.entity}
        values = ", ".join(f"{v.key}={java_double(v.value)}" for v in entry.values)
        lines.append(f"Quota configs for {_describe_entity(parts)} are {values}")
    for line in sorted(lines):
        typer.echo(line)
