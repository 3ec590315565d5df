#!/usr/bin/env python3
"""Print the test files of the quick tier (`make check`): those that start no broker process
(in-process or not), no ZooKeeper, no Spark and no browser, and run no other program.

A file is left out when its text names one of ``HEAVY`` (the fixtures and classes that start
those, or ``subprocess``), or when it sits in a folder that only holds such tests (``FOLDERS``).
The scan is textual and errs on the side of leaving a file out; the quick tier is a subset of
``make test``, never a replacement.

    python tools/quick_tests.py            # one path per line, relative to the repository
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Folders whose tests all need a broker process, ZooKeeper, Spark or other programs.
FOLDERS = {"interop", "cluster", "faults", "spark", "replication", "testing"}

HEAVY = re.compile(
    r"BrokerProcess|EmbeddedBroker|fresh_broker|odradek_broker|odradek_bootstrap"
    r"|def \w+\([^)]*\bbroker\b|\bbroker_process\b|zookeeper|ZooKeeper|kazoo"
    r"|spark|selenium|webdriver|subprocess|multiprocessing|start_broker|\bBroker\("
    r"|\.start\(\)\s*$|console_broker|ConsoleBroker|[Tt]ansu|bootstrap_servers|bootstrap\.servers",
    re.MULTILINE,
)


# Quick although the scan would leave them out (they run the `odradek` command, no broker).
ALWAYS = {"tests/tools/test_check_docs.py", "tests/tools/test_configuration_page.py"}


def quick_files(root: Path = ROOT) -> list[str]:
    out: list[str] = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        rel = path.relative_to(root)
        if rel.as_posix() in ALWAYS:
            out.append(rel.as_posix())
            continue
        if rel.parts[1] in FOLDERS:
            continue
        if HEAVY.search(path.read_text(encoding="utf-8")):
            continue
        out.append(rel.as_posix())
    return out


def main() -> int:
    for rel in quick_files():
        print(rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
