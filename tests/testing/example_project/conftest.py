"""Example project conftest: optional per-test leak check (ODRADEK_EXAMPLE_LEAK_CHECK=1).

The autouse fixture is set up before ``odradek_broker`` and torn down after it, so it sees the
process exactly as it was before the broker started and after it stopped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from odradek.testing import ResourceSnapshot

LEAK_CHECK = os.environ.get("ODRADEK_EXAMPLE_LEAK_CHECK") == "1"
REPORT = os.environ.get("ODRADEK_EXAMPLE_REPORT")

_session_before: ResourceSnapshot | None = None


def _warm_up_process_wide_allocations() -> None:
    """Some libraries allocate once per process on first use; that is not a per-test leak.
    uvloop (odradek.client's loops) opens a process-wide pipe when its first loop is made."""
    try:
        import uvloop
    except ImportError:
        return
    uvloop.new_event_loop().close()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _session_before
    _warm_up_process_wide_allocations()
    _session_before = ResourceSnapshot.take()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if REPORT and _session_before is not None:
        # Client threads (librdkafka, kafka-python) may still be winding down: wait, bounded.
        ResourceSnapshot.wait_until_back_to(_session_before, timeout=10.0)
        after = ResourceSnapshot.take()
        with open(REPORT, "w") as f:
            json.dump(
                {
                    "before": {
                        "fds": _session_before.fds,
                        "threads": _session_before.threads,
                        "os_threads": _session_before.os_threads,
                        "listening": _session_before.listening_sockets,
                    },
                    "after": {
                        "fds": after.fds,
                        "threads": after.threads,
                        "os_threads": after.os_threads,
                        "listening": after.listening_sockets,
                        "thread_names": list(after.thread_names),
                    },
                },
                f,
            )


@pytest.fixture(autouse=True)
def _no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    if not LEAK_CHECK or "no_leak_check" in request.keywords:
        yield
        return
    before = ResourceSnapshot.take()
    yield
    grown = ResourceSnapshot.wait_until_back_to(before, timeout=10.0)
    assert not grown, f"leaked: {grown} threads now {ResourceSnapshot.take().thread_names}"
