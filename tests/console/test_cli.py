"""`odradek console` against a broker process, and `odradek groups describe`'s lag in seconds."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from odradek.client import Admin, Producer, TopicPartition

pytestmark = pytest.mark.timeout(90)

TOPIC = "cli-topic"


@pytest.fixture(scope="module")
def lagging(broker):  # the module-scoped broker process of tests/conftest.py (no console)
    conf = {"bootstrap.servers": broker.bootstrap_servers}
    with Admin(conf) as admin:
        admin.create_topics([TOPIC])
    with Producer(conf) as producer:
        for i in range(100):
            producer.send(TOPIC, b"v%d" % i)
        producer.flush()
    with Admin(conf) as admin:
        admin.alter_group_offsets("cli-group", {TopicPartition(TOPIC, 0): 40})
    return broker


def test_console_command_serves_metrics(lagging) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "console", "--bootstrap-server", lagging.bootstrap_servers,
         "--listen", "http://127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert line and line[0], proc.stderr.read1().decode() if proc.poll() is not None else "no ready line"
        m = re.match(rb"odradek console on (http://\S+) for ", line[0])
        assert m, line[0]
        url = m.group(1).decode()
        deadline = time.monotonic() + 20
        text = ""
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
                text = r.read().decode()
            if 'kafka_consumergroup_lag{consumergroup="cli-group"' in text:
                break
            time.sleep(0.2)
        assert f'kafka_consumergroup_lag{{consumergroup="cli-group",partition="0",topic="{TOPIC}"}} 60.0' in text
        assert f'kafka_topic_partition_current_offset{{partition="0",topic="{TOPIC}"}} 100.0' in text
        # no broker internals outside a broker
        assert "kafka_log_log_size" not in text
        with urllib.request.urlopen(url + "/groups/cli-group", timeout=10) as r:
            assert "cli-group" in r.read().decode()
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.returncode == 0


def test_groups_describe_shows_lag_seconds(lagging) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "groups", "describe", "cli-group",
         "--bootstrap-server", lagging.bootstrap_servers],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    header = next(line for line in out.splitlines() if line.startswith("TOPIC"))
    assert "LAG-SECONDS" in header.split()
    row = next(line for line in out.splitlines() if line.startswith(TOPIC))
    cols = row.split()
    lag_index = header.split().index("LAG")
    assert cols[lag_index] == "60"
    assert float(cols[header.split().index("LAG-SECONDS")]) >= 0
