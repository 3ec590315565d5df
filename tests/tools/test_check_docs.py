"""tools/check_docs.py: the repository passes it, and it fails when a word about how the
project was made is put back (in a copy of a real page, so the test cannot pass vacuously)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_docs", ROOT / "tools" / "check_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_docs"] = module
    spec.loader.exec_module(module)
    return module


check_docs = _load()


def test_repository_passes() -> None:
    hits = check_docs.check([ROOT / p for p in check_docs.SCANNED if (ROOT / p).exists()])
    assert hits == [], "\n".join(hits)


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("The cleaner keeps the last value per key (issue 14).", "ticket"),
        ("Measured with other helpers' builds on the machine.", "who"),
        ("Written by the storage helper in its second run.", "who"),
        ("Measured in this session, before the merge.", "who"),
        ("| after: wip-groups | 80 | 10 | 3 | 93 |", "branch"),
        ("Old and new alternate; new = this branch.", "branch"),
        ("See ../shared/DESIGN.md for the why.", "origin"),
        ("The broker engineer's uncommitted changes were applied.", "who"),
        ("Logs under /work/main/.venv/bin.", "path"),
    ],
)
def test_fails_when_a_word_is_put_back(tmp_path: Path, line: str, rule: str) -> None:
    page = tmp_path / "operations.md"
    shutil.copy(ROOT / "docs" / "operations.md", page)
    assert check_docs.check([page], root=tmp_path) == []
    page.write_text(page.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    hits = check_docs.check([page], root=tmp_path)
    assert len(hits) == 1 and f"[{rule}]" in hits[0], hits
    assert check_docs.main([str(page)]) == 1


@pytest.mark.parametrize(
    "line",
    [
        "The broker's ZooKeeper session expired; this session is new.",
        "Spark reuses the previous session of the driver.",
        "librdkafka issue 4212 describes the client's backoff.",
        "Kafka fixed it in KAFKA-15653 (apache/kafka#14500).",
        "A fetch session of the previous session id is evicted.",
        "`odradek.testing.helpers.create_topic` is a test helper.",
    ],
)
def test_allows_legitimate_uses(tmp_path: Path, line: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(line + "\n", encoding="utf-8")
    assert check_docs.check([page], root=tmp_path) == []
    assert check_docs.main([str(page)]) == 0
