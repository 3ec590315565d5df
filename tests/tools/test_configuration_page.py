"""docs/configuration.md is what `odradek config list --markdown` prints, and the command's
other forms read the same rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from odradek.broker.config import BROKER_KEYS, TOPIC_KEYS, BrokerConfig
from odradek.broker.config.reference import (
    KAFKA_DIFFERENT,
    MEANINGS,
    UNUSED,
    broker_rows,
    render_markdown,
)
from odradek.broker.dynamic_config import DYNAMIC_KEYS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"


def _odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "config", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_page_is_generated_from_the_code() -> None:
    expected = render_markdown(DYNAMIC_KEYS, BrokerConfig.default().topic_defaults())
    assert PAGE.read_text(encoding="utf-8") == expected, (
        "docs/configuration.md is stale: odradek config list --markdown > docs/configuration.md"
    )


def test_every_key_is_on_the_page_once_with_a_meaning() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name in list(BROKER_KEYS) + list(TOPIC_KEYS):
        assert MEANINGS.get(name), name
        assert f"| `{name}` |" in text, name
    assert set(MEANINGS) == set(BROKER_KEYS) | set(TOPIC_KEYS)
    assert set(KAFKA_DIFFERENT) <= set(BROKER_KEYS) and set(UNUSED) <= set(BROKER_KEYS)


def test_rows_read_the_tables() -> None:
    """Defaults, Kafka's defaults and dynamic flags come from the tables."""
    rows = {r.name: r for r in broker_rows(DYNAMIC_KEYS)}
    assert rows["log.retention.hours"].default == "168"
    assert rows["offsets.topic.replication.factor"].kafka_default == "3"
    assert rows["log.retention.ms"].dynamic and not rows["broker.id"].dynamic


def test_cli_markdown_is_the_page() -> None:
    out = _odradek("list", "--markdown")
    assert out.returncode == 0, out.stderr
    assert out.stdout == PAGE.read_text(encoding="utf-8")


def test_cli_list_and_changed(tmp_path: Path) -> None:
    listed = _odradek("list")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == len(BROKER_KEYS)
    props = tmp_path / "server.properties"
    props.write_text("broker.id=3\nlog.retention.hours = 24\nnum.partitions=1\n")
    changed = _odradek("list", "--changed", "--config", str(props), "--set", "num.partitions=6")
    assert changed.returncode == 0, changed.stderr
    lines = changed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "broker.id",
        "log.retention.hours",
        "num.partitions",
    ]
    assert "24  (default 168)" in lines[1] and "static" in lines[1]
    topics = _odradek("list", "--topics", "--changed", "--set", "log.retention.hours=24")
    assert topics.returncode == 0, topics.stderr
    assert [line.split()[0] for line in topics.stdout.splitlines()] == ["retention.ms"]
    bad = _odradek("list", "--set", "no.such.key=1")
    assert bad.returncode == 2 and "no.such.key" in bad.stderr
