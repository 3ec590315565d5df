"""Fixtures for the Spark tests: one broker and one SparkSession per test module.

The broker runs with a short retention check interval so that the failOnDataLoss tests can
watch retention delete segments. Test data is produced with confluent-kafka (a third-party
client, so that the data source is checked against records it did not write itself).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

BROKER_SETTINGS = {
    "log.retention.check.interval.ms": 200,
    "num.partitions": 1,
}


@pytest.fixture(scope="module")
def spark_broker(broker: Any) -> Any:
    """The shared module-scoped ``broker`` (a real broker process, tests/conftest.py); test
    modules import ``BROKER_SETTINGS`` from here (short retention check interval)."""
    return broker


@pytest.fixture(scope="session")
def faults_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fault-injection directory (ODRADEK_SPARK_FAULTS): one per pytest session, because the
    JVM and its Python workers outlive a SparkSession and keep the environment they began with."""
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def spark(faults_dir: Path) -> Iterator[Any]:
    """One local[2] session per module; executors see ODRADEK_SPARK_FAULTS set before start."""
    os.environ["ODRADEK_SPARK_FAULTS"] = str(faults_dir)
    from odradek.spark.session import local_session

    session = local_session(app_name="odradek-tests")
    try:
        yield session
    finally:
        session.stop()


Rec = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]] | None, int | None]
"""(partition, key, value, headers, timestamp ms)."""


def produce(bs: str, topic: str, records: Iterable[Rec], **config: Any) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True, **config})
    errors: list[Any] = []
    n = 0
    for partition, key, value, headers, ts in records:
        kw: dict[str, Any] = {}
        if ts is not None:
            kw["timestamp"] = ts
        while True:
            try:
                p.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    headers=headers,
                    on_delivery=lambda err, _m: errors.append(err) if err else None,
                    **kw,
                )
                break
            except BufferError:
                p.poll(0.05)
        n += 1
    assert p.flush(30) == 0
    assert not errors, errors
    return n


def latest_offsets(bs: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "probe", "enable.auto.commit": False})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(partitions)
        }
    finally:
        c.close()
