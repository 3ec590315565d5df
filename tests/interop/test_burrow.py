"""LinkedIn's Burrow (Debian ``burrow``, 1.2.1) monitoring odradek: its lag figures over HTTP.

Burrow keeps its own coordination in ZooKeeper, so the test runs a real Apache ZooKeeper
(``odradek.cluster.zookeeper.ZooKeeperServer``, Debian ``zookeeper``) next to the broker.
Burrow reads the log end offsets with ListOffsets v0 (its cluster module never sets a version)
and the committed offsets by consuming ``__consumer_offsets`` (offset commit values v3), then
serves the lag per partition at ``/v3/kafka/<cluster>/consumer/<group>/lag``.

Known states: a topic with 2 partitions, 100 and 30 records; the group commits 40 and 30, so
Burrow must report lag 60 and 0 (total 60); 20 more records on partition 0 make it 80.

Skipped when Burrow, ZooKeeper or java is not installed (``make system-deps`` installs them).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.harness import running_zookeeper
from odradek.client import Admin, NewTopic, Producer, TopicPartition
from odradek.cluster.zookeeper import ZooKeeperServer

from .conftest import Target
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

CLUSTER = "odradek"
WAIT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def burrow_config(zk: str, bootstrap: str, http_port: int, run_dir: Path) -> str:
    """Burrow's TOML: one cluster and one consumer module on odradek, refreshed every second,
    the evaluator's cache one second, logging to stdout."""
    return f"""
[general]
pidfile="{run_dir / 'burrow.pid'}"

[logging]
level="info"

[zookeeper]
servers=["{zk}"]
timeout=6
root-path="/burrow"

[client-profile.odradek]
client-id="burrow-interop"
kafka-version="2.0.0"

[cluster.{CLUSTER}]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="odradek"
topic-refresh=1
offset-refresh=1

[consumer.{CLUSTER}]
class-name="kafka"
cluster="{CLUSTER}"
servers=["{bootstrap}"]
client-profile="odradek"
group-blacklist=""
group-whitelist=""

[httpserver.default]
address="127.0.0.1:{http_port}"

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
"""


class Burrow:
    def __init__(self, binary: str, run_dir: Path, zk: str, bootstrap: str) -> None:
        self.run_dir = run_dir
        self.port = _free_port()
        (run_dir / "burrow.toml").write_text(burrow_config(zk, bootstrap, self.port, run_dir))
        self.log_path = run_dir / "burrow.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [binary, "-config-dir", str(run_dir)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=run_dir,
        )

    def get(self, path: str) -> Any | None:
        """The decoded JSON answer, or None (not listening yet, 404, Burrow's error flag)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                body = json.loads(r.read())
        except (OSError, urllib.error.HTTPError, ValueError):
            return None
        return None if body.get("error") else body

    def wait(self, what: str, probe: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"Burrow exited ({self.proc.returncode}):\n{self.log_tail()}")
            got = probe()
            if got:
                return got
            time.sleep(0.25)
        raise AssertionError(f"Burrow never showed {what} within {WAIT_S} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


@pytest.fixture
def burrow_binary() -> str:
    path = shutil.which("Burrow") or shutil.which("burrow")
    if path is None:
        pytest.skip("Burrow is not installed (apt-get install burrow)")
    return path


def produce(conf: dict[str, str], topic: str, counts: dict[int, int]) -> None:
    with Producer(conf) as producer:
        for partition, n in counts.items():
            for i in range(n):
                producer.send(topic, b"burrow-%d" % i, partition=partition)
        producer.flush()


def lag_of(burrow: Burrow, group: str, expected: dict[int, int]) -> dict | None:
    body = burrow.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")
    if body is None:
        return None
    status = body["status"]
    lags = {p["partition"]: p["current_lag"] for p in status.get("partitions") or []}
    return status if lags == expected else None


def test_burrow_reports_the_lag_of_a_committed_group(
    kafka: Target, zookeeper: ZooKeeperServer, burrow_binary: str, tmp_path: Path
) -> None:
    topic = unique_topic("burrow")
    group = f"{topic}-group"
    conf = {"bootstrap.servers": kafka.bootstrap_servers}
    with Admin(conf) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=2)])
    produce(conf, topic, {0: 100, 1: 30})
    commit = {TopicPartition(topic, 0): 40, TopicPartition(topic, 1): 30}
    with Admin(conf) as admin:
        admin.alter_group_offsets(group, commit)  # also creates __consumer_offsets

    burrow = Burrow(burrow_binary, tmp_path, zookeeper.connect_string, kafka.bootstrap_servers)
    try:
        # the log end offsets, from Burrow's ListOffsets (v0) requests
        offsets = burrow.wait(
            "the topic's end offsets",
            lambda: (b := burrow.get(f"/v3/kafka/{CLUSTER}/topic/{topic}")) and b["offsets"],
        )
        assert offsets == [100, 30]
        # Burrow drops commits for partitions whose end offset it does not know yet: the commit
        # it read at start may be lost, so commit again now that it knows them
        with Admin(conf) as admin:
            admin.alter_group_offsets(group, commit)
        status = burrow.wait("lag 60 and 0", lambda: lag_of(burrow, group, {0: 60, 1: 0}))
        assert status["totallag"] == 60
        assert status["partition_count"] == 2
        ends = {p["partition"]: p["end"]["offset"] for p in status["partitions"]}
        assert ends == {0: 40, 1: 30}
        assert status["maxlag"]["partition"] == 0 and status["maxlag"]["current_lag"] == 60
        consumers = burrow.get(f"/v3/kafka/{CLUSTER}/consumer")
        assert consumers is not None and group in consumers["consumers"]

        # the lag follows the producers: 20 more records on partition 0
        produce(conf, topic, {0: 20})
        status = burrow.wait("lag 80", lambda: lag_of(burrow, group, {0: 80, 1: 0}))
        assert status["totallag"] == 80
    finally:
        burrow.close()
