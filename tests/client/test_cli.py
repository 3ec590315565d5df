"""`odradek topics|produce|consume|perf` against the odradek broker."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner

from odradek.cli.main import _register, app

pytestmark = pytest.mark.timeout(90)

_register()
runner = CliRunner()


def _run(broker: Any, *args: str, input: str | None = None) -> Any:
    res = runner.invoke(app, [*args, "--bootstrap-server", broker.bootstrap_servers], input=input)
    return res


def test_topics_lifecycle(broker: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    r = _run(broker, "topics", "create", name, "--partitions", "2", "--config", "retention.ms=100000")
    assert r.exit_code == 0 and f"Created topic {name}" in r.output
    assert _run(broker, "topics", "create", name).exit_code == 1
    assert "already exists" in _run(broker, "topics", "create", name, "--if-not-exists").output
    assert name in _run(broker, "topics", "list").output.split()
    r = _run(broker, "topics", "describe", name)
    assert "PartitionCount: 2" in r.output and "retention.ms=100000" in r.output
    assert _run(broker, "topics", "alter", name, "--partitions", "3", "--config", "retention.ms=5000").exit_code == 0
    r = _run(broker, "topics", "describe", name)
    assert "PartitionCount: 3" in r.output and "retention.ms=5000" in r.output
    assert _run(broker, "topics", "alter", name).exit_code == 2
    assert _run(broker, "topics", "delete", name).exit_code == 0
    assert name not in _run(broker, "topics", "list").output.split()


def test_produce_consume(broker: Any) -> None:
    name = f"cli-{uuid.uuid4().hex[:6]}"
    r = _run(broker, "produce", name, "--key-separator", ":", "--header", "h=1", input="k1:v1\nk2:v2\nplain\n")
    assert r.exit_code == 0, r.output
    r = _run(broker, "consume", name, "--from-beginning", "--max-messages", "3", "--print-key", "--print-offset", "--print-headers")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == ["Offset:0\th:1\tk1\tv1", "Offset:1\th:1\tk2\tv2", "Offset:2\th:1\tnull\tplain"]
    r = _run(broker, "consume", name, "--partition", "0", "--offset", "2", "--timeout-ms", "1000", "--print-timestamp")
    assert r.exit_code == 0 and r.stdout.count("\n") == 1 and r.stdout.startswith("CreateTime:") and r.stdout.endswith("\tplain\n")
    assert _run(broker, "consume", name, "--offset", "2").exit_code == 2  # --offset needs --partition


def _run_perf(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a perf command; on a hang, dump its threads (faulthandler on SIGABRT) and fail."""
    import os
    import signal

    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "odradek", "perf", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        out, err = proc.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"perf {args[0]} hung:\n{err[-6000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_perf_commands(broker: Any) -> None:
    name = f"perf-{uuid.uuid4().hex[:6]}"
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    r = _run_perf(["produce", "--topic", name, "--num-records", "5000", "--record-size", "50", "-q", "-X", "linger.ms=5", *bs])
    assert r.returncode == 0, r.stderr
    assert "5000 records sent" in r.stdout and "records/sec" in r.stdout and "99th" in r.stdout
    r = _run_perf(["consume", "--topic", name, "--messages", "5000", "-q", *bs])
    assert r.returncode == 0, r.stderr
    assert "5000 records consumed" in r.stdout and "MB/sec" in r.stdout
