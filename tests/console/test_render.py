"""/metrics rendering: the same text as prometheus-client's generate_latest, produced one family
at a time with the event loop free in between."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from odradek.console.app import Console
from odradek.console.source import ClusterSource
from odradek.metrics.broker import BrokerMetrics, EventLoopLag

pytestmark = pytest.mark.timeout(30)


async def test_render_matches_generate_latest_and_yields_between_families() -> None:
    metrics = BrokerMetrics({0: "Produce", 1: "Fetch", 3: "Metadata"})
    for i in range(300):  # a latency histogram of 3 x 19 samples: rendered in slices
        metrics.request_done(i % 3, 9, 0.0001 * i, 100)
    metrics.request_failed(0, 9, 0.5, 100, "UNKNOWN_SERVER_ERROR")
    metrics.topic_bytes_in("t", 1000, 10)
    metrics.topic_bytes_out("t", 500)
    lag = EventLoopLag()
    lag.observe(0.003)
    console = Console(ClusterSource("127.0.0.1:9"), collectors=[metrics, lag])
    ticks = 0

    async def other_work() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(other_work())
    await asyncio.sleep(0)
    before = ticks
    try:
        text = await console.render_metrics()
    finally:
        task.cancel()
    families = text.count(b"# TYPE ")
    assert families >= 8
    assert ticks - before >= families  # the loop ran other work between families and slices
    assert text == generate_latest(console.registry)
    assert b'kafka_network_requestmetrics_errors_total{error="UNKNOWN_SERVER_ERROR",request="Produce"} 1.0' in text
    assert b'kafka_server_brokertopicmetrics_bytesin_total{topic="t"} 1000.0' in text
    assert b'kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 10.0' in text


@pytest.mark.timeout(120)
def test_under_replicated_partitions_are_those_led_here_with_a_short_isr() -> None:
    from odradek.testing import EmbeddedBroker

    with EmbeddedBroker() as b:
        b.call(lambda: b.broker.create_topic("urp", 2))
        state = b.call(b.broker.observed_state)
        assert b.call(state.under_replicated) == 0

        def add_a_replica_missing_from_the_isr() -> None:
            p = b.broker.partition("urp", 1)
            p.state.replicas = [p.node_id, p.node_id + 1]  # the ISR stays [this broker]

        b.call(add_a_replica_missing_from_the_isr)
        assert b.call(state.under_replicated) == 1
