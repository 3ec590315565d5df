"""What the old-client interop tests share: a broker with its console (for the request counts
per API and version, Kafka's RequestMetrics), and a scrape of those counts.

The counts prove which versions a client really sent: an old client that silently negotiated
a newer version would pass a produce/consume test without exercising the old versions.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable, Iterator

from prometheus_client.parser import text_string_to_metric_families

from odradek.testing.process import BrokerProcess

__all__ = ["ConsoleBroker", "console_broker", "request_counts", "wait_for_counts"]

_CONSOLE_RE = re.compile(r"console listening on (http://\S+)")

RequestCounts = dict[tuple[str, int], float]


class ConsoleBroker:
    def __init__(self, process: BrokerProcess, url: str) -> None:
        self.process = process
        self.url = url

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap_servers


def console_broker() -> Iterator[ConsoleBroker]:
    """A broker process with its console on an ephemeral port (use as a fixture body)."""
    process = BrokerProcess(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "http.listeners": "http://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 1,
        },
        log_level="info",
    )
    process.start()
    try:
        yield ConsoleBroker(process, _console_url(process))
    finally:
        process.close()


def _console_url(process: BrokerProcess, timeout: float = 15.0) -> str:
    """The console's URL from the broker's log (the console starts in the background)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = _CONSOLE_RE.search(process.stderr_tail(1 << 20))
        if match:
            return match.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no console line in the broker log: {process.stderr_tail()}")


def request_counts(broker: ConsoleBroker) -> RequestCounts:
    """(API name, version) -> requests answered, from /metrics."""
    with urllib.request.urlopen(broker.url + "/metrics", timeout=15) as response:
        text = response.read().decode()
    out: RequestCounts = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kafka_network_requestmetrics_requests_total":
                out[(s.labels["request"], int(s.labels["version"]))] = s.value
    return out


def wait_for_counts(
    broker: ConsoleBroker, ok: Callable[[RequestCounts], bool], timeout: float = 20.0
) -> RequestCounts:
    """Scrape until ``ok(counts)`` (the console refreshes its snapshot at most once a second)."""
    deadline = time.monotonic() + timeout
    counts: RequestCounts = {}
    while time.monotonic() < deadline:
        counts = request_counts(broker)
        if ok(counts):
            return counts
        time.sleep(0.25)
    raise AssertionError(f"request counts never matched: {sorted(counts.items())}")
