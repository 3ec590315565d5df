"""`odradek groups` against an in-process broker (EmbeddedBroker on its own thread)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from odradek.cli.groups import app
from odradek.coordinator import OffsetCommitEntry
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def embedded() -> Iterator[EmbeddedBroker]:
    """A broker with topic t: 2 partitions of 10 records each (timestamps 1000, 2000, ...)."""
    from odradek.protocol.records import build_batch

    with EmbeddedBroker({"offsets.topic.num.partitions": 3}) as b:

        def setup() -> None:
            b.broker.create_topic("t", 2)
            for p in (0, 1):
                log = b.broker.partition("t", p).log
                for i in range(10):
                    log.append(bytearray(build_batch([(None, b"v", (), (i + 1) * 1000)])), 0)

        b.call(setup)
        yield b


def run(b: EmbeddedBroker, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--bootstrap-server", b.bootstrap_servers])


def commit(b: EmbeddedBroker, group: str, offsets: dict[int, int]) -> None:
    entries = [OffsetCommitEntry("t", p, o) for p, o in offsets.items()]
    errors = b.call(lambda: b.broker.group_coordinator.commit_offsets(group, -1, "", None, entries))
    assert all(e == 0 for e in errors)


def committed(b: EmbeddedBroker, group: str) -> dict[int, int]:
    _, topics = b.call(lambda: b.broker.group_coordinator.fetch_offsets(group, None))
    return {p: om.offset for _t, parts in topics for p, om in parts}


def test_list_and_describe(embedded: EmbeddedBroker) -> None:
    commit(embedded, "cli-a", {0: 0, 1: 0})
    out = run(embedded, "list")
    assert out.exit_code == 0, out.output
    assert "cli-a" in out.output and "Empty" in out.output
    out = run(embedded, "describe", "cli-a")
    assert out.exit_code == 0, out.output
    assert "state Empty" in out.output
    out = run(embedded, "describe", "nobody")
    assert out.exit_code == 0 and "state Dead" in out.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--to-latest"], {0: 10, 1: 10}),
        (["--to-earliest"], {0: 0, 1: 0}),
        (["--to-offset", "99"], {0: 10, 1: 10}),
        (["--to-offset", "4"], {0: 4, 1: 4}),
        (["--shift-by", "-2"], {0: 1, 1: 3}),
        (["--shift-by", "50"], {0: 10, 1: 10}),
        (["--to-datetime", "1970-01-01T00:00:03.500Z"], {0: 3, 1: 3}),
        (["--to-datetime", "2100-01-01T00:00:00"], {0: 10, 1: 10}),
    ],
)
def test_reset_offsets_modes(
    embedded: EmbeddedBroker, args: list[str], expected: dict[int, int]
) -> None:
    group = f"cli-b-{'-'.join(args)}"
    commit(embedded, group, {0: 3, 1: 5})
    out = run(embedded, "reset-offsets", group, "--topic", "t", *args, "--execute")
    assert out.exit_code == 0, (args, out.output)
    assert committed(embedded, group) == expected


def test_reset_offsets_refusals(embedded: EmbeddedBroker) -> None:
    out = run(embedded, "reset-offsets", "cli-c", "--topic", "t")
    assert out.exit_code == 1 and "exactly one of" in out.output
    out = run(embedded, "reset-offsets", "cli-c", "--topic", "t", "--to-latest", "--to-earliest")
    assert out.exit_code == 1
    out = run(embedded, "reset-offsets", "cli-c", "--topic", "nope", "--to-latest")
    assert out.exit_code == 1 and "nope" in out.output
    out = run(embedded, "reset-offsets", "cli-c", "--topic", "t:5", "--to-latest")
    assert out.exit_code == 1 and "no partition" in out.output
    out = run(embedded, "reset-offsets", "cli-c", "--topic", "t", "--shift-by", "1")
    assert out.exit_code == 1 and "no committed offset" in out.output
    out = run(embedded, "reset-offsets", "cli-c", "--topic", "t", "--to-datetime", "yesterday")
    assert out.exit_code == 1 and "ISO" in out.output


def test_dry_run_changes_nothing_and_delete(embedded: EmbeddedBroker) -> None:
    commit(embedded, "cli-d", {0: 0})
    out = run(embedded, "reset-offsets", "cli-d", "--topic", "t:1", "--to-latest")
    assert out.exit_code == 0 and "dry run" in out.output
    assert "t      1          10" in out.output
    assert committed(embedded, "cli-d") == {0: 0}
    out = run(embedded, "delete", "cli-d")
    assert out.exit_code == 0 and "deleted" in out.output
    out = run(embedded, "delete", "cli-d")
    assert out.exit_code == 1 and "GROUP_ID_NOT_FOUND" in out.output


def test_unreachable_broker() -> None:
    out = CliRunner().invoke(app, ["list", "--bootstrap-server", "127.0.0.1:1"])
    assert out.exit_code == 1 and "cannot connect" in out.output


def test_reset_offsets_of_many_partitions_in_chunks_with_a_progress_bar(
    embedded: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    import odradek.cli.groups as groups_cli

    embedded.call(lambda: embedded.broker.create_topic("wide", 23))
    monkeypatch.setattr(groups_cli, "COMMIT_CHUNK", 5)  # 23 partitions: 5 OffsetCommit requests
    out = CliRunner().invoke(
        app,
        ["reset-offsets", "cli-wide", "--topic", "wide", "--to-latest", "--execute",
         "--progress", "--bootstrap-server", embedded.bootstrap_servers],
    )
    assert out.exit_code == 0, out.output
    assert "committed 23 offset(s) for group cli-wide" in out.output
    assert "committing offsets of cli-wide" in out.output  # the bar (stderr, mixed in here)
    _, topics = embedded.call(
        lambda: embedded.broker.group_coordinator.fetch_offsets("cli-wide", None)
    )
    assert sorted(p for _t, parts in topics for p, _om in parts) == list(range(23))
