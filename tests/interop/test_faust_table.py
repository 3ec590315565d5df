"""A Faust table restored from a compacted changelog on a real `odradek broker` process: run
the app, stop it, let the log cleaner compact the changelog, start it again: the table comes
back from the compacted changelog alone (memory store)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.records import iter_batches
from odradek.testing.process import BrokerProcess

pytest.importorskip("faust")
pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

APP = Path(__file__).with_name("faust_table_app.py")
EVENTS = 300


def _worker(broker: BrokerProcess, workdir: Path, state: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, BROKER=f"kafka://{broker.bootstrap_servers}", STATE=str(state))
    env["PYTHONPATH"] = str(APP.parent)
    return subprocess.Popen(
        [sys.executable, "-m", "faust", "-A", "faust_table_app", "worker", "-l", "warn"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_state(state: Path, expected: dict[str, int] | None, total: int, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    got: Any = None
    while time.monotonic() < deadline:
        try:
            got = json.loads(state.read_text())
        except (OSError, ValueError):
            got = None
        if got and (got == expected if expected is not None else sum(got.values()) == total):
            return got
        time.sleep(0.2)
    raise AssertionError(f"table state {got!r}, expected {expected or total}")


def _changelog(broker: BrokerProcess) -> tuple[int, int]:
    """(records on disk, log end offset) of the changelog partition."""
    records = end = 0
    for path in sorted(broker.data_dir.rglob("restore-counts-changelog-0/*.log")):
        for batch in iter_batches(path.read_bytes()):
            records += batch.record_count
            end = max(end, batch.last_offset + 1)
    return records, end


def _stop(worker: subprocess.Popen[bytes]) -> None:
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(10)


def test_faust_table_restored_from_compacted_changelog(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    with BrokerProcess({"log.cleaner.backoff.ms": "50", "num.partitions": "1"}) as broker:
        worker = _worker(broker, tmp_path, tmp_path / "state1.json")
        try:
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
            for i in range(EVENTS):
                producer.produce("events", json.dumps(i % 7).encode(), f"k{i % 5}".encode())
            assert producer.flush(10) == 0
            before = _wait_state(
                tmp_path / "state1.json", None, sum(i % 7 for i in range(EVENTS)), 60
            )
        finally:
            _stop(worker)
        # the changelog holds one record per update; wait for the cleaner to compact it
        deadline = time.monotonic() + 30
        records, end = _changelog(broker)
        while records >= end // 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            records, end = _changelog(broker)
        assert records < end // 2, (records, end)
        worker = _worker(broker, tmp_path, tmp_path / "state2.json")
        try:
            after = _wait_state(tmp_path / "state2.json", before, 0, 60)
        finally:
            _stop(worker)
        assert after == before
