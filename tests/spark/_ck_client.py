"""A stand-in for odradek.client built on confluent-kafka (tests only).

Selected with ODRADEK_SPARK_CLIENT=tests.spark._ck_client... no: with the module path
``_ck_client`` on PYTHONPATH. It implements just the contract the data source uses:
Admin(list_offsets, list_topics, describe_topics, create_topics), Producer(send, flush, close)
and read_range_arrow. Used only while odradek.client is not available.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as CkProducer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark.schema import arrow_schema


class OffsetOutOfRange(Exception):
    code = 1


class Admin:
    def __init__(self, config: dict[str, str]) -> None:
        self.config = dict(config)
        self._admin = AdminClient({"bootstrap.servers": config["bootstrap.servers"]})
        self._consumer = Consumer(
            {
                "bootstrap.servers": config["bootstrap.servers"],
                "group.id": "odradek-shim",
                "enable.auto.commit": False,
            }
        )

    def list_topics(self) -> list[str]:
        return list(self._admin.list_topics(timeout=10).topics)

    def describe_topics(self, names: list[str]) -> dict[str, int]:
        md = self._admin.list_topics(timeout=10).topics
        return {n: len(md[n].partitions) for n in names if n in md}

    def create_topics(self, topics: Any) -> None:
        items = topics.items() if isinstance(topics, dict) else topics
        futs = self._admin.create_topics([NewTopic(n, p, 1) for n, p in items])
        for f in futs.values():
            f.result()

    def list_offsets(
        self, queries: dict[tuple[str, int], Any]
    ) -> dict[tuple[str, int], tuple[int, int]]:
        out = {}
        for (t, p), q in queries.items():
            lo, hi = self._consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
            if q == "earliest":
                out[(t, p)] = (lo, -1)
            elif q == "latest":
                out[(t, p)] = (hi, -1)
            else:
                r = self._consumer.offsets_for_times([TopicPartition(t, p, int(q))], timeout=10)
                out[(t, p)] = (r[0].offset, -1)
        return out

    def close(self) -> None:
        self._consumer.close()


class Producer:
    def __init__(self, config: dict[str, str]) -> None:
        self._p = CkProducer({**config, "linger.ms": 5})

    def send(self, topic, value, key=None, headers=None, partition=None, timestamp=None):
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def cb(err, msg):
            if err is not None:
                fut.set_exception(KafkaException(err))
            else:
                fut.set_result((msg.topic(), msg.partition(), msg.offset()))

        kw: dict[str, Any] = {"on_delivery": cb}
        if partition is not None:
            kw["partition"] = partition
        if timestamp is not None:
            kw["timestamp"] = timestamp
        while True:
            try:
                self._p.produce(topic, value, key, headers=headers, **kw)
                break
            except BufferError:
                self._p.poll(0.05)
        self._p.poll(0)
        return fut

    def flush(self) -> None:
        self._p.flush(30)

    def close(self) -> None:
        self._p.flush(30)


def read_range_arrow(
    config,
    topic,
    partition,
    start_offset,
    end_offset,
    *,
    include_headers=False,
    max_rows_per_batch=100_000,
) -> Iterator[pa.RecordBatch]:
    c = Consumer(
        {
            "bootstrap.servers": config["bootstrap.servers"],
            "group.id": "odradek-shim",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "fetch.queue.backoff.ms": 10,
        }
    )
    schema = arrow_schema(include_headers)
    try:
        c.assign([TopicPartition(topic, partition, start_offset)])
        rows: list[Any] = []
        pos = start_offset
        while pos < end_offset:
            for m in c.consume(10000, timeout=1.0):
                if m.error():
                    if (
                        m.error().code() == KafkaError._AUTO_OFFSET_RESET
                        or "out of range" in str(m.error()).lower()
                    ):
                        raise OffsetOutOfRange(str(m.error()))
                    raise KafkaException(m.error())
                if m.offset() >= end_offset:
                    pos = end_offset
                    break
                pos = m.offset() + 1
                ttype, ts = m.timestamp()
                rows.append(
                    (
                        m.key(),
                        m.value(),
                        m.offset(),
                        ts * 1000,
                        1 if ttype == 2 else 0,
                        [{"key": k, "value": v} for k, v in (m.headers() or [])],
                    )
                )
                if len(rows) >= max_rows_per_batch:
                    yield _batch(rows, topic, partition, schema, include_headers)
                    rows = []
        if rows:
            yield _batch(rows, topic, partition, schema, include_headers)
    finally:
        c.close()


def _batch(rows, topic, partition, schema, include_headers):
    cols = [
        pa.array([r[0] for r in rows], pa.binary()),
        pa.array([r[1] for r in rows], pa.binary()),
        pa.array([topic] * len(rows), pa.string()),
        pa.array([partition] * len(rows), pa.int32()),
        pa.array([r[2] for r in rows], pa.int64()),
        pa.array([r[3] for r in rows], pa.timestamp("us", tz="UTC")),
        pa.array([r[4] for r in rows], pa.int32()),
    ]
    if include_headers:
        cols.append(pa.array([r[5] for r in rows], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)
