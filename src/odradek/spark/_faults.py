"""Fault injection points for tests (off unless ``ODRADEK_SPARK_FAULTS`` is set).

``fault(name)``: if the directory named by ``$ODRADEK_SPARK_FAULTS`` holds a file ``name``,
remove it and raise — so a test makes exactly one attempt of one step fail by creating a file.
Points: ``read-<topic>-<partition>-<start>`` (source task, before reading its range),
``after-flush-<batch>-<task>`` (streaming sink task: rows acknowledged in its open
transaction), ``commit-<batch>`` (streaming sink commit on the driver, before its intent),
``commit-txn-<batch>-<task>`` (driver, after the intent, before committing that task's
transaction).
"""

from __future__ import annotations

import os

__all__ = ["InjectedFault", "fault"]


class InjectedFault(RuntimeError):
    pass


def fault(name: str) -> None:
    directory = os.environ.get("ODRADEK_SPARK_FAULTS")
    if not directory:
        return
    try:
        os.remove(os.path.join(directory, name))
    except FileNotFoundError:
        return
    raise InjectedFault(f"injected fault {name!r}")
