"""Audit: producers count what they send per (topic, time window); a Spark job counts what
arrived and compares.

Audit record (one per producer host, topic and window, on the audit topic, default
``odradek-audit``): key = ``"<topic>|<window_start_ms>|<producer_host>"`` (UTF-8), value = JSON::

    {"topic": "page-views", "window_start_ms": 1700000040000, "window_ms": 60000,
     "producer_host": "web-7", "count": 1234}

A window is ``[window_start_ms, window_start_ms + window_ms)`` of the records' timestamps
(create time, which the producer sets explicitly so that its count and the record agree).
Several audit records for the same (topic, window) — several hosts, or one host publishing
a window in pieces — add up.

``AuditingProducer`` wraps any producer with ``send(topic, value, key=None, headers=None,
partition=None, timestamp=None)`` and ``flush()`` (odradek.client.Producer): it stamps each
record's timestamp and an ``odradek.audit.host`` header, counts per (topic, window) and
publishes the counts of closed windows (``publish()``; everything on ``close()``).

``run_audit`` (Spark, batch) returns one row per (topic, window_start_ms):
``expected`` (sum of audit counts), ``actual`` (records present), ``status``:
``complete`` (equal), ``missing`` (fewer arrived), ``extra`` (more arrived) or
``unaudited`` (records but no audit record: the producer did not publish that window yet).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from odradek.pipelines._streaming import with_client_options

__all__ = [
    "AUDIT_HEADER",
    "DEFAULT_AUDIT_TOPIC",
    "AuditRecord",
    "AuditingProducer",
    "audit_rows",
    "run_audit",
]

DEFAULT_AUDIT_TOPIC = "odradek-audit"
AUDIT_HEADER = "odradek.audit.host"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    topic: str
    window_start_ms: int
    window_ms: int
    producer_host: str
    count: int

    def key(self) -> bytes:
        return f"{self.topic}|{self.window_start_ms}|{self.producer_host}".encode()

    def value(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_value(cls, raw: bytes | str) -> AuditRecord:
        d = json.loads(raw)
        return cls(
            str(d["topic"]),
            int(d["window_start_ms"]),
            int(d["window_ms"]),
            str(d["producer_host"]),
            int(d["count"]),
        )


class AuditingProducer:
    """Counts what it sends per (topic, window) and publishes the counts to the audit topic.

    Not a Spark component: it runs in producer processes. Thread-safe.
    """

    def __init__(
        self,
        producer: Any,
        *,
        audit_topic: str = DEFAULT_AUDIT_TOPIC,
        window_ms: int = 60_000,
        producer_host: str | None = None,
        now_ms: Callable[[], int] | None = None,
        audit_producer: Any | None = None,
    ) -> None:
        self.producer = producer
        self.audit_producer = audit_producer if audit_producer is not None else producer
        self.audit_topic = audit_topic
        self.window_ms = window_ms
        self.producer_host = producer_host or socket.gethostname()
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._counts: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()

    def window_of(self, timestamp_ms: int) -> int:
        return timestamp_ms - timestamp_ms % self.window_ms

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> Any:
        ts = self._now_ms() if timestamp is None else int(timestamp)
        hdrs = [*(headers or ()), (AUDIT_HEADER, self.producer_host.encode())]
        fut = self.producer.send(
            topic, value, key=key, headers=hdrs, partition=partition, timestamp=ts
        )
        with self._lock:
            self._counts[(topic, self.window_of(ts))] += 1
        return fut

    def pending(self) -> dict[tuple[str, int], int]:
        with self._lock:
            return dict(self._counts)

    def publish(self, *, everything: bool = False) -> list[AuditRecord]:
        """Publish counts of windows that have ended (all windows with ``everything``)."""
        now = self._now_ms()
        with self._lock:
            ready = [
                (tw, n)
                for tw, n in self._counts.items()
                if everything or tw[1] + self.window_ms <= now
            ]
            for tw, _ in ready:
                del self._counts[tw]
        records = [AuditRecord(t, w, self.window_ms, self.producer_host, n) for (t, w), n in ready]
        for r in records:
            self.audit_producer.send(self.audit_topic, r.value(), key=r.key(), timestamp=now)
        if records:
            self.audit_producer.flush()
        return records

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.flush()
        self.publish(everything=True)
        for p in {
            id(self.producer): self.producer,
            id(self.audit_producer): self.audit_producer,
        }.values():
            if hasattr(p, "close"):
                p.close()


def run_audit(
    spark: Any,
    *,
    bootstrap_servers: str,
    topics: Iterable[str],
    audit_topic: str = DEFAULT_AUDIT_TOPIC,
    window_ms: int = 60_000,
    client_options: dict[str, str] | None = None,
) -> Any:
    """Batch job: per (topic, window) expected vs actual counts (DataFrame, sorted)."""
    # lazy: pyspark is optional and slow to import
    from pyspark.sql import functions as F

    topics = sorted(set(topics))

    def read(subscribe: str) -> Any:
        r = (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", subscribe)
        )
        return with_client_options(r, client_options).load()

    ms = F.unix_millis(F.col("timestamp"))
    actual = (
        read(",".join(topics))
        .select("topic", (ms - F.pmod(ms, F.lit(window_ms))).alias("window_start_ms"))
        .groupBy("topic", "window_start_ms")
        .agg(F.count(F.lit(1)).alias("actual"))
    )
    schema = "topic string, window_start_ms long, window_ms long, producer_host string, count long"
    audit = (
        read(audit_topic)
        .select(F.from_json(F.col("value").cast("string"), schema).alias("a"))
        .select("a.*")
        .where(F.col("topic").isin(topics) & (F.col("window_ms") == window_ms))
        .groupBy("topic", "window_start_ms")
        .agg(F.sum("count").alias("expected"), F.collect_set("producer_host").alias("hosts"))
    )
    joined = actual.join(audit, ["topic", "window_start_ms"], "full_outer").select(
        "topic",
        "window_start_ms",
        F.coalesce("expected", F.lit(None).cast("long")).alias("expected"),
        F.coalesce("actual", F.lit(0)).cast("long").alias("actual"),
        "hosts",
    )
    status = (
        F.when(F.col("expected").isNull(), "unaudited")
        .when(F.col("expected") == F.col("actual"), "complete")
        .when(F.col("actual") < F.col("expected"), "missing")
        .otherwise("extra")
    )
    return joined.withColumn("status", status).orderBy("topic", "window_start_ms")


def audit_rows(report: Any) -> list[dict[str, Any]]:
    """Collect an audit report into plain dicts."""
    return [r.asDict() for r in report.collect()]
