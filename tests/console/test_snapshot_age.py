"""A cluster snapshot's age counts from its first read: a topic created while a refresh ran is
in the next snapshot a page asks for, not hidden behind one stamped after its reads."""

from __future__ import annotations

import asyncio

from odradek.client import Admin
from odradek.console.source import ClusterSource

from .conftest import ConsoleBroker


def test_topic_created_during_a_refresh_is_in_the_next_page_snapshot(
    console_broker: ConsoleBroker,
) -> None:
    topic = "created-mid-refresh"
    conf = {"bootstrap.servers": console_broker.bootstrap_servers}
    clock = [1_000_000]
    created: list[str] = []

    def log_sizes() -> dict[tuple[str, int], int]:
        # called after the topics and offsets were read: the topic appears, and the reads
        # "took" 5 s on the injected clock
        if not created:
            with Admin(conf) as admin:
                admin.create_topics([topic])
            created.append(topic)
            clock[0] += 5_000
        return {}

    async def run() -> None:
        source = ClusterSource(
            console_broker.bootstrap_servers, log_sizes=log_sizes, now_ms=lambda: clock[0]
        )
        try:
            first = await source.snapshot(1.0)
            assert created and topic not in first.topics
            assert first.taken_ms == 1_000_000  # when its reads began
            clock[0] += 100
            second = await source.snapshot(1.0)  # the first is 5.1 s old: read again
            assert topic in second.topics
        finally:
            await source.close()

    asyncio.run(run())
