"""`odradek groups`: list, describe, reset offsets of and delete consumer groups.

Like Kafka's ``kafka-consumer-groups.sh``::

    odradek groups list
    odradek groups describe GROUP
    odradek groups reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest |
        --to-offset N | --to-datetime ISO | --shift-by N) [--execute]
    odradek groups delete GROUP

``reset-offsets`` is a dry run unless ``--execute`` is given, and is refused while the group
has members (Kafka's rule: offsets of an active group would be overwritten by its commits).
``--to-offset`` and ``--shift-by`` are clamped into [log start offset, log end offset].
The new offsets are committed ``COMMIT_CHUNK`` partitions per OffsetCommit, with a rich progress
bar on stderr (``--progress`` / ``--no-progress``; by default when stderr is a terminal).

It talks to the cluster through ``odradek.client.Admin`` (ListGroups, DescribeGroups,
OffsetFetch, OffsetCommit, ListOffsets, DeleteGroups, Metadata at the versions the client
negotiates; coordinator lookup and its retries are the client's).
"""

from __future__ import annotations

# Imports inside the commands are deliberate: each command loads only what it uses (the client,
# the broker, storage, rich, pyspark), so that `odradek --help` and `odradek broker` start fast.
import datetime
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from odradek.client import Admin, KafkaError, TopicPartition

from ._clientopts import CommandConfig, load_command_config

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, add_completion=False)

BOOTSTRAP_HELP = "host:port of a broker."
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "odradek-groups"
_UNKNOWN_MEMBER_ID = 25
COMMIT_CHUNK = 500
"""Partitions per OffsetCommit request when resetting many (one request per chunk)."""


class GroupsError(Exception):
    pass


@contextmanager
def _admin(bootstrap: str, extra: dict[str, Any]) -> Iterator[Admin]:
    """An Admin client for ``bootstrap`` with the ``--command-config`` settings ``extra``;
    client errors become GroupsError."""
    try:
        admin = Admin({**extra, "bootstrap.servers": bootstrap, "client.id": CLIENT_ID})
    except KafkaError as exc:
        raise GroupsError(str(exc)) from exc
    try:
        yield admin
    except KafkaError as exc:
        raise GroupsError(str(exc)) from exc
    finally:
        admin.close()


def _describe(admin: Admin, group: str) -> Any:
    g = admin.describe_groups([group])[group]
    if g.error_code != 0:
        raise GroupsError(f"DescribeGroups({group}): {KafkaError('', g.error_code).name}")
    return g


def _partitions(admin: Admin, topic: str) -> list[int]:
    try:
        (description,) = admin.describe_topics([topic]).values()
    except KafkaError as exc:
        raise GroupsError(f"topic {topic}: {exc.name}") from exc
    return sorted(p.partition for p in description.partitions)


def _list_offsets(
    admin: Admin, tps: list[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """-2 earliest, -1 latest, else first offset with timestamp >= it (-1 if none)."""
    return {
        tp: offset
        for tp, (offset, _ts) in admin.list_offsets(dict.fromkeys(tps, timestamp)).items()
    }


def _committed(admin: Admin, group: str) -> dict[TopicPartition, int]:
    return {tp: om.offset for tp, om in admin.list_group_offsets(group).items() if om is not None}


def _first_timestamps(
    bootstrap: str, positions: dict[TopicPartition, int], timeout_s: float = 5.0,
    extra: dict[str, Any] | None = None,
) -> dict[TopicPartition, int]:
    """Timestamp of the record at each position (the first one a group has not consumed), read
    with a group-less consumer; partitions that give no record within ``timeout_s`` are left out."""
    from odradek.client import Consumer

    out: dict[TopicPartition, int] = {}
    if not positions:
        return out
    config = {
        **(extra or {}),
        "bootstrap.servers": bootstrap,
        "client.id": CLIENT_ID,
        "enable.auto.commit": False,
        "max.partition.fetch.bytes": 65536,
        "fetch.max.wait.ms": 100,
    }
    with Consumer(config) as consumer:
        consumer.assign(list(positions))
        for tp, offset in positions.items():
            consumer.seek(tp, offset)
        deadline = time.monotonic() + timeout_s
        while len(out) < len(positions) and time.monotonic() < deadline:
            for r in consumer.poll(timeout=max(0.0, deadline - time.monotonic())):
                tp = TopicPartition(r.topic, r.partition)
                if tp in positions and tp not in out and r.offset >= positions[tp]:
                    out[tp] = r.timestamp
                    consumer.pause(tp)
    return out


def _table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _run(fn: Any) -> None:
    try:
        fn()
    except (GroupsError, KafkaError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


# -- commands ---------------------------------------------------------------------------------


@app.command("list")
def list_groups(
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
    command_config: CommandConfig = None,
) -> None:
    """List the consumer groups with their state."""

    def run() -> None:
        with _admin(bootstrap_server, load_command_config(command_config)) as admin:
            groups = admin.list_groups()  # (group_id, protocol_type, state); state: ListGroups v4+
            states = {gid: state for gid, _type, state in groups}
            unknown = [gid for gid, state in states.items() if not state]
            if unknown:
                states.update((gid, d.state) for gid, d in admin.describe_groups(unknown).items())
            rows = [["GROUP", "STATE", "PROTOCOL-TYPE"]]
            rows += [[gid, states[gid] or "?", ptype or "-"] for gid, ptype, _state in groups]
            typer.echo(_table(rows))

    _run(run)


@app.command("describe")
def describe(
    group: str,
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
    command_config: CommandConfig = None,
) -> None:
    """State, members, and per partition: committed offset, log end offset, lag in records
    and in seconds (age of the first record not yet consumed), owner."""

    def run() -> None:
        with _admin(bootstrap_server, load_command_config(command_config)) as admin:
            g = _describe(admin, group)
            committed = _committed(admin, group)
            owners: dict[TopicPartition, Any] = {}
            for m in g.members:
                for tp in m.assignment:
                    owners[TopicPartition(*tp)] = m
            partitions = sorted(set(committed) | set(owners))
            ends = _list_offsets(admin, partitions, -1)
            starts = _list_offsets(admin, partitions, -2)
            lagging = {
                tp: max(committed[tp], starts.get(tp, 0))
                for tp in partitions
                if tp in committed and tp in ends and ends[tp] > committed[tp]
            }
            stamps = _first_timestamps(bootstrap_server, lagging, extra=load_command_config(command_config, "consumer"))
            now_ms = int(time.time() * 1000)
            typer.echo(
                f"Group {group}: state {g.state}, protocol {g.protocol_type or '-'}"
                f"/{g.protocol or '-'}, {len(g.members)} member(s)"
            )
            if g.members:
                typer.echo("")
                rows = [["MEMBER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"]]
                for m in g.members:
                    by_topic: dict[str, list[int]] = {}
                    for topic, p in m.assignment:
                        by_topic.setdefault(topic, []).append(p)
                    text = (
                        ", ".join(
                            f"{t}[{','.join(map(str, sorted(ps)))}]" for t, ps in by_topic.items()
                        )
                        or "-"
                    )
                    rows.append(
                        [m.member_id, m.group_instance_id or "-", m.client_id, m.client_host, text]
                    )
                typer.echo(_table(rows))
            typer.echo("")
            rows = [
                [
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "LAG-SECONDS",
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID",
                ]
            ]
            for tp in partitions:
                current = committed.get(tp)
                end = ends.get(tp)
                lag = "-" if current is None or end is None else str(max(end - current, 0))
                # now - timestamp of the first unconsumed record; 0 when caught up
                if lag == "0":
                    lag_seconds = "0"
                elif tp in stamps:
                    lag_seconds = f"{max(now_ms - stamps[tp], 0) / 1000:.1f}"
                else:
                    lag_seconds = "-"
                owner = owners.get(tp)
                rows.append(
                    [
                        tp.topic,
                        str(tp.partition),
                        "-" if current is None else str(current),
                        "-" if end is None else str(end),
                        lag,
                        lag_seconds,
                        owner.member_id if owner else "-",
                        owner.client_host if owner else "-",
                        owner.client_id if owner else "-",
                    ]
                )
            typer.echo(_table(rows))

    _run(run)


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
    topic, _, parts = spec.partition(":")
    if not parts:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p})
    except ValueError:
        raise GroupsError(f"bad --topic {spec!r}: expected TOPIC or TOPIC:P,P,...") from None


def _parse_datetime(text: str) -> int:
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise GroupsError(
            f"bad --to-datetime {text!r}: expected ISO 8601, e.g. 2026-11-21T10:00:00Z"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


def _show_progress(flag: bool | None) -> bool:
    return sys.stderr.isatty() if flag is None else flag


def _commit_in_chunks(
    admin: Admin, group: str, offsets: dict[TopicPartition, int], progress: bool
) -> None:
    """Commit ``offsets`` COMMIT_CHUNK partitions at a time, showing a progress bar."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    items = sorted(offsets.items())
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True, force_terminal=progress or None),
        disable=not progress,
        transient=True,
    )
    with bar:
        task = bar.add_task(f"committing offsets of {group}", total=len(items))
        for start in range(0, len(items), COMMIT_CHUNK):
            chunk: dict[TopicPartition, Any] = dict(items[start : start + COMMIT_CHUNK])
            try:
                admin.alter_group_offsets(group, chunk)
            except KafkaError as exc:
                hint = " (the group has members)" if exc.code == _UNKNOWN_MEMBER_ID else ""
                done = f" ({start} of {len(items)} committed before)" if start else ""
                raise GroupsError(f"{exc}{hint}{done}") from exc
            bar.advance(task, len(chunk))


@app.command("reset-offsets")
def reset_offsets(
    group: str,
    topic: str = typer.Option(..., "--topic", help="TOPIC or TOPIC:P,P,... (partitions)."),
    to_earliest: bool = typer.Option(False, "--to-earliest", help="Reset to the log start offset."),
    to_latest: bool = typer.Option(False, "--to-latest", help="Reset to the log end offset."),
    to_offset: int | None = typer.Option(None, "--to-offset", help="Reset to this offset."),
    to_datetime: str | None = typer.Option(
        None, "--to-datetime", help="First offset at/after this ISO time."
    ),
    shift_by: int | None = typer.Option(
        None, "--shift-by", help="Move the committed offset by N (may be < 0)."
    ),
    execute: bool = typer.Option(
        False, "--execute", help="Commit the new offsets (default: dry run)."
    ),
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
    command_config: CommandConfig = None,
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: on a terminal)."
    ),
) -> None:
    """Set a group's committed offsets for a topic. Dry run unless --execute."""

    def run() -> None:
        chosen = [
            to_earliest,
            to_latest,
            to_offset is not None,
            to_datetime is not None,
            shift_by is not None,
        ]
        if sum(chosen) != 1:
            raise GroupsError(
                "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
            )
        name, parts = _parse_topic(topic)
        with _admin(bootstrap_server, load_command_config(command_config)) as admin:
            g = _describe(admin, group)
            if g.members or g.state not in ("Empty", "Dead"):
                raise GroupsError(
                    f"group {group} is {g.state} with {len(g.members)} member(s): "
                    "stop its consumers before resetting offsets"
                )
            existing = _partitions(admin, name)
            if parts is None:
                parts = existing
            missing = sorted(set(parts) - set(existing))
            if missing:
                raise GroupsError(f"topic {name} has no partition(s) {missing}")
            tps = [TopicPartition(name, p) for p in parts]
            earliest = _list_offsets(admin, tps, -2)
            latest = _list_offsets(admin, tps, -1)
            new: dict[TopicPartition, int] = {}
            if to_earliest:
                new = dict(earliest)
            elif to_latest:
                new = dict(latest)
            elif to_offset is not None:
                new = {tp: min(max(to_offset, earliest[tp]), latest[tp]) for tp in tps}
            elif to_datetime is not None:
                found = _list_offsets(admin, tps, _parse_datetime(to_datetime))
                new = {tp: (found[tp] if found[tp] >= 0 else latest[tp]) for tp in tps}
            else:
                assert shift_by is not None
                committed = _committed(admin, group)
                for tp in tps:
                    if tp not in committed:
                        raise GroupsError(
                            f"cannot shift {tp.topic}-{tp.partition}: "
                            "the group has no committed offset there"
                        )
                    new[tp] = min(max(committed[tp] + shift_by, earliest[tp]), latest[tp])
            rows = [["TOPIC", "PARTITION", "NEW-OFFSET"]] + [
                [t, str(p), str(o)] for (t, p), o in sorted(new.items())
            ]
            typer.echo(_table(rows))
            if execute:
                _commit_in_chunks(admin, group, new, _show_progress(progress))
                typer.echo(f"\ncommitted {len(new)} offset(s) for group {group}")
            else:
                typer.echo("\ndry run: nothing changed (add --execute to commit these offsets)")

    _run(run)


@app.command("delete")
def delete(
    group: str,
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
    command_config: CommandConfig = None,
) -> None:
    """Delete a group without members, with its committed offsets."""

    def run() -> None:
        with _admin(bootstrap_server, load_command_config(command_config)) as admin:
            try:
                admin.delete_groups([group])
            except KafkaError as exc:
                raise GroupsError(f"cannot delete group {group}: {exc.name}") from exc
            typer.echo(f"deleted group {group}")

    _run(run)


if __name__ == "__main__":  # pragma: no cover
    app(sys.argv[1:])
