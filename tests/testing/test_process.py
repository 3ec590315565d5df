"""BrokerProcess and TansuProcess never outlive the process that started them.

A test run that is killed (SIGKILL, CI cancelling the job, a pytest-timeout that ends the
process) must leave no broker behind: the broker watches a pipe whose write end only its
parent holds (``odradek broker --exit-with-parent-fd``), Tansu gets PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from odradek.testing.helpers import api_versions
from odradek.testing.process import BrokerProcess

# A parent that starts a broker (or Tansu), prints its pid, then waits to be killed.
_PARENT = textwrap.dedent(
    """
    import sys, threading
    kind = sys.argv[1]
    if kind == "odradek":
        from odradek.testing.process import BrokerProcess
        b = BrokerProcess().start()
        print(b.pid, b.bootstrap_servers, flush=True)
    else:
        from odradek.testing.tansu import TansuProcess
        t = TansuProcess().start()
        print(t.pid(), t.bootstrap_servers, flush=True)
    threading.Event().wait()
    """
)


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (no such process, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)  # polling a condition with a deadline
    return _gone(pid)


def _start_parent(kind: str) -> tuple[subprocess.Popen[str], int, str]:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()  # bounded: the child's start_timeout (20 s) then exits
    if not line:
        parent.kill()
        _, err = parent.communicate(timeout=10)
        if kind == "tansu" and "tansu binary not found" in err:
            pytest.skip("tansu is not installed")
        pytest.fail(f"the parent did not start a broker: {err[-2000:]}")
    pid, bootstrap = line.split()
    return parent, int(pid), bootstrap


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
@pytest.mark.parametrize("kind", ["odradek", "tansu"])
def test_broker_dies_when_its_parent_is_sigkilled(kind: str) -> None:
    parent, pid, bootstrap = _start_parent(kind)
    try:
        api_versions(bootstrap, timeout=10)  # the broker really runs
        assert not _gone(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _wait_gone(pid, 15), f"{kind} broker {pid} outlived its SIGKILLed parent"
    finally:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        parent.communicate(timeout=10)


def test_broker_started_from_a_thread_outlives_the_thread() -> None:
    """The pipe follows the parent process, not the thread that forked the broker (as
    PR_SET_PDEATHSIG would): a broker started in a short-lived thread keeps running."""
    started: list[BrokerProcess] = []
    t = threading.Thread(target=lambda: started.append(BrokerProcess().start()))
    t.start()
    t.join(60)
    assert started, "the thread did not start a broker"
    with started[0] as b:
        assert b.running
        api_versions(b.bootstrap_servers, timeout=10)
        assert b.running
    assert not b.running
