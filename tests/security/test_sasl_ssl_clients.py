"""Third-party clients over SASL_SSL: aiokafka with SASL/PLAIN over TLS, KafkaJS with
SCRAM-SHA-256 and SCRAM-SHA-512 (and a wrong password: KafkaJS's own authentication error).

KafkaJS is the version tests/interop installs into its cache folder (``install_kafkajs``);
skipped when node or npm is missing. SCRAM users are created with AlterUserScramCredentials
(confluent-kafka) over the PLAINTEXT listener.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramMechanism,
)

from odradek.testing.embedded import EmbeddedBroker

from .conftest import PLAIN_JAAS, Certs, add_scram_users, listener_addr, server_tls

SCENARIO = Path(__file__).with_name("kafkajs_sasl.js")


@pytest.fixture(scope="module")
def broker(certs: Certs) -> Iterator[EmbeddedBroker]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        **server_tls(certs, truststore=False),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "group.initial.rebalance.delay.ms": 0,
    }
    with EmbeddedBroker(settings) as b:
        add_scram_users(
            b,
            ("dana", ScramMechanism.SCRAM_SHA_256, 4096, b"dana-pw"),
            ("dana", ScramMechanism.SCRAM_SHA_512, 4096, b"dana-pw"),
        )
        yield b


def addr(b: EmbeddedBroker) -> str:
    return listener_addr(b, "SASL_SSL")


def principals(b: EmbeddedBroker) -> set[str]:
    return b.call(
        lambda: {
            str(c.principal)
            for c in b.broker.listener.connections()
            if c.listener_name == "SASL_SSL" and c._auth is not None and c._auth.authenticated
        }
    )


def test_aiokafka_sasl_plain_over_tls(broker: EmbeddedBroker, certs: Certs) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = f"aio-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    conf = {
        "bootstrap_servers": addr(broker),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "carol",
        "sasl_plain_password": "carol-pw",
        "ssl_context": create_ssl_context(cafile=str(certs.ca_pem)),
    }

    async def run() -> tuple[list[bytes], set[str]]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"m{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"{topic}-g", auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                got.extend(m.value for msgs in batches.values() for m in msgs)
            seen = principals(broker)
        finally:
            await consumer.stop()
        return got, seen

    got, seen = asyncio.run(run())
    assert got == [f"m{i}".encode() for i in range(10)]
    assert seen == {"User:carol"}


def test_aiokafka_wrong_password_fails(broker: EmbeddedBroker, certs: Certs) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError
    from aiokafka.helpers import create_ssl_context

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=addr(broker), security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
            sasl_plain_username="carol", sasl_plain_password="wrong",
            ssl_context=create_ssl_context(cafile=str(certs.ca_pem)), request_timeout_ms=5000,
        )
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(KafkaError):
        asyncio.run(asyncio.wait_for(run(), 30))


@pytest.fixture(scope="module")
def kafkajs() -> Path:
    from interop.test_kafkajs import install_kafkajs

    return install_kafkajs()


def run_kafkajs(modules: Path, broker: EmbeddedBroker, certs: Certs, mechanism: str, password: str,
                topic: str, count: int = 20) -> dict:
    env = dict(os.environ, NODE_PATH=str(modules))
    done = subprocess.run(
        ["node", str(SCENARIO), addr(broker), str(certs.ca_pem), mechanism, "dana", password, topic, str(count)],
        capture_output=True, text=True, timeout=90, env=env, check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mechanism", ["scram-sha-256", "scram-sha-512"])
def test_kafkajs_scram(broker: EmbeddedBroker, certs: Certs, kafkajs: Path, mechanism: str) -> None:
    topic = f"js-{uuid.uuid4().hex[:8]}"
    succeeded = broker.broker.endpoints.counters.succeeded
    before = succeeded[("SASL_SSL", mechanism.upper())]
    out = run_kafkajs(kafkajs, broker, certs, mechanism, "dana-pw", topic)
    assert out["created"] is True
    assert out["sent"] == [0]
    assert out["received"] == [f"v{i}" for i in range(20)]
    assert succeeded[("SASL_SSL", mechanism.upper())] > before  # logins with this mechanism


def test_kafkajs_scram_wrong_password(broker: EmbeddedBroker, certs: Certs, kafkajs: Path) -> None:
    failed = broker.broker.endpoints.counters.failed
    before = failed[("SASL_SSL", "SCRAM-SHA-512")]
    out = run_kafkajs(kafkajs, broker, certs, "scram-sha-512", "wrong", "never")
    assert out["error"] == "KafkaJSSASLAuthenticationError", out
    assert failed[("SASL_SSL", "SCRAM-SHA-512")] > before
