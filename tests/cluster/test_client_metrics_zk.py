"""Client-metrics subscriptions (KIP-714) in a cluster: a subscription written through one
broker's ZooKeeper config store (``/config/client-metrics/<name>``) is what another broker's
``ClientTelemetryManager`` hands its clients and lists (ListClientMetricsResources)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from odradek.broker.client_telemetry import ClientTelemetryManager
from odradek.broker.zk_config_store import ZkConfigEntityStore
from odradek.clock import ManualClock
from odradek.cluster.zk import KafkaZkClient


async def _run(fn: Callable[[], object]) -> object:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


async def test_a_subscription_altered_on_one_broker_reaches_another(zk_connect: str) -> None:
    chroot = f"{zk_connect}/cm-{uuid.uuid4().hex[:8]}"
    sessions = [
        KafkaZkClient(chroot, session_timeout_ms=4000, connection_timeout_ms=4000)
        for _ in range(2)
    ]
    stores = [ZkConfigEntityStore(zk, admin_timeout_ms=2000) for zk in sessions]
    try:
        for zk, store in zip(sessions, stores, strict=True):
            await _run(zk.start)
            await store.start()
        first = ClientTelemetryManager(ManualClock(), stores[0])
        second = ClientTelemetryManager(ManualClock(), stores[1])
        await first.alter("fast", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}, False)
        deadline = time.monotonic() + 10
        while second.describe("fast") == []:
            assert time.monotonic() < deadline, "the subscription never reached the other broker"
            await asyncio.sleep(0.02)
        answer = second.get_subscriptions(None, "app", "10.0.0.1")
        assert answer.requested_metrics == ("org.apache.kafka.",)
        assert answer.push_interval_ms == 1000
        # ListClientMetricsResources on either broker names it, until it is removed
        assert first.list_client_metrics_resources() == ["fast"]
        assert second.list_client_metrics_resources() == ["fast"]
        await first.alter("fast", {}, False)
        assert first.list_client_metrics_resources() == []
        while second.list_client_metrics_resources():
            assert time.monotonic() < deadline, "the removal never reached the other broker"
            await asyncio.sleep(0.02)
    finally:
        for zk, store in zip(sessions, stores, strict=True):
            store.close()
            await _run(zk.close)
