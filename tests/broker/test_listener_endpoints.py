"""Metadata and DescribeCluster name every broker at its endpoint on the listener the request
came in on; a broker without that listener is left out (Kafka's MetadataCache). One real
broker with two PLAINTEXT-protocol listeners (PLAINTEXT and INTERNAL); other brokers are
registrations in its store with the listeners they advertise."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.metadata_store import BrokerInfo, ListenerAddress
from odradek.broker.server import Broker

from .wire import Wire, req

pytestmark = pytest.mark.timeout(60)


def _config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "log.dirs": str(tmp_path / "data"),
            "storage.engine": "memory",
        }
    )


async def test_each_listener_is_told_its_own_endpoints(tmp_path: Path) -> None:
    async with Broker(_config(tmp_path)) as broker:
        assert broker.endpoints is not None
        own = {ep.name: ep.address[1] for ep in broker.endpoints.endpoints}
        # broker 42 has both listeners, broker 43 only PLAINTEXT
        await broker.metadata.register_broker(
            BrokerInfo(
                42,
                "10.0.0.42",
                9092,
                endpoints=(
                    ListenerAddress("PLAINTEXT", "PLAINTEXT", "10.0.0.42", 9092),
                    ListenerAddress("INTERNAL", "PLAINTEXT", "10.0.0.42", 9093),
                ),
            )
        )
        await broker.metadata.register_broker(
            BrokerInfo(
                43,
                "10.0.0.43",
                9092,
                endpoints=(ListenerAddress("PLAINTEXT", "PLAINTEXT", "10.0.0.43", 9092),),
            )
        )

        def ask(port: int) -> tuple[list[tuple[int, str, int]], list[tuple[int, str, int]]]:
            with Wire(f"127.0.0.1:{port}") as w:
                m = w.call(
                    req(
                        3,
                        12,
                        topics=(),
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )
                d = w.call(req(60, 0, include_cluster_authorized_operations=False))
                return (
                    [(int(b.node_id), b.host, int(b.port)) for b in m.brokers],
                    [(int(b.broker_id), b.host, int(b.port)) for b in d.brokers],
                )

        me = broker.node_id
        plain = await asyncio.to_thread(ask, own["PLAINTEXT"])
        internal = await asyncio.to_thread(ask, own["INTERNAL"])
        expected_plain = [
            (me, "127.0.0.1", own["PLAINTEXT"]),
            (42, "10.0.0.42", 9092),
            (43, "10.0.0.43", 9092),
        ]
        expected_internal = [(me, "127.0.0.1", own["INTERNAL"]), (42, "10.0.0.42", 9093)]
        assert plain == (expected_plain, expected_plain)
        assert internal == (expected_internal, expected_internal)
