"""Offline replicas on the console: a two-broker ZooKeeper cluster whose broker 2 has two log
dirs, one a small tmpfs the test mounts (skipped where mounting is not allowed). A topic of
two partitions, both led by broker 2 and followed by broker 1, has one partition on each of
broker 2's dirs. Records produced to the tmpfs partition fill it: broker 2 takes that dir
offline, the controller moves leadership to broker 1 and Metadata lists broker 2 among the
partition's offline replicas. Broker 1's console shows it: the partition row of
``/topics/<t>`` has broker 2 in its Offline column, the other row none, and ``/api/topics``
gives each partition's ``offline_replicas``."""

from __future__ import annotations

import html
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.harness import Cluster, running_zookeeper
from odradek.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.interop, pytest.mark.timeout(110)]

TOPIC = "offl"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    yield from running_zookeeper(tmp_path_factory, "zookeeper")


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=15) as r:
        body: bytes = r.read()
    return body.decode()


def _until(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.1)


def _rows(page: str) -> dict[int, list[str]]:
    """partition -> the cells of its row in the page's partitions table."""
    table = page.split('<table id="partitions">', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = [html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        rows[int(cells[0])] = cells
    return rows


def test_console_shows_the_replica_on_a_failed_log_dir(
    zookeeper: ZooKeeperServer, tmp_path: Path, tmpfs: Any
) -> None:
    with tmpfs(tmp_path / "small", "256k") as small:
        cluster = Cluster(zookeeper, tmp_path, 2, {"http.listeners": "http://127.0.0.1:0"})
        b2 = cluster.brokers[2]
        big = Path(b2.data_dir).resolve()
        b2.settings["log.dirs"] = f"{big},{small}"
        try:
            cluster.start()
            _run(cluster, big, small)
        finally:
            cluster.close()


def _run(cluster: Cluster, big: Path, small: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(TOPIC, 2, replica_assignment=[[2, 1], [2, 1]])
    for f in admin.create_topics([new], request_timeout=30).values():
        f.result(timeout=30)
    cluster.wait_metadata(
        lambda md: (
            len(cluster.partitions(md, TOPIC)) == 2
            and all(
                p.leader_id == 2 and len(p.isr_nodes) == 2
                for p in cluster.partitions(md, TOPIC).values()
            )
        )
    )

    # a new log goes to the dir with the fewest logs: one partition on each of broker 2's dirs
    def placed() -> dict[int, Path] | None:
        where = {p: d for p in (0, 1) for d in (big, small) if (d / f"{TOPIC}-{p}").is_dir()}
        return where if len(where) == 2 else None

    where = _until("both partitions' logs on broker 2", placed, timeout=10)
    assert set(where.values()) == {big, small}, where
    doomed = next(p for p, d in where.items() if d == small)
    healthy = 1 - doomed

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for _ in range(400):  # 256 KiB of tmpfs hold fewer than 256 of these
        producer.produce(TOPIC, b"x" * 1000, partition=doomed)
        producer.poll(0)
    producer.flush(60)
    cluster.wait_metadata(
        lambda md: list(cluster.partitions(md, TOPIC)[doomed].offline_replicas) == [2],
        broker_id=1,
    )

    url = cluster.brokers[1].console_url()

    def shown() -> dict[int, list[str]] | None:
        rows = _rows(_get(f"{url}/topics/{TOPIC}"))
        return rows if rows[doomed][4] == "2" else None

    rows = _until("offline replica on the topic page", shown)
    header = _get(f"{url}/topics/{TOPIC}").split('<table id="partitions">', 1)[1]
    assert "<th>Offline</th>" in header.split("</tr>", 1)[0]
    assert rows[doomed][1] == "1"  # the leader moved to broker 1
    assert rows[doomed][3] == "1"  # and the ISR shrank to it
    assert rows[healthy][1] == "2" and rows[healthy][4] == ""
    topics = {t["name"]: t for t in json.loads(_get(f"{url}/api/topics"))}
    by_partition = {p["partition"]: p for p in topics[TOPIC]["partitions"]}
    assert by_partition[doomed]["offline_replicas"] == [2]
    assert by_partition[healthy]["offline_replicas"] == []
