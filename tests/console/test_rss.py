"""The console adds less than 30 MB RSS to a broker.

Two broker processes side by side, the same load: 300 records on a topic, a lagging group,
then ``http.listeners`` off in one and on in the other, where every page, the API, /metrics and
the static assets are served once. The difference of their resident sets is the console's cost
(its imports - h11, Jinja2, prometheus-client, odradek.client - its snapshot and its caches).
"""

from __future__ import annotations

import psutil
import pytest

from odradek.client import Admin, Producer, TopicPartition
from odradek.testing.process import BrokerProcess

from .harness import ConsoleBroker

pytestmark = pytest.mark.timeout(120)

LIMIT_MB = 30.0
TOPIC = "rss-topic"
GROUP = "rss-group"
PAGES = (
    "/", "/topics", f"/topics/{TOPIC}", "/groups", f"/groups/{GROUP}", f"/groups/{GROUP}/lag",
    f"/topics/{TOPIC}/messages?partition=0&offset=0&limit=200", "/api/cluster", "/api/topics",
    f"/api/groups/{GROUP}", f"/api/groups/{GROUP}/history", "/metrics", "/health",
    "/static/htmx.min.js", "/static/uPlot.iife.min.js", "/static/uPlot.min.css",
)


def load(bootstrap: str) -> None:
    conf = {"bootstrap.servers": bootstrap}
    with Admin(conf) as admin:
        admin.create_topics([TOPIC])
    with Producer(conf) as producer:
        for i in range(300):
            producer.send(TOPIC, b'{"n": %d, "pad": "%s"}' % (i, b"x" * 100), key=b"k%d" % i)
        producer.flush()
    with Admin(conf) as admin:
        admin.alter_group_offsets(GROUP, {TopicPartition(TOPIC, 0): 100})


def rss_mb(pid: int | None) -> float:
    assert pid is not None
    return psutil.Process(pid).memory_info().rss / 2**20


def test_console_adds_less_than_30_mb() -> None:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": 0,
                "offsets.topic.num.partitions": 1}
    with BrokerProcess({**settings, "http.listeners": ""}) as off, BrokerProcess(
        {**settings, "http.listeners": "http://127.0.0.1:0"}, log_level="info"
    ) as on:
        console = ConsoleBroker(on, on.console_url())
        for broker in (off, on):
            load(broker.bootstrap_servers)
        for path in (*PAGES, "/metrics", f"/groups/{GROUP}"):  # every page, then again
            status, _body = console.get(path)
            assert status == 200, path
        added = rss_mb(on.pid) - rss_mb(off.pid)
        print(f"RSS off {rss_mb(off.pid):.1f} MB, on {rss_mb(on.pid):.1f} MB: +{added:.1f} MB")
        assert added < LIMIT_MB
