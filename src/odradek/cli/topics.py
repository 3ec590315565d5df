"""`odradek topics`: create, list, describe, alter and delete topics (like kafka-topics.sh).

    odradek topics create T --partitions 3 [--replication-factor 1] [--config k=v ...] [--if-not-exists]
    odradek topics list
    odradek topics describe [T ...]
    odradek topics alter T [--partitions N] [--config k=v ...] [--delete-config k ...]
    odradek topics delete T [T ...]
    odradek topics explain-retention T [--log-dirs DIRS] [--retention-check-interval-ms MS]
    odradek topics reassign T P=B1,B2,... [P=...]      (a cluster: move replicas, data included)
    odradek topics elect-leaders [T ...] [--partition P] [--unclean]
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import datetime
import json
import time
from pathlib import Path
from typing import Annotated

import typer

from ._clientopts import (
    BOOTSTRAP_HELP,
    DEFAULT_BOOTSTRAP,
    CommandConfig,
    fail,
    load_command_config,
    parse_props,
)

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, add_completion=False)

Bootstrap = Annotated[str, typer.Option("--bootstrap-server", "-b", help=BOOTSTRAP_HELP)]


def _admin(bootstrap: str, command_config: Path | None = None):  # type: ignore[no-untyped-def]
    from odradek.client import Admin, KafkaError

    extra = load_command_config(command_config)
    try:
        return Admin({**extra, "bootstrap.servers": bootstrap, "client.id": "odradek-topics"})
    except KafkaError as exc:
        fail(f"cannot reach {bootstrap}: {exc}")


@app.command()
def create(
    topic: Annotated[str, typer.Argument(help="Topic name.")],
    partitions: Annotated[int, typer.Option("--partitions", "-p", help="Number of partitions.")] = 1,
    replication_factor: Annotated[int, typer.Option("--replication-factor", "-r")] = 1,
    config: Annotated[list[str] | None, typer.Option("--config", "-c", help="Topic config key=value, repeatable.")] = None,
    if_not_exists: Annotated[bool, typer.Option("--if-not-exists", help="No error if the topic exists.")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Create a topic."""
    from odradek.client import KafkaError, NewTopic

    cfg = parse_props(config)
    with _admin(bootstrap_server, command_config) as admin:
        try:
            result = admin.create_topics([NewTopic(topic, partitions, replication_factor, cfg)], raise_on_exists=not if_not_exists)
        except KafkaError as exc:
            fail(str(exc))
    if result.get(topic) == 36:
        typer.echo(f"Topic {topic} already exists.")
    else:
        typer.echo(f"Created topic {topic}.")


@app.command("list")
def list_(
    internal: Annotated[bool, typer.Option("--internal", help="Include internal topics.")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """List topic names."""
    with _admin(bootstrap_server, command_config) as admin:
        for name in admin.list_topics(include_internal=internal):
            typer.echo(name)


@app.command()
def describe(
    topics: Annotated[list[str] | None, typer.Argument(help="Topics (default: all).")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Describe topics: partitions, leaders, replicas, ISR and non-default configs."""
    from odradek.client import KafkaError

    with _admin(bootstrap_server, command_config) as admin:
        try:
            descs = admin.describe_topics(topics) if topics else admin.list_topics()
            configs = admin.describe_configs(list(descs)) if descs else {}
        except KafkaError as exc:
            fail(str(exc))
        for name, d in descs.items():
            cfg = ",".join(f"{k}={e.value}" for k, e in sorted(configs.get(name, {}).items()) if not e.is_default and e.value is not None)
            typer.echo(f"Topic: {name}\tTopicId: {d.topic_id or '-'}\tPartitionCount: {d.partition_count}\tConfigs: {cfg}")
            for p in d.partitions:
                replicas = ",".join(map(str, p.replicas))
                isr = ",".join(map(str, p.isr))
                typer.echo(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\tReplicas: {replicas}\tIsr: {isr}")


@app.command()
def alter(
    topic: Annotated[str, typer.Argument(help="Topic name.")],
    partitions: Annotated[int | None, typer.Option("--partitions", "-p", help="New total partition count.")] = None,
    config: Annotated[list[str] | None, typer.Option("--config", "-c", help="Set topic config key=value, repeatable.")] = None,
    delete_config: Annotated[list[str] | None, typer.Option("--delete-config", help="Revert a topic config to its default.")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Add partitions and/or change topic configs."""
    from odradek.client import KafkaError

    changes: dict[str, str | None] = dict(parse_props(config))
    for key in delete_config or []:
        changes[key] = None
    if partitions is None and not changes:
        fail("nothing to alter: give --partitions, --config or --delete-config", 2)
    with _admin(bootstrap_server, command_config) as admin:
        try:
            if partitions is not None:
                admin.create_partitions({topic: partitions})
                typer.echo(f"Topic {topic} now has {partitions} partitions.")
            if changes:
                admin.alter_configs({topic: changes})
                typer.echo(f"Updated configs of topic {topic}.")
        except KafkaError as exc:
            fail(str(exc))


@app.command()
def delete(
    topics: Annotated[list[str], typer.Argument(help="Topics to delete.")],
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Delete topics."""
    from odradek.client import KafkaError

    with _admin(bootstrap_server, command_config) as admin:
        try:
            admin.delete_topics(topics)
        except KafkaError as exc:
            fail(str(exc))
    for t in topics:
        typer.echo(f"Deleted topic {t}.")


@app.command("explain-retention")
def explain_retention(
    topic: Annotated[str, typer.Argument(help="Topic name.")],
    log_dirs: Annotated[
        str, typer.Option("--log-dirs", help="The broker's log.dirs (comma separated).")
    ] = "./odradek-data",
    check_interval_ms: Annotated[
        int,
        typer.Option(
            "--retention-check-interval-ms", help="The broker's log.retention.check.interval.ms."
        ),
    ] = 300_000,
    bootstrap_server: Annotated[
        str | None,
        typer.Option("--bootstrap-server", "-b", help="Read the topic's configs from this broker."),
    ] = None,
    command_config: CommandConfig = None,
) -> None:
    """Per partition: the oldest data kept, the rule that keeps it and when it will go.

    Segments are read from the log dirs (read-only; the broker may run). Topic configs come
    from the broker (DescribeConfigs) with -b, else from the overrides in the log dir's
    odradek-metadata.json over Kafka's defaults. See docs/retention.md."""
    from odradek.storage.config import LogConfig
    from odradek.storage.log import parse_log_dir_name
    from odradek.storage.retention import explain_retention as explain
    from odradek.storage.retention import scan_log_dir

    dirs = [Path(d) for d in log_dirs.split(",") if d]
    overrides: dict[str, str] = {}
    if bootstrap_server:
        from odradek.client import KafkaError

        with _admin(bootstrap_server, command_config) as admin:
            try:
                entries = admin.describe_configs([topic]).get(topic, {})
            except KafkaError as exc:
                fail(str(exc))
            overrides = {k: e.value for k, e in entries.items() if e.value is not None}
    else:
        meta = dirs[0] / "odradek-metadata.json" if dirs else None
        if meta is not None and meta.exists():
            topics = json.loads(meta.read_text()).get("topics", {})
            overrides = dict(topics.get(topic, {}).get("configs", {}) or {})
    known = {k: v for k, v in overrides.items() if k in LogConfig._TOPIC_KEYS}
    try:
        config = LogConfig.from_topic_config(known)
    except ValueError as exc:
        fail(str(exc))
    partitions = []
    for d in dirs:
        for path in sorted(d.glob(f"{topic}-*")):
            try:
                name, partition = parse_log_dir_name(path.name)
            except ValueError:
                continue
            if name == topic and path.is_dir():
                partitions.append((partition, path))
    if not partitions:
        fail(f"no partition of {topic} under {log_dirs}")
    now = int(time.time() * 1000)

    def when(ms: int) -> str:
        if ms < 0:
            return "never (by retention)"
        stamp = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
        return stamp.isoformat(timespec="seconds")

    typer.echo(
        f"Topic: {topic}\tcleanup.policy={config.cleanup_policy} retention.ms={config.retention_ms} "
        f"retention.bytes={config.retention_bytes} segment.ms={config.segment_ms} "
        f"log.retention.check.interval.ms={check_interval_ms}"
    )
    for partition, path in sorted(partitions):
        e = explain(scan_log_dir(path), config, now, retention_check_interval_ms=check_interval_ms)
        typer.echo(
            f"\tPartition: {partition}\tOldestOffset: {e.oldest_offset}\t"
            f"OldestTimestamp: {when(e.oldest_timestamp) if e.oldest_timestamp >= 0 else '-'}\t"
            f"Segments: {e.segments}\tSize: {e.size}\tKeptBy: {e.rule}\t"
            f"DueAt: {when(e.deletable_at_ms)}\tDeletedBy: {when(e.deleted_by_ms)}"
        )
        typer.echo(f"\t\t{e.detail}")


def _parse_assignment(items: list[str]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for item in items:
        p, sep, brokers = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[int(p)] = [int(b) for b in brokers.split(",") if b.strip()]
        except ValueError:
            fail(f"{item!r}: expected PARTITION=BROKER,BROKER,...", 2)
    return out


@app.command()
def reassign(
    topic: Annotated[str, typer.Argument(help="Topic name.")],
    assignment: Annotated[list[str], typer.Argument(help="PARTITION=BROKER,BROKER,... (first: preferred leader).")],
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the reassignment of these partitions.")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Move partitions' replicas to other brokers (AlterPartitionReassignments to the controller)."""
    from kio.schema.alter_partition_reassignments.v0 import request as r

    from odradek.cli._broker_call import load_properties
    from odradek.cli.cluster import to_controller

    props = load_properties(command_config)  # Java's or librdkafka's security keys
    wanted = _parse_assignment(assignment)
    request = r.AlterPartitionReassignmentsRequest(
        timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
        topics=(
            r.ReassignableTopic(
                name=topic,  # type: ignore[arg-type]
                partitions=tuple(
                    r.ReassignablePartition(
                        partition_index=p,  # type: ignore[arg-type]
                        replicas=None if cancel else tuple(b for b in brokers),  # type: ignore[misc]
                    )
                    for p, brokers in sorted(wanted.items())
                ),
            ),
        ),
    )
    try:
        response = to_controller(bootstrap_server, request, properties=props)
    except ConnectionError as exc:
        fail(str(exc))
        return
    if response.error_code != 0:
        fail(f"{response.error_code.name}: {response.error_message or ''}")
    failed = False
    for t in response.responses:
        for p in t.partitions:
            what = "OK" if p.error_code == 0 else f"{p.error_code.name} {p.error_message or ''}"
            failed |= p.error_code != 0
            typer.echo(f"{t.name}-{p.partition_index}: {what}")
    if failed:
        raise typer.Exit(1)


@app.command("elect-leaders")
def elect_leaders(
    topics: Annotated[list[str] | None, typer.Argument(help="Topics (default: every partition).")] = None,
    partition: Annotated[list[int] | None, typer.Option("--partition", "-p", help="Only these partitions.")] = None,
    unclean: Annotated[bool, typer.Option("--unclean", help="Unclean election (may lose records).")] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    command_config: CommandConfig = None,
) -> None:
    """Elect the preferred replica (or, --unclean, any live replica) as leader (ElectLeaders)."""
    from kio.schema.elect_leaders.v2 import request as r

    from odradek.cli._broker_call import load_properties
    from odradek.cli.cluster import metadata, to_controller

    props = load_properties(command_config)  # Java's or librdkafka's security keys
    selected = None
    if topics:
        try:
            md = metadata(bootstrap_server, properties=props)
        except ConnectionError as exc:
            fail(str(exc))
            return
        counts = {t.name: len(t.partitions) for t in md.topics}
        selected = tuple(
            r.TopicPartitions(
                topic=t,  # type: ignore[arg-type]
                partitions=tuple(partition or range(counts.get(t, 0))),  # type: ignore[arg-type]
            )
            for t in topics
        )
    request = r.ElectLeadersRequest(
        election_type=1 if unclean else 0,  # type: ignore[arg-type]
        topic_partitions=selected,
        timeout=datetime.timedelta(seconds=30),  # type: ignore[arg-type]
    )
    try:
        response = to_controller(bootstrap_server, request, properties=props)
    except ConnectionError as exc:
        fail(str(exc))
        return
    if response.error_code != 0:
        fail(response.error_code.name)
    for result in response.replica_election_results:
        for p in result.partition_result:
            what = "OK" if p.error_code == 0 else p.error_code.name
            typer.echo(f"{result.topic}-{p.partition_id}: {what}")
