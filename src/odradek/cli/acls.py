"""`odradek acls`: add, list and remove ACLs (like kafka-acls.sh --bootstrap-server).

    odradek acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
    odradek acls add --deny-principal User:bob --deny-host 10.0.0.9 --operation All --group '*'
    odradek acls add --allow-principal User:etl --operation Write --topic pay- --resource-pattern-type prefixed
    odradek acls list [--topic orders] [--principal User:alice] [--resource-pattern-type match]
    odradek acls remove --allow-principal User:alice --operation Read --topic orders

Resources: ``--topic``, ``--group``, ``--transactional-id`` (repeatable) and ``--cluster``.
Operations and pattern types take Kafka's names in any case (``Read``, ``DESCRIBE_CONFIGS``,
``prefixed``). ``--command-config FILE`` reads client properties (``key=value`` lines, as
Kafka's tools) merged into the admin client's config (odradek.client: TLS and SASL with the
Java client's keys; librdkafka's ``sasl.username``/``sasl.password``/``ssl.ca.location``, as in
the file ``odradek cluster up --security`` writes, are read as their Java equivalents). The requests are CreateAcls,
DescribeAcls and DeleteAcls v1, sent to one broker (every broker shares the ACLs).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ._clientopts import BOOTSTRAP_HELP, DEFAULT_BOOTSTRAP, fail

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, add_completion=False)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help=BOOTSTRAP_HELP)]
CommandConfig = Annotated[
    Path | None, typer.Option("--command-config", help="Client properties file (key=value lines).")
]
Topics = Annotated[list[str] | None, typer.Option("--topic", help="Topic (repeatable; * for all).")]
Groups = Annotated[list[str] | None, typer.Option("--group", help="Group (repeatable; * for all).")]
TxnIds = Annotated[list[str] | None, typer.Option("--transactional-id", help="Transactional id.")]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
PatternOpt = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type", help="literal, prefixed (list, remove: also any, match)."
    ),
]
Operations = Annotated[
    list[str] | None,
    typer.Option("--operation", help="Operation (repeatable): Read, Write, All..."),
]
AllowP = Annotated[
    list[str] | None, typer.Option("--allow-principal", help="Principal allowed (User:name).")
]
DenyP = Annotated[list[str] | None, typer.Option("--deny-principal", help="Principal denied.")]
AllowH = Annotated[list[str] | None, typer.Option("--allow-host", help="Host allowed (default *).")]
DenyH = Annotated[list[str] | None, typer.Option("--deny-host", help="Host denied (default *).")]

VERSION = 1


def _config(bootstrap: str, command_config: Path | None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": "odradek-acls"}
    if command_config is not None:
        try:
            text = command_config.read_text()
        except OSError as exc:
            fail(f"cannot read {command_config}: {exc}")
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                fail(f"{command_config}: expected key=value, got {line!r}")
            config[key.strip()] = value.strip()
    return java_client_keys(config)


LIBRDKAFKA_ONLY = ("sasl.username", "sasl.password", "sasl.mechanisms", "ssl.ca.location")


def java_client_keys(props: dict[str, Any]) -> dict[str, Any]:
    """A client properties file in librdkafka's keys (what ``odradek cluster up --security``
    writes for kcat and confluent-kafka) as the Java client's, which odradek.client reads:
    ``sasl.mechanisms`` -> ``sasl.mechanism``; ``sasl.username``/``sasl.password`` -> a
    ``sasl.jaas.config`` for that mechanism's login module; ``ssl.ca.location`` -> a PEM
    ``ssl.truststore.location``. Keys the Java client has win over librdkafka's."""
    out = {k: v for k, v in props.items() if k not in LIBRDKAFKA_ONLY}
    if "sasl.mechanisms" in props and "sasl.mechanism" not in props:
        out["sasl.mechanism"] = props["sasl.mechanisms"]
    if "ssl.ca.location" in props and "ssl.truststore.location" not in props:
        out["ssl.truststore.location"] = props["ssl.ca.location"]
        out["ssl.truststore.type"] = "PEM"
    if "sasl.username" in props and "sasl.jaas.config" not in props:
        from odradek.security.jaas import (
            OAUTHBEARER_LOGIN_MODULE,
            PLAIN_LOGIN_MODULE,
            SCRAM_LOGIN_MODULE,
        )

        mechanism = str(out.get("sasl.mechanism", "GSSAPI")).upper()
        module = {"PLAIN": PLAIN_LOGIN_MODULE, "OAUTHBEARER": OAUTHBEARER_LOGIN_MODULE}.get(
            mechanism, SCRAM_LOGIN_MODULE
        )

        def quoted(value: Any) -> str:
            return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'

        out["sasl.jaas.config"] = (
            f"{module} required username={quoted(props['sasl.username'])} "
            f"password={quoted(props.get('sasl.password', ''))};"
        )
    return out


def _enum(kind: str, name: str) -> int:
    """Kafka's name in any spelling: ``ClusterAction``, ``CLUSTER_ACTION``, ``cluster-action``."""
    import re

    from odradek.security.acls import AclOperation, PatternType

    enum: Any = {"operation": AclOperation, "pattern": PatternType}[kind]
    if name.isalpha() and not name.isupper() and not name.islower():
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", name)
    try:
        return int(enum[name.replace("-", "_").upper()])
    except KeyError:
        fail(f"unknown {kind} {name!r}")
        raise


def _resources(
    topics: list[str] | None, groups: list[str] | None, txn_ids: list[str] | None, cluster: bool
) -> list[tuple[int, str]]:
    from odradek.security.acls import CLUSTER_NAME, ResourceType

    out = [(int(ResourceType.TOPIC), t) for t in topics or ()]
    out += [(int(ResourceType.GROUP), g) for g in groups or ()]
    out += [(int(ResourceType.TRANSACTIONAL_ID), t) for t in txn_ids or ()]
    if cluster:
        out.append((int(ResourceType.CLUSTER), CLUSTER_NAME))
    return out


def _entries(
    allow_p: list[str] | None,
    deny_p: list[str] | None,
    allow_h: list[str] | None,
    deny_h: list[str] | None,
) -> list[tuple[str, str, int]]:
    """(principal, host, permission code) for each principal and host given."""
    out = [(p, h, 3) for p in allow_p or () for h in (allow_h or ["*"])]
    out += [(p, h, 2) for p in deny_p or () for h in (deny_h or ["*"])]
    return out


async def _call(config: dict[str, Any], entity: Any) -> Any:
    from odradek.client.aio.admin import AsyncAdmin

    admin = AsyncAdmin(config)
    await admin.start()
    try:
        conn = await admin._cluster.any_connection()
        return await conn.request(entity)
    finally:
        await admin.close()


def _run(config: dict[str, Any], entity: Any) -> Any:
    from odradek.client import KafkaError

    try:
        return asyncio.run(_call(config, entity))
    except (KafkaError, OSError) as exc:
        fail(f"cannot reach {config['bootstrap.servers']}: {exc}")


def _kio(api_key: int, name: str | None = None) -> Any:
    import sys

    from kio.index import load_request_schema

    cls = load_request_schema(api_key, VERSION)
    return cls if name is None else getattr(sys.modules[cls.__module__], name)


def _describe_line(
    resource_type: int, name: str, pattern: int, principal: str, host: str, op: int, perm: int
) -> str:
    from odradek.security.acls import (
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    return (
        f"ResourcePattern(resourceType={ResourceType(resource_type).name}, name={name}, "
        f"patternType={PatternType(pattern).name}) principal={principal}, host={host}, "
        f"operation={AclOperation(op).name}, permissionType={AclPermissionType(perm).name}"
    )


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        from kio.schema.errors import ErrorCode

        fail(f"{what}: {ErrorCode(code).name.upper()}{': ' + message if message else ''}")


@dataclass(frozen=True)
class _Given:
    """The options ``add`` and ``remove`` share, as given: resources ``(resource type, name)``,
    entries ``(principal, host, permission code)``, Kafka's operation and pattern type names,
    and where to send the request."""

    resources: list[tuple[int, str]]
    entries: list[tuple[str, str, int]]
    operations: list[str]
    pattern: str
    bootstrap_server: str
    command_config: Path | None

    def config(self) -> dict[str, Any]:
        return _config(self.bootstrap_server, self.command_config)


def _binding_command(name: str) -> Callable[[Callable[[_Given], None]], Callable[[_Given], None]]:
    """Registers the decorated ``run(given)`` as the command ``name`` with the options ``add``
    and ``remove`` share; its docstring is the command's help."""

    def register(run: Callable[[_Given], None]) -> Callable[[_Given], None]:
        @app.command(name, help=inspect.getdoc(run))
        def command(
            allow_principal: AllowP = None,
            deny_principal: DenyP = None,
            allow_host: AllowH = None,
            deny_host: DenyH = None,
            operation: Operations = None,
            topic: Topics = None,
            group: Groups = None,
            transactional_id: TxnIds = None,
            cluster: Cluster = False,
            resource_pattern_type: PatternOpt = "literal",
            bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
            command_config: CommandConfig = None,
        ) -> None:
            run(
                _Given(
                    _resources(topic, group, transactional_id, cluster),
                    _entries(allow_principal, deny_principal, allow_host, deny_host),
                    list(operation or ()),
                    resource_pattern_type,
                    bootstrap_server,
                    command_config,
                )
            )

        return run

    return register


def _describe(resource: Any, pattern: int, acl: Any) -> str:
    """``_describe_line`` of the resource fields of ``resource`` (``resource_type``,
    ``resource_name``) and the entry fields of ``acl`` (``principal``, ``host``, ``operation``,
    ``permission_type``)."""
    return _describe_line(
        resource.resource_type,
        resource.resource_name,
        pattern,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


@_binding_command("add")
def add(given: _Given) -> None:
    """Add ACLs: every principal x host x operation x resource given."""
    ops = [_enum("operation", o) for o in given.operations]
    if not given.resources or not given.entries or not ops:
        fail(
            "give a resource (--topic, --group, --transactional-id, --cluster), a principal and an --operation",
            2,
        )
    pattern = _enum("pattern", given.pattern)
    creation = _kio(30, "AclCreation")
    creations = tuple(
        creation(
            resource_type=rt,
            resource_name=name,
            resource_pattern_type=pattern,
            principal=p,
            host=h,
            operation=op,
            permission_type=perm,
        )
        for rt, name in given.resources
        for p, h, perm in given.entries
        for op in ops
    )
    answer = _run(given.config(), _kio(30)(creations=creations))
    for c, r in zip(creations, answer.results, strict=True):
        _check(int(r.error_code), r.error_message, "CreateAcls")
        typer.echo("Added " + _describe(c, c.resource_pattern_type, c))


def _filters(resources: list[tuple[int, str]], pattern: int) -> list[tuple[int, str | None, int]]:
    if not resources:
        return [(1, None, pattern)]  # ANY resource
    return [(rt, name, pattern) for rt, name in resources]


@app.command("list")
def list_(
    principal: Annotated[
        str | None, typer.Option("--principal", help="Only this principal's ACLs.")
    ] = None,
    topic: Topics = None,
    group: Groups = None,
    transactional_id: TxnIds = None,
    cluster: Cluster = False,
    resource_pattern_type: PatternOpt = "any",
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """List the ACLs (all, or those matching the resources and principal given)."""
    config = _config(bootstrap_server, command_config)
    pattern = _enum("pattern", resource_pattern_type)
    for rt, name, pt in _filters(_resources(topic, group, transactional_id, cluster), pattern):
        answer = _run(
            config,
            _kio(29)(
                resource_type_filter=rt,
                resource_name_filter=name,
                pattern_type_filter=pt,
                principal_filter=principal,
                host_filter=None,
                operation=1,
                permission_type=1,
            ),
        )
        _check(int(answer.error_code), answer.error_message, "DescribeAcls")
        for res in answer.resources:
            for a in res.acls:
                typer.echo(_describe(res, res.pattern_type, a))


@_binding_command("remove")
def remove(given: _Given) -> None:
    """Remove the ACLs matching the resources, principals, hosts and operations given (none
    given: any)."""
    pattern = _enum("pattern", given.pattern)
    ops = [_enum("operation", o) for o in given.operations] or [1]
    entries: list[tuple[str | None, str | None, int]] = list(given.entries)
    if not entries:
        entries = [(None, None, 1)]
    flt = _kio(31, "DeleteAclsFilter")
    filters = tuple(
        flt(
            resource_type_filter=rt,
            resource_name_filter=name,
            pattern_type_filter=pt,
            principal_filter=p,
            host_filter=h,
            operation=op,
            permission_type=perm,
        )
        for rt, name, pt in _filters(given.resources, pattern)
        for p, h, perm in entries
        for op in ops
    )
    answer = _run(given.config(), _kio(31)(filters=filters))
    for result in answer.filter_results:
        _check(int(result.error_code), result.error_message, "DeleteAcls")
        for m in result.matching_acls:
            typer.echo("Removed " + _describe(m, m.pattern_type, m))
