#!/usr/bin/env python3
"""Fail when the repository speaks of how it was made instead of what the product is.

The documentation, docstrings and comments describe odradek; the story of its making (ticket
numbers of the project's own tracker, who did what in which working run, branch names, where
the project came from, paths on a development machine) belongs in git history and in
CHANGELOG.md. This checker scans ``docs/``, ``README.md``, ``src/``, ``tests/``, ``bench/`` and
``tools/`` for such words and prints ``path:line: [rule] text`` for each hit; the exit status is
1 when there is at least one.

Legitimate uses that look alike are allowed by each rule's allowance (checked on the same
line): ZooKeeper and Spark sessions, librdkafka's own issue numbers, upstream ``KAFKA-NNNN``
and ``project#NNN`` references, GitHub links.

    python tools/check_docs.py            # the repository this file is in
    python tools/check_docs.py PATH...    # some files or folders only
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("docs", "README.md", "src", "tests", "bench", "tools", "Makefile", "CHANGELOG.md")
SUFFIXES = {".md", ".py", ".pyi", ".c", ".h", ".html", ".txt", ".toml", ".cfg", ".ini", ".sh"}
# This file names the words it looks for; its own test puts them back on purpose.
SKIPPED = {"tools/check_docs.py", "tests/tools/test_check_docs.py"}

# A hit of these rules is a legitimate use when its line also matches the rule's allowance:
# upstream trackers (librdkafka's issues, KAFKA-NNNN, project#NNN, GitHub links) and the
# sessions of ZooKeeper, Spark, fetches and groups.
_UPSTREAM = r"librdkafka|\bKAFKA-\d+|\b[\w.-]+#\d+|github\.com/"
_SESSIONS = (
    r"zookeeper|\bzk\b|kazoo|spark|session\.timeout|session timeout|fetch session"
    r"|group session|consumer session|expir"
)

# (rule name, pattern, allowance or None). Case-insensitive.
RULES: list[tuple[str, re.Pattern[str], re.Pattern[str] | None]] = [
    (name, re.compile(pattern, re.IGNORECASE), re.compile(allow, re.IGNORECASE) if allow else None)
    for name, pattern, allow in [
        # the project's own tracker: "issue 12", "issues 13 and 17", "ticket #4"
        ("ticket", r"\b(issues?|tickets?)\s*#?\s*\d+\b", _UPSTREAM),
        # who did the work and alongside whom
        (
            "who",
            r"\b(other|eight|seven|six|five|four|three|two|several|\d+)\s+"
            r"(helpers|sessions|engineers|agents)\b",
            None,
        ),
        (
            "who",
            r"\bhelpers'|\bhelper\s+`|\bengineers'|\bthe \w+ helper\b|\bhelper (run|session)s?\b",
            None,
        ),
        ("who", r"\b(engineers?|agents?)\b(?!\s*[=:]|\()|\bthe lead\b|\bautomated readers?\b", None),
        ("who", r"\b(this|previous|earlier|last|next|a later|another|my|our) session\b", _SESSIONS),
        ("who", r"\bfiled by\b|\bstop\s+\d+\b|\bthis stop\b|\bstop's\b", None),
        # branches and work in progress
        (
            "branch",
            r"\bwip-[\w-]+|\bthis (work|branch)\b|\b(before|after) the merges?\b"
            r"|\buncommitted changes\b|\bmerged into main\b",
            None,
        ),
        # where the project came from
        (
            "origin",
            r"\bDESIGN\.md\b|\boutside (of )?this repository\b|\bthe seeds?'|\bthe brief\b"
            r"|\bdesigned from\b|\bthe original design\b",
            None,
        ),
        # a development machine
        ("path", r"/work/|/home/\w+/|\bbash_jobs\b|\.mirror/", None),
    ]
]


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if (
                    child.is_file()
                    and child.suffix in SUFFIXES
                    and "__pycache__" not in child.parts
                ):
                    yield child
        elif path.is_file():
            yield path


def check_text(text: str) -> list[tuple[int, str, str]]:
    """The hits in ``text``: (1-based line number, rule name, the line)."""
    hits: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        for name, pattern, allow in RULES:
            if pattern.search(line) and not (allow is not None and allow.search(line)):
                hits.append((number, name, line.strip()))
                break
    return hits


def check(paths: Iterable[Path], root: Path = ROOT) -> list[str]:
    """One ``path:line: [rule] text`` per hit under ``paths``."""
    out: list[str] = []
    for path in iter_files(paths):
        try:
            rel = path.resolve().relative_to(root).as_posix()
        except ValueError:
            rel = path.as_posix()
        if rel in SKIPPED:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for number, name, line in check_text(text):
            out.append(f"{rel}:{number}: [{name}] {line}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] if args else [ROOT / p for p in SCANNED]
    hits = check(paths)
    for hit in hits:
        print(hit)
    if hits:
        print(
            f"check_docs: {len(hits)} line(s) speak of how the project was made; say what the "
            "product does instead (history belongs in git and CHANGELOG.md)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
