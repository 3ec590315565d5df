"""ZooKeeperServer: starts, answers, restarts on the same port, dies with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.cluster.zookeeper import ZooKeeperServer, four_letter_word
from odradek.testing.helpers import wait_until


def _answers(port: int) -> bool:
    try:
        return four_letter_word(port, "ruok", timeout=0.3) == "imok"
    except OSError:
        return False


def test_answers_four_letter_words(zookeeper: ZooKeeperServer) -> None:
    assert four_letter_word(zookeeper.port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(zookeeper.port, "srvr")
    # stat is not whitelisted
    assert "not in the whitelist" in four_letter_word(zookeeper.port, "stat")


@pytest.mark.timeout(60)
def test_restart_and_kill(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path)
    server.start()
    try:
        port = server.port
        server.restart(kill=True)
        assert server.port == port and _answers(port)
        server.restart()
        assert _answers(port)
        server.kill()
        assert not server.is_running() and not _answers(port)
    finally:
        server.stop()


@pytest.mark.timeout(60)
def test_dies_with_its_parent_process(tmp_path: Path) -> None:
    """SIGKILL of the owning process (no cleanup runs) takes the JVM down too."""
    script = (
        "import sys, time\n"
        "from odradek.cluster.zookeeper import ZooKeeperServer\n"
        "s = ZooKeeperServer(sys.argv[1]); s.start()\n"
        "print(s.port, flush=True)\n"
        "time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        port = int(owner.stdout.readline())
        assert _answers(port)
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
    assert wait_until(lambda: not _answers(port), 15)


@pytest.mark.timeout(60)
def test_started_from_a_thread_that_exits(tmp_path: Path) -> None:
    """The server outlives the thread that started it (no thread-scoped death signal)."""
    import threading

    server = ZooKeeperServer(tmp_path)
    t = threading.Thread(target=server.start)
    t.start()
    t.join()
    try:
        time.sleep(0.3)  # give a wrongly armed death signal time to fire
        assert server.is_running() and _answers(server.port)
    finally:
        server.stop()
    assert not _answers(server.port)
