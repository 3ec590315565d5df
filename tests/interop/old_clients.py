"""What the old-client interop tests share: a broker with its console (for the request counts
per API and version, Kafka's RequestMetrics), and a scrape of those counts.

The counts prove which versions a client really sent: an old client that silently negotiated
a newer version would pass a produce/consume test without exercising the old versions.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from console.harness import ConsoleBroker, running_console_broker

__all__ = ["ConsoleBroker", "request_counts", "running_console_broker", "wait_for_counts"]

RequestCounts = dict[tuple[str, int], float]


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
