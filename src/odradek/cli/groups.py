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

It speaks the Kafka protocol directly (kio-encoded, non-flexible versions, one blocking
socket per broker): Metadata v8, FindCoordinator v2, ListGroups v2, DescribeGroups v4,
OffsetFetch v5, OffsetCommit v7, ListOffsets v5, DeleteGroups v1.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

import typer

from odradek.coordinator.state import parse_assignment

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, add_completion=False)

BOOTSTRAP_HELP = "host:port of a broker."
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

_ERROR_NAMES = {
    0: "NONE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    25: "UNKNOWN_MEMBER_ID",
    68: "NON_EMPTY_GROUP",
    69: "GROUP_ID_NOT_FOUND",
}
_RETRIABLE = {14, 15, 16}


def _kio(module: str, *names: str) -> tuple[Any, ...]:
    """Classes of a kio schema module (typed Any: kio's phantom int types are not worth the noise)."""
    import importlib

    mod = importlib.import_module(f"kio.schema.{module}")
    return tuple(getattr(mod, n) for n in names)


class GroupsError(Exception):
    pass


def _error_name(code: int) -> str:
    return _ERROR_NAMES.get(code, f"error {code}")


class _Wire:
    """A blocking Kafka connection: size-prefixed frames, request header v1, response header v0."""

    def __init__(self, address: str, timeout: float = 15.0) -> None:
        host, _, port = address.rpartition(":")
        try:
            self.sock = socket.create_connection(
                (host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout
            )
        except OSError as exc:
            raise GroupsError(f"cannot connect to {address}: {exc}") from exc
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, req: Any) -> Any:
        from kio.index import load_response_schema

        (RequestHeader,) = _kio("request_header.v1.header", "RequestHeader")
        from kio.serial import entity_reader, entity_writer

        self.correlation_id += 1
        buf = io.BytesIO()
        header = RequestHeader(
            request_api_key=req.__api_key__,
            request_api_version=req.__version__,
            correlation_id=self.correlation_id,
            client_id="odradek-groups",
        )
        entity_writer(RequestHeader)(buf, header)
        entity_writer(type(req))(buf, req)
        body = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        response_type = load_response_schema(req.__api_key__, req.__version__)
        value, _ = entity_reader(response_type)(data, 4)
        return value

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise GroupsError("the broker closed the connection")
            out += chunk
        return bytes(out)


@dataclass
class _Cluster:
    """Connections to the bootstrap broker and to the group coordinator."""

    bootstrap: str

    def __post_init__(self) -> None:
        self.wire = _Wire(self.bootstrap)
        self._coordinators: dict[str, _Wire] = {}

    def close(self) -> None:
        self.wire.close()
        for w in self._coordinators.values():
            w.close()

    def coordinator(self, group: str) -> _Wire:
        import time

        (FindCoordinatorRequest,) = _kio("find_coordinator.v2.request", "FindCoordinatorRequest")

        deadline = time.monotonic() + 15
        while True:
            resp = self.wire.request(FindCoordinatorRequest(key=group, key_type=0))
            if resp.error_code == 0:
                break
            if int(resp.error_code) not in _RETRIABLE or time.monotonic() > deadline:
                raise GroupsError(f"FindCoordinator({group}): {_error_name(int(resp.error_code))}")
            time.sleep(0.2)
        address = f"{resp.host}:{resp.port}"
        if address not in self._coordinators:
            self._coordinators[address] = _Wire(address)
        return self._coordinators[address]

    def partitions(self, topic: str) -> list[int]:
        MetadataRequest, MetadataRequestTopic = _kio(
            "metadata.v8.request", "MetadataRequest", "MetadataRequestTopic"
        )

        resp = self.wire.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(name=topic),),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
        )
        for t in resp.topics:
            if t.name == topic:
                if t.error_code != 0:
                    raise GroupsError(f"topic {topic}: {_error_name(int(t.error_code))}")
                return sorted(int(p.partition_index) for p in t.partitions)
        raise GroupsError(f"topic {topic} does not exist")

    def list_offsets(
        self, partitions: list[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        """ListOffsets v5: -2 earliest, -1 latest, else first offset with timestamp >= it (-1 if none)."""
        ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic = _kio(
            "list_offsets.v5.request",
            "ListOffsetsPartition",
            "ListOffsetsRequest",
            "ListOffsetsTopic",
        )

        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        resp = self.wire.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=tuple(
                    ListOffsetsTopic(
                        name=t,
                        partitions=tuple(
                            ListOffsetsPartition(
                                partition_index=p, current_leader_epoch=-1, timestamp=timestamp
                            )
                            for p in ps
                        ),
                    )
                    for t, ps in by_topic.items()
                ),
            )
        )
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != 0:
                    raise GroupsError(
                        f"ListOffsets {t.name}-{p.partition_index}: {_error_name(int(p.error_code))}"
                    )
                out[(t.name, int(p.partition_index))] = int(p.offset)
        return out

    def describe(self, group: str) -> Any:
        (DescribeGroupsRequest,) = _kio("describe_groups.v4.request", "DescribeGroupsRequest")

        resp = self.coordinator(group).request(
            DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)
        )
        (g,) = resp.groups
        if g.error_code != 0:
            raise GroupsError(f"DescribeGroups({group}): {_error_name(int(g.error_code))}")
        return g

    def committed(self, group: str) -> dict[tuple[str, int], tuple[int, str]]:
        (OffsetFetchRequest,) = _kio("offset_fetch.v5.request", "OffsetFetchRequest")

        resp = self.coordinator(group).request(OffsetFetchRequest(group_id=group, topics=None))
        if resp.error_code != 0:
            raise GroupsError(f"OffsetFetch({group}): {_error_name(int(resp.error_code))}")
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.committed_offset >= 0:
                    out[(t.name, int(p.partition_index))] = (
                        int(p.committed_offset),
                        p.metadata or "",
                    )
        return out

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic = _kio(
            "offset_commit.v7.request",
            "OffsetCommitRequest",
            "OffsetCommitRequestPartition",
            "OffsetCommitRequestTopic",
        )

        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in sorted(offsets.items()):
            by_topic.setdefault(t, []).append((p, o))
        resp = self.coordinator(group).request(
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=tuple(
                    OffsetCommitRequestTopic(
                        name=t,
                        partitions=tuple(
                            OffsetCommitRequestPartition(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for p, o in ps
                        ),
                    )
                    for t, ps in by_topic.items()
                ),
            )
        )
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code != 0:
                    raise GroupsError(
                        f"OffsetCommit {t.name}-{p.partition_index}: {_error_name(int(p.error_code))}"
                        + (" (the group has members)" if int(p.error_code) == 25 else "")
                    )


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
    except GroupsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


# -- commands ---------------------------------------------------------------------------------


@app.command("list")
def list_groups(
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
) -> None:
    """List the consumer groups with their state."""

    def run() -> None:
        (DescribeGroupsRequest,) = _kio("describe_groups.v4.request", "DescribeGroupsRequest")
        (ListGroupsRequest,) = _kio("list_groups.v2.request", "ListGroupsRequest")

        cluster = _Cluster(bootstrap_server)
        try:
            resp = cluster.wire.request(ListGroupsRequest())
            if resp.error_code != 0:
                raise GroupsError(f"ListGroups: {_error_name(int(resp.error_code))}")
            names = sorted(g.group_id for g in resp.groups)
            types = {g.group_id: g.protocol_type for g in resp.groups}
            states: dict[str, str] = {}
            if names:
                described = cluster.wire.request(
                    DescribeGroupsRequest(groups=tuple(names), include_authorized_operations=False)
                )
                states = {g.group_id: g.group_state for g in described.groups}
            rows = [["GROUP", "STATE", "PROTOCOL-TYPE"]]
            rows += [[n, states.get(n, "?"), types[n] or "-"] for n in names]
            typer.echo(_table(rows))
        finally:
            cluster.close()

    _run(run)


@app.command("describe")
def describe(
    group: str,
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
) -> None:
    """State, members, and per partition: committed offset, log end offset, lag, owner."""

    def run() -> None:
        cluster = _Cluster(bootstrap_server)
        try:
            g = cluster.describe(group)
            committed = cluster.committed(group)
            owners: dict[tuple[str, int], Any] = {}
            for m in g.members:
                for topic, parts in parse_assignment(bytes(m.member_assignment)) or []:
                    for p in parts:
                        owners[(topic, p)] = m
            partitions = sorted(set(committed) | set(owners))
            ends = cluster.list_offsets(partitions, -1)
            typer.echo(
                f"Group {group}: state {g.group_state}, protocol {g.protocol_type or '-'}"
                f"/{g.protocol_data or '-'}, {len(g.members)} member(s)"
            )
            if g.members:
                typer.echo("")
                rows = [["MEMBER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"]]
                for m in g.members:
                    assignment = parse_assignment(bytes(m.member_assignment)) or []
                    text = (
                        ", ".join(f"{t}[{','.join(map(str, sorted(ps)))}]" for t, ps in assignment)
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
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID",
                ]
            ]
            for tp in partitions:
                current = committed.get(tp, (None, ""))[0]
                end = ends.get(tp)
                lag = "-" if current is None or end is None else str(max(end - current, 0))
                owner = owners.get(tp)
                rows.append(
                    [
                        tp[0],
                        str(tp[1]),
                        "-" if current is None else str(current),
                        "-" if end is None else str(end),
                        lag,
                        owner.member_id if owner else "-",
                        owner.client_host if owner else "-",
                        owner.client_id if owner else "-",
                    ]
                )
            typer.echo(_table(rows))
        finally:
            cluster.close()

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
        cluster = _Cluster(bootstrap_server)
        try:
            g = cluster.describe(group)
            if g.members or g.group_state not in ("Empty", "Dead"):
                raise GroupsError(
                    f"group {group} is {g.group_state} with {len(g.members)} member(s): "
                    "stop its consumers before resetting offsets"
                )
            existing = cluster.partitions(name)
            if parts is None:
                parts = existing
            missing = sorted(set(parts) - set(existing))
            if missing:
                raise GroupsError(f"topic {name} has no partition(s) {missing}")
            tps = [(name, p) for p in parts]
            earliest = cluster.list_offsets(tps, -2)
            latest = cluster.list_offsets(tps, -1)
            new: dict[tuple[str, int], int] = {}
            if to_earliest:
                new = dict(earliest)
            elif to_latest:
                new = dict(latest)
            elif to_offset is not None:
                new = {tp: min(max(to_offset, earliest[tp]), latest[tp]) for tp in tps}
            elif to_datetime is not None:
                found = cluster.list_offsets(tps, _parse_datetime(to_datetime))
                new = {tp: (found[tp] if found[tp] >= 0 else latest[tp]) for tp in tps}
            else:
                assert shift_by is not None
                committed = cluster.committed(group)
                for tp in tps:
                    if tp not in committed:
                        raise GroupsError(
                            f"cannot shift {tp[0]}-{tp[1]}: the group has no committed offset there"
                        )
                    new[tp] = min(max(committed[tp][0] + shift_by, earliest[tp]), latest[tp])
            rows = [["TOPIC", "PARTITION", "NEW-OFFSET"]] + [
                [t, str(p), str(o)] for (t, p), o in sorted(new.items())
            ]
            typer.echo(_table(rows))
            if execute:
                cluster.commit(group, new)
                typer.echo(f"\ncommitted {len(new)} offset(s) for group {group}")
            else:
                typer.echo("\ndry run: nothing changed (add --execute to commit these offsets)")
        finally:
            cluster.close()

    _run(run)


@app.command("delete")
def delete(
    group: str,
    bootstrap_server: str = typer.Option(
        DEFAULT_BOOTSTRAP, "--bootstrap-server", help=BOOTSTRAP_HELP
    ),
) -> None:
    """Delete a group without members, with its committed offsets."""

    def run() -> None:
        (DeleteGroupsRequest,) = _kio("delete_groups.v1.request", "DeleteGroupsRequest")

        cluster = _Cluster(bootstrap_server)
        try:
            resp = cluster.coordinator(group).request(DeleteGroupsRequest(groups_names=(group,)))
            (result,) = resp.results
            if result.error_code != 0:
                raise GroupsError(
                    f"cannot delete group {group}: {_error_name(int(result.error_code))}"
                )
            typer.echo(f"deleted group {group}")
        finally:
            cluster.close()

    _run(run)


if __name__ == "__main__":  # pragma: no cover
    app(sys.argv[1:])
