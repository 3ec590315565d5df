"""Sarama 1.22 and kafka-go 0.2.1 (Debian's Go packages) against a real broker.

tests/interop/go/legacyclients.go is built offline in GOPATH mode
(``GO111MODULE=off GOPATH=/usr/share/gocode``, Debian's golang-go,
golang-github-shopify-sarama-dev and golang-github-segmentio-kafka-go-dev; ``make
system-deps`` installs them) once per source hash, into a cache folder under the system's
temporary directory, so later sessions reuse the binary. The program prints ``key=value``
facts; the tests check them, what the broker answered a modern client afterwards, and which
request versions the broker counted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from .old_clients import ConsoleBroker, running_console_broker, wait_for_counts

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SOURCE = Path(__file__).parent / "go" / "legacyclients.go"
GOPATH = Path("/usr/share/gocode")
PACKAGES = {
    "golang-go": None,
    "golang-github-shopify-sarama-dev": GOPATH / "src/github.com/Shopify/sarama",
    "golang-github-segmentio-kafka-go-dev": GOPATH / "src/github.com/segmentio/kafka-go",
}
N = 40


def _build() -> Path:
    """The program's binary, built once per source hash (a lock keeps parallel runs apart)."""
    go = shutil.which("go")
    missing = [name for name, path in PACKAGES.items() if path is not None and not path.is_dir()]
    if go is None or missing:
        pytest.skip(f"Debian packages missing (make system-deps): {missing or ['golang-go']}")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"odradek-go-legacyclients-{digest}"
    binary = cache / "legacyclients"
    if binary.exists():
        return binary
    work = Path(tempfile.mkdtemp(prefix="odradek-go-build-"))
    try:
        src = work / "src" / "legacyclients"
        src.mkdir(parents=True)
        shutil.copy(SOURCE, src / "main.go")
        env = {
            **os.environ,
            "GO111MODULE": "off",
            "GOPATH": f"{GOPATH}:{work}",
            "GOCACHE": str(work / "cache"),
            "GOFLAGS": "",
        }
        out = work / "legacyclients"
        result = subprocess.run(
            [go, "build", "-o", str(out), "."],
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert result.returncode == 0, result.stderr[-4000:]
        cache.mkdir(exist_ok=True)
        os.replace(out, binary)  # atomic: a parallel build wins or loses whole
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


@pytest.fixture(scope="module")
def program() -> Path:
    return _build()


@pytest.fixture(scope="module")
def kafka() -> Iterator[ConsoleBroker]:
    yield from running_console_broker()


def run(program: Path, client: str, kafka: ConsoleBroker, topic: str, group: str) -> list[str]:
    result = subprocess.run(
        [str(program), client, kafka.bootstrap_servers, topic, group, str(N)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (result.stdout, result.stderr[-4000:])
    return result.stdout.split()


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


def test_sarama_default_config(program: Path, kafka: ConsoleBroker) -> None:
    """Sarama's default config (Version 0.8.2): Produce v0, Fetch v0, ListOffsets v0,
    OffsetCommit v1 / OffsetFetch v1 (its offset manager), Metadata v0; its admin's
    CreateTopic sends CreateTopics v0 and ListTopics DescribeConfigs v0."""
    facts = run(program, "sarama", kafka, "sarama-topic", "sarama-group")
    assert "version=0.8.2.0" in facts
    assert f"produced={N}" in facts and "first=0" in facts and f"last={N - 1}" in facts
    assert f"newest={N}" in facts
    assert f"consumed={N}" in facts
    assert f"committed={N}" in facts and "metadata=sarama" in facts
    # ListTopics shows only the non-default configs (DescribeConfigs v0's is_default)
    assert [f for f in facts if f.startswith("retention.ms=")] == ["retention.ms=86400000"]
    assert "partitions=1" in facts
    assert committed(kafka.bootstrap_servers, "sarama-group", "sarama-topic") == N
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "sarama-topic", ["retention.ms"])]
        )
    finally:
        admin.close()
    assert "86400000" in str(described)
    wanted = {
        ("Produce", 0),
        ("Fetch", 0),
        ("ListOffsets", 0),
        ("OffsetCommit", 1),
        ("OffsetFetch", 1),
        ("Metadata", 0),
        ("CreateTopics", 0),
        ("DescribeConfigs", 0),
    }
    wait_for_counts(kafka, lambda counts: all(counts.get(w, 0) > 0 for w in wanted))


def test_kafka_go_0_2_1(program: Path, kafka: ConsoleBroker) -> None:
    """kafka-go 0.2.1: CreateTopics v0, Produce v2 (plain and gzip), Fetch v2 from a partition
    connection, and a consumer group (JoinGroup v1, SyncGroup v0, OffsetCommit v2)."""
    facts = run(program, "kafkago", kafka, "kafka-go-topic", "kafka-go-group")
    assert f"produced={N}" in facts
    assert f"fetched={N}" in facts
    assert f"group_consumed={N}" in facts
    assert committed(kafka.bootstrap_servers, "kafka-go-group", "kafka-go-topic") == N
    wanted = {
        ("CreateTopics", 0),
        ("Produce", 2),
        ("Fetch", 2),
        ("JoinGroup", 1),
        ("SyncGroup", 0),
        ("OffsetCommit", 2),
    }
    wait_for_counts(kafka, lambda counts: all(counts.get(w, 0) > 0 for w in wanted))
