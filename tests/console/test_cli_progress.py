"""Progress displays of the long CLI operations: the pipelines' streaming queries.

``await_query`` is driven by a stand-in with pyspark's StreamingQuery surface
(``awaitTermination(timeout_s) -> bool``, ``recentProgress``): starting Spark here would cost a
minute; tests/spark runs the pipelines for real.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from odradek.cli.pipeline import await_query

pytestmark = pytest.mark.timeout(30)


class Query:
    """Three polls: batches 0-1, then 0-3 (Spark keeps only the last 3), then stopped."""

    def __init__(self) -> None:
        self.polls = 0
        self.timeouts: list[float] = []

    def awaitTermination(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        self.polls += 1
        return self.polls > 2

    @property
    def recentProgress(self) -> list[dict[str, Any]]:
        batches = {1: [0, 1], 2: [1, 2, 3], 3: [2, 3, 4]}[min(self.polls, 3)]
        return [{"batchId": b, "numInputRows": 10 * (b + 1)} for b in batches]


def test_records_are_counted_by_batch_id_and_shown(capsys: pytest.CaptureFixture[str]) -> None:
    q = Query()
    assert await_query(q, "warehouse", progress=True, poll_s=0.01) == 10 + 20 + 30 + 40 + 50
    assert q.timeouts == [0.01, 0.01, 0.01]
    err = capsys.readouterr().err
    assert "warehouse" in err and "records" in err


def test_no_display_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert await_query(Query(), "page-views", progress=False, poll_s=0.01) == 150
    assert capsys.readouterr().err == ""


def test_default_follows_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr("sys.stderr", err)
    assert await_query(Query(), "page-views", poll_s=0.01) == 150
    assert err.getvalue() == ""
