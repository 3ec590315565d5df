"""A local Apache ZooKeeper server from Debian's ``zookeeper`` package, for tests and dev clusters.

``ZooKeeperServer(data_dir)`` writes ``zoo.cfg`` into ``data_dir`` and runs
``org.apache.zookeeper.server.ZooKeeperServerMain`` (standalone) on ``127.0.0.1`` on a free port,
with ``admin.enableServer=false`` and the four-letter words ``ruok`` and ``srvr`` whitelisted.
``start()`` returns once ``srvr`` answers; ``stop()`` is a graceful shutdown (SIGTERM), ``kill()``
a crash (SIGKILL), ``restart()`` starts again on the same port and data directory (sessions
survive a restart shorter than their timeout, as with a real ensemble member).

Dying with its parent: the JVM runs under a tiny Python watchdog. The watchdog's only thread
starts the JVM with ``PR_SET_PDEATHSIG=SIGKILL`` (so the JVM dies with the watchdog, whatever
kills it) and reads its stdin, a pipe whose write end only this process holds: when this
process exits for any reason the pipe reaches EOF and the watchdog terminates the JVM. A
``PR_SET_PDEATHSIG`` set directly on the JVM would be wrong here: it fires when the *thread*
that forked exits, and the caller may be a short-lived thread.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from shutil import which

__all__ = ["ZOOKEEPER_CLASSPATH", "ZooKeeperServer", "four_letter_word", "zookeeper_available"]

_JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_CLASSPATH = [
    _JAVA_DIR / "zookeeper.jar",
    _JAVA_DIR / "zookeeper-jute.jar",
    _JAVA_DIR / "slf4j-api.jar",
    _JAVA_DIR / "slf4j-simple.jar",
    _JAVA_DIR / "commons-io.jar",
]
_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# Run as `python -I -c _WATCHDOG java args...`: start the JVM, forward SIGTERM, and terminate it
# when stdin reaches EOF (the owner died or called stop()).
_WATCHDOG = r"""
import ctypes, os, signal, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
parent = os.getpid()
def arm():
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
child = subprocess.Popen(sys.argv[1:], preexec_fn=arm, stdin=subprocess.DEVNULL)
def stop(*_):
    if child.poll() is None:
        child.terminate()
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
signal.signal(signal.SIGTERM, stop)
def watch():
    while os.read(0, 4096):
        pass
    stop()
threading.Thread(target=watch, daemon=True).start()
sys.exit(child.wait())
"""


def zookeeper_available() -> bool:
    """Whether Debian's zookeeper jars and a ``java`` are installed."""
    return all(p.exists() for p in ZOOKEEPER_CLASSPATH) and which("java") is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``) to 127.0.0.1:``port``; its answer as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper process (see the module docstring)."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        port: int = 0,
        tick_time_ms: int = 200,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int = 60_000,
        log_path: str | Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or _free_port()
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms or 2 * tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.log_path = Path(log_path) if log_path else self.data_dir / "zookeeper.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdin_w: int | None = None

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The watchdog's pid while running (the JVM is its only child)."""
        return self._proc.pid if self._proc else None

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
            "autopurge.purgeInterval=0\n"
        )
        return cfg

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until ``srvr`` answers (RuntimeError if it exits or times out)."""
        if self._proc is not None and self._proc.poll() is None:
            raise RuntimeError("ZooKeeper is already running")
        cfg = self._write_config()
        classpath = ":".join(str(p) for p in ZOOKEEPER_CLASSPATH)
        java = [
            "java",
            "-Xms32m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            classpath,
            _MAIN_CLASS,
            str(cfg),
        ]
        read_end, write_end = os.pipe()
        with open(self.log_path, "ab") as log:
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", "-c", _WATCHDOG, *java],
                    stdin=read_end,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            finally:
                os.close(read_end)
        os.set_inheritable(write_end, False)
        self._stdin_w = write_end
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                self._close_pipe()
                raise RuntimeError(f"ZooKeeper exited with {self._proc.returncode}; see {self.log_path}")
            try:
                if "Mode:" in four_letter_word(self.port, "srvr", timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"ZooKeeper did not answer within {timeout} s; see {self.log_path}")
            time.sleep(0.05)

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _close_pipe(self) -> None:
        if self._stdin_w is not None:
            os.close(self._stdin_w)
            self._stdin_w = None

    def stop(self, timeout: float = 15.0) -> None:
        """Graceful shutdown: close the watchdog's pipe, it SIGTERMs the JVM and waits for it."""
        if self._proc is None:
            return
        self._close_pipe()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._proc = None

    def kill(self) -> None:
        """Crash: SIGKILL the watchdog; the kernel then SIGKILLs the JVM (PR_SET_PDEATHSIG)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._close_pipe()
        self._proc = None
        # The JVM dies asynchronously after its parent; wait until the port is free again.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                four_letter_word(self.port, "ruok", timeout=0.2)
            except OSError:
                return
            time.sleep(0.02)

    def restart(self, *, kill: bool = False, timeout: float = 30.0) -> None:
        """Stop (or kill) and start again on the same port and data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start(timeout)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
