"""The sink's write path (``produce_batches``: one ``Producer.send_batch`` per Arrow batch and
target topic) without a SparkSession, against a broker process; read back with odradek.client."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

from odradek.client import Consumer, TopicPartition
from odradek.spark.options import SinkOptions
from odradek.spark.sink import produce_batches
from odradek.testing.helpers import create_topic

pytestmark = pytest.mark.timeout(60)

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


@pytest.fixture(scope="module")
def bs(broker: Any) -> str:
    return str(broker.bootstrap_servers)


def _read(bs: str, topic: str, partitions: int, n: int) -> list[Any]:
    got: list[Any] = []
    with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        for _ in range(100):
            if len(got) >= n:
                break
            got += c.poll(0.5)
    return got


def test_columns_keys_partitions_headers_and_topic_column(bs: str) -> None:
    t1, t2 = f"sb-{uuid.uuid4().hex[:6]}", f"sb-{uuid.uuid4().hex[:6]}"
    create_topic(bs, t1, 3)
    create_topic(bs, t2, 2)
    n = 600
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": pa.array([t1 if i % 3 else t2 for i in range(n)], pa.string()),
            "key": pa.array([None if i % 5 == 0 else f"k{i % 11}" for i in range(n)], pa.string()),
            "value": pa.array([f"v{i}" for i in range(n)], pa.string()),
            "partition": pa.array([i % 2 if i % 4 == 0 else None for i in range(n)], pa.int32()),
            "headers": pa.array(
                [[{"key": "i", "value": b"%d" % i}] if i % 2 else [] for i in range(n)], HEADERS
            ),
        }
    )
    opts = SinkOptions(client_config=(("bootstrap.servers", bs),), topic=None, include_headers=True)
    counts, _ = produce_batches(opts, [batch.slice(0, 250), batch.slice(250)])
    assert counts == {t1: 400, t2: 200}
    got = _read(bs, t1, 3, 400) + _read(bs, t2, 2, 200)
    assert len(got) == n
    from odradek.client._records import murmur2_partition

    for r in got:
        i = int(r.value.decode()[1:])
        assert r.topic == (t1 if i % 3 else t2)
        assert r.key == (None if i % 5 == 0 else f"k{i % 11}".encode())
        if i % 4 == 0:
            assert r.partition == i % 2
        elif r.key is not None:
            assert r.partition == murmur2_partition(r.key, 3 if i % 3 else 2)
        assert list(r.headers or []) == ([("i", b"%d" % i)] if i % 2 else [])


def test_null_topic_without_topic_option_fails(bs: str) -> None:
    batch = pa.RecordBatch.from_pydict(
        {"topic": pa.array([None], pa.string()), "value": pa.array([b"x"])}
    )
    opts = SinkOptions(client_config=(("bootstrap.servers", bs),))
    with pytest.raises(ValueError, match="null 'topic'"):
        produce_batches(opts, [batch])
