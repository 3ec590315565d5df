"""Tables in docs/ that repeat values from the code say what the code says."""

from __future__ import annotations

import re
from pathlib import Path

from odradek.testing import TEST_DEFAULTS

ROOT = Path(__file__).resolve().parents[2]


def _rows(page: str, header: str) -> dict[str, str]:
    """The first two columns of the markdown table right after ``header``, backticks and the
    "(empty)" placeholder resolved."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    start = text.index(header)
    rows: dict[str, str] = {}
    in_table = False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            in_table = True
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] in ("key", "---") or set(cells[0]) <= {"-"}:
                continue
            value = cells[1].strip("`")
            rows[cells[0].strip("`")] = "" if value == "(empty)" else value
        elif in_table:
            break
    return rows


def test_testing_md_lists_test_defaults() -> None:
    rows = _rows("testing.md", "Defaults tuned for tests (`odradek.testing.TEST_DEFAULTS`")
    assert rows == TEST_DEFAULTS


def test_every_table_row_is_a_key() -> None:
    rows = _rows("testing.md", "Defaults tuned for tests (`odradek.testing.TEST_DEFAULTS`")
    assert all(re.fullmatch(r"[a-z.]+", key) for key in rows), rows
