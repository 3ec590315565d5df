"""`odradek cluster up/status/down` and `odradek topics describe` on a cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from odradek.cli.cluster import status_lines
from odradek.cluster.zookeeper import zookeeper_available

from .harness import SLOW


def _p(index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(
        partition_index=index, leader_id=leader, replica_nodes=replicas, isr_nodes=isr
    )


def test_status_lines_list_under_replicated_and_offline_partitions() -> None:
    md = SimpleNamespace(
        cluster_id="c",
        controller_id=2,
        brokers=[
            SimpleNamespace(node_id=2, host="h", port=2),
            SimpleNamespace(node_id=1, host="h", port=1),
        ],
        topics=[
            SimpleNamespace(
                name="t",
                partitions=[
                    _p(1, 1, (1, 2), (1,)),
                    _p(0, 1, (1, 2), (1, 2)),
                    _p(2, -1, (3,), (3,)),
                ],
            )
        ],
    )
    lines = status_lines(md)
    assert lines[:5] == ["cluster id: c", "controller: 2", "brokers:", "\t1\th:1", "\t2\th:2"]
    assert "under-replicated partitions: 1" in lines
    assert "\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 1,2\tIsr: 1" in lines
    assert "offline partitions: 1" in lines
    with_consoles = status_lines(md, {1: "http://h:9644"})
    assert with_consoles[3:5] == ["\t1\th:1\tconsole http://h:9644", "\t2\th:2"]


def _odradek(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
@SLOW
def test_cluster_up_status_describe_down(tmp_path: Path) -> None:
    if not zookeeper_available():
        pytest.skip("Debian's zookeeper package (or java) is not installed")
    d = str(tmp_path / "dev")
    up = _odradek("cluster", "up", "--brokers", "3", "--port", "0", "--http-port", "0", "--dir", d)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        bootstrap = json.loads((tmp_path / "dev" / "cluster.json").read_text())["bootstrap_servers"]
        assert f"bootstrap servers: {bootstrap}" in up.stdout
        assert len(bootstrap.split(",")) == 3
        created = _odradek("topics", "create", "dev", "-p", "3", "-r", "3", "-b", bootstrap)
        assert created.returncode == 0, created.stderr
        described = _odradek("topics", "describe", "dev", "-b", bootstrap)
        rows = [line for line in described.stdout.splitlines() if "Partition:" in line]
        assert len(rows) == 3 and all("Replicas:" in r and "Isr:" in r for r in rows), (
            described.stdout
        )
        assert {r.split("Leader: ")[1].split("\t")[0] for r in rows} == {"1", "2", "3"}
        status = _odradek("cluster", "status", "--dir", d)
        assert status.returncode == 0, status.stderr
        assert "under-replicated partitions: 0" in status.stdout
        brokers = json.loads((tmp_path / "dev" / "cluster.json").read_text())["brokers"]
        assert len(brokers) == 3 and all(
            b["console"].startswith("http://127.0.0.1:") for b in brokers
        )
        for b in brokers:
            assert f"broker {b['id']}: 127.0.0.1:{b['port']}\tconsole {b['console']}" in up.stdout
            assert f"\t{b['id']}\t127.0.0.1:{b['port']}\tconsole {b['console']}" in status.stdout
            with urllib.request.urlopen(b["console"] + "/health", timeout=10) as health:
                assert health.status == 200
        assert status.stdout.count("\tconsole http://127.0.0.1:") == 3
    finally:
        down = _odradek("cluster", "down", "--dir", d)
    assert down.returncode == 0 and "cluster stopped" in down.stdout, down.stdout + down.stderr
    assert not (tmp_path / "dev" / "cluster.json").exists()
