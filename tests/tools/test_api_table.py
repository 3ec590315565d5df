"""docs/compatibility.md's API table says what the code serves, and names a reason for each
difference from Kafka 3.9 (``tools/api_table.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_table", ROOT / "tools" / "api_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["api_table"] = module
    spec.loader.exec_module(module)
    return module


def test_page_table_is_the_code_table() -> None:
    tool = _tool()
    page = tool.PAGE.read_text(encoding="utf-8")
    assert tool._splice(page, tool.render()) == page, "run tools/api_table.py"


def test_every_difference_has_a_reason_and_every_reason_a_difference() -> None:
    assert _tool().problems() == []


def test_a_served_range_change_shows() -> None:
    tool = _tool()
    rows = {key: (k, o) for key, _, k, o, _ in tool.rows()}
    assert rows[1] == ("0-17", "0-17")  # Fetch, topic ids included
    assert rows[68][1] == tool.NONE  # ConsumerGroupHeartbeat: never advertised unless implemented
    # client telemetry: Kafka 3.9 serves it in KRaft mode only, odradek serves it
    assert rows[71] == rows[72] == rows[74] == (tool.NONE, "0")
