"""The console against another Kafka-compatible broker (Tansu, a Rust implementation): what
`odradek console --bootstrap-server` does for Apache Kafka and friends. Tansu 0.6 answers
ListOffsets "latest" wrongly (a known gap), so end offsets are not checked here."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from odradek.client import Admin, Producer

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


async def test_console_against_tansu() -> None:
    tansu_mod = pytest.importorskip("odradek.testing.tansu")
    try:
        tansu_mod.find_tansu_binary()
    except Exception as exc:
        pytest.skip(f"no tansu binary: {exc}")
    from odradek.console.app import Console
    from odradek.console.source import ClusterSource

    loop = asyncio.get_running_loop()

    def get(url: str) -> tuple[int, str]:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()

    with tansu_mod.TansuProcess() as tansu:
        conf = {"bootstrap.servers": tansu.bootstrap_servers}

        def setup() -> None:
            with Admin(conf) as admin:
                admin.create_topics(["elsewhere"])
            with Producer(conf) as producer:
                for i in range(10):
                    producer.send("elsewhere", b"v%d" % i, key=b"k%d" % i)
                producer.flush()

        await loop.run_in_executor(None, setup)
        console = Console(ClusterSource(tansu.bootstrap_servers))
        port = await console.start("127.0.0.1", 0)
        base = f"http://127.0.0.1:{port}"
        try:
            status, text = await loop.run_in_executor(None, get, base + "/metrics")
            assert status == 200
            assert 'kafka_topic_partitions{topic="elsewhere"} 1.0' in text
            assert "kafka_brokers 1.0" in text
            status, body = await loop.run_in_executor(
                None, get, base + "/api/topics/elsewhere/messages?partition=0&offset=3&limit=2"
            )
            records = json.loads(body)
            assert [(r["offset"], r["key"], r["value"]) for r in records] == [
                (3, "k3", "v3"),
                (4, "k4", "v4"),
            ]
            status, page = await loop.run_in_executor(None, get, base + "/topics/elsewhere")
            assert status == 200 and "elsewhere" in page
        finally:
            await console.stop()
