"""``BrokerProcess``: a real ``python -m odradek broker`` subprocess for tests and benchmarks.

    with BrokerProcess({"num.partitions": 3}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        broker.restart()          # SIGTERM, wait, start again on the same data dir and port
        broker.kill()             # SIGKILL (a crash: only what was written survives)

Defaults: ``listeners=PLAINTEXT://127.0.0.1:0`` (an ephemeral port, read back from the ready
line) and ``log.dirs`` in a fresh temporary directory removed by ``close()`` unless the
caller passed its own ``data_dir``. ``restart()`` reuses the port it got the first time (so
clients' bootstrap addresses keep working); settings may be changed for the restart.
The broker's stderr goes to ``<data_dir>/../broker-<n>.log`` (``log_path``) for post-mortems.

The broker never outlives the process that started it: it gets the read end of a pipe
(``odradek broker --exit-with-parent-fd``) whose write end only this object holds, and stops
when the pipe reaches EOF - when ``close()`` runs, and also when this process is SIGKILLed or
a test run is killed, since the kernel closes the write end then.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["BrokerProcess", "BrokerStartError", "set_parent_death_signal"]

READY_RE = re.compile(
    r"^odradek broker listening on (?P<host>\S+):(?P<port>\d+) \(node (?P<node>-?\d+), log\.dirs (?P<dirs>.*)\)$"
)

CONSOLE_RE = re.compile(r"console listening on (https?://\S+)")


class BrokerStartError(RuntimeError):
    """The broker process exited or did not print its ready line in time."""


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class BrokerProcess:
    """One broker subprocess. See the module docstring."""

    def __init__(
        self,
        settings: Mapping[str, Any] | None = None,
        *,
        data_dir: str | Path | None = None,
        start_timeout: float = 20.0,
        python: str | None = None,
        log_level: str = "warning",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings: dict[str, str] = {k: _to_str(v) for k, v in (settings or {}).items()}
        self._own_dir = data_dir is None and "log.dirs" not in self.settings
        self._tmp: Path | None
        if self._own_dir:
            self._tmp = Path(tempfile.mkdtemp(prefix="odradek-broker-"))
            self.data_dir = self._tmp / "data"
        else:
            self._tmp = None
            self.data_dir = Path(
                data_dir if data_dir is not None else self.settings["log.dirs"].split(",")[0]
            )
        self.settings.setdefault("log.dirs", str(self.data_dir))
        self.settings.setdefault("listeners", "PLAINTEXT://127.0.0.1:0")
        # touch(testing): no console unless asked (http.listeners), so test brokers never fight
        # over its default port
        self.settings.setdefault("http.listeners", "")
        self.start_timeout = start_timeout
        self.python = python or sys.executable
        self.log_level = log_level
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.node_id = 0
        self.starts = 0
        self.log_path: Path | None = None
        self._stderr_file: Any = None
        self._parent_w: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, parent_fd: int | None = None) -> list[str]:
        cmd = [self.python, "-m", "odradek", "broker", "--log-level", self.log_level]
        if parent_fd is not None:
            cmd += ["--exit-with-parent-fd", str(parent_fd)]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def start(self) -> BrokerProcess:
        if self.running:
            raise RuntimeError("broker already running")
        self.starts += 1
        log_dir = self._tmp if self._tmp is not None else Path(tempfile.gettempdir())
        self.log_path = log_dir / f"odradek-broker-{os.getpid()}-{id(self)}-{self.starts}.log"
        self._stderr_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in _reap
        env = dict(os.environ)
        env.update(self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # os.pipe() fds are not inheritable: only this broker gets the read end (pass_fds),
        # and no other child inherits the write end, so EOF means "this process is gone"
        parent_r, self._parent_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                self.command(parent_r),
                stdout=subprocess.PIPE,
                stderr=self._stderr_file,
                stdin=subprocess.DEVNULL,
                env=env,
                pass_fds=(parent_r,),
            )
        except BaseException:
            self._close_parent_pipe()
            raise
        finally:
            os.close(parent_r)
        line = self._read_ready_line()
        m = READY_RE.match(line)
        if m is None:
            self._terminate_quietly()
            raise BrokerStartError(f"unexpected ready line {line!r}; stderr: {self.stderr_tail()}")
        host = m.group("host")
        self.host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        self.port = int(m.group("port"))
        self.node_id = int(m.group("node"))
        return self

    def _read_ready_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        result: list[bytes] = []
        stdout = self.proc.stdout

        def reader() -> None:
            result.append(stdout.readline())

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(self.start_timeout)
        if not result or not result[0]:
            rc = self.proc.poll()
            self._terminate_quietly()
            what = (
                f"exited with {rc}" if rc is not None else f"not ready after {self.start_timeout}s"
            )
            raise BrokerStartError(f"broker {what}; stderr: {self.stderr_tail()}")
        # keep draining stdout so the broker never blocks on a full pipe
        threading.Thread(target=_drain, args=(stdout,), daemon=True).start()
        return result[0].decode(errors="replace").strip()

    def stderr_tail(self, limit: int = 4000) -> str:
        if self.log_path is None:
            return ""
        with contextlib.suppress(OSError):
            if self._stderr_file is not None:
                self._stderr_file.flush()
            return self.log_path.read_text(errors="replace")[-limit:]
        return ""

    def console_url(self, timeout: float = 15.0) -> str:
        """The URL of the broker's console (started with ``http.listeners``), from the
        ``console listening on <url>`` line it logs (at INFO: ``log_level="info"``) once the
        console is up, before its ready line. Raises TimeoutError without one in ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            m = CONSOLE_RE.search(self.stderr_tail(1 << 20))
            if m:
                return m.group(1)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no console line in the broker log: {self.stderr_tail()}")
            time.sleep(0.05)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait (graceful: flush, checkpoint). Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self._reap()

    def kill(self) -> int | None:
        """SIGKILL (a crash) and wait."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        return self._reap()

    def restart(
        self,
        settings: Mapping[str, Any] | None = None,
        *,
        same_port: bool = True,
        kill: bool = False,
    ) -> BrokerProcess:
        """Stop (or kill) and start again on the same data dir (and, by default, the same port)."""
        if kill:
            self.kill()
        else:
            self.stop()
        if settings:
            self.settings.update({k: _to_str(v) for k, v in settings.items()})
        if same_port and self.port:
            self.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.start()
            except BrokerStartError:
                # the port may linger briefly; retry until the deadline
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _close_parent_pipe(self) -> None:
        fd, self._parent_w = self._parent_w, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _reap(self) -> int | None:
        self._close_parent_pipe()
        rc = None
        if self.proc is not None:
            rc = self.proc.returncode
            if self.proc.stdout is not None:
                with contextlib.suppress(Exception):
                    self.proc.stdout.close()
        if self._stderr_file is not None:
            with contextlib.suppress(Exception):
                self._stderr_file.close()
            self._stderr_file = None
        return rc

    def _terminate_quietly(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(5)
        self._reap()

    def close(self) -> None:
        """Stop the broker and remove its temporary directory (when we created it)."""
        self.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> BrokerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BrokerProcess({self.bootstrap_servers}, pid={self.pid}, data_dir={self.data_dir})"


def set_parent_death_signal() -> None:  # pragma: no cover - runs in the child before exec
    """``preexec_fn`` for children that cannot watch a pipe (Tansu, kcat): Linux sends them
    SIGTERM when their parent dies (PR_SET_PDEATHSIG). It fires when the *thread* that forked
    the child exits, so start such children from a thread that outlives them (pytest's main
    thread). A no-op elsewhere."""
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _drain(stream: Any) -> None:
    with contextlib.suppress(Exception):
        while stream.read(65536):
            pass
