"""Other unmodified clients on the replicated cluster: kafka-python and aiokafka produce with
acks=all to a topic with replication factor 3 across a leader SIGKILL, and kcat reads every
acknowledged record back."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from .harness import Cluster

pytestmark = pytest.mark.interop

TOPIC = "many-clients"


def _kcat_values(bootstrap: str) -> list[bytes]:
    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%s\n"],
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line]


async def _aiokafka_send(bootstrap: str, values: list[bytes]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", request_timeout_ms=60_000, retry_backoff_ms=200
    )
    await producer.start()
    try:
        for i, v in enumerate(values):
            await producer.send_and_wait(TOPIC, v, partition=i % 3)
    finally:
        await producer.stop()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kafka_python_aiokafka_and_kcat_through_a_failover(cluster3: Cluster) -> None:
    from kafka import KafkaProducer

    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for f in admin.create_topics([NewTopic(TOPIC, 3, 3)], request_timeout=30).values():
        f.result(timeout=30)
    md = cluster3.wait_metadata(
        lambda md: len(cluster3.partitions(md, TOPIC)) == 3
        and all(len(p.isr_nodes) == 3 for p in cluster3.partitions(md, TOPIC).values())
    )
    victim = cluster3.partitions(md, TOPIC)[0].leader_id

    kp = KafkaProducer(
        bootstrap_servers=cluster3.bootstrap_servers.split(","),
        acks="all",
        retries=20,
        retry_backoff_ms=200,
        request_timeout_ms=30_000,
        max_in_flight_requests_per_connection=1,
    )
    sent = [b"kafka-python-%d" % i for i in range(30)]
    try:
        for i, v in enumerate(sent[:15]):
            kp.send(TOPIC, v, partition=i % 3).get(timeout=30)
        cluster3.brokers[victim].kill()
        for i, v in enumerate(sent[15:], start=15):
            kp.send(TOPIC, v, partition=i % 3).get(timeout=60)
    finally:
        kp.close(timeout=10)
    cluster3.wait_metadata(
        lambda md: cluster3.partitions(md, TOPIC)[0].leader_id not in (-1, victim)
    )
    more = [b"aiokafka-%d" % i for i in range(30)]
    asyncio.run(_aiokafka_send(cluster3.bootstrap_servers, more))

    got = _kcat_values(cluster3.bootstrap_servers)
    assert sorted(got) == sorted(sent + more)
