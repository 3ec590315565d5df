"""odradek.cli: the `odradek` command (``main.py``) and one module per command.

``OWN_PARSER`` names the commands that parse their own arguments (``main(argv) -> exit code``)
and are run by ``run_own_parser`` before typer is imported: `odradek broker`, whose start time
test suites pay for every broker process they start.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

OWN_PARSER = frozenset({"broker"})


def run_own_parser(argv: Sequence[str]) -> None:
    """``argv`` (without the program name) naming an ``OWN_PARSER`` command: run it and exit
    with its code; anything else: return."""
    if argv and argv[0] in OWN_PARSER:
        module = importlib.import_module(f"odradek.cli.{argv[0]}")
        sys.exit(module.main(list(argv[1:])))
