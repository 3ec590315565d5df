"""kcat (Debian's, librdkafka 2.0) against a real broker process, as a subprocess.

Produce: ``-P -K<TAB>`` (key delimiter), ``-H k=v`` (the same headers on every record of a run),
``-X compression.codec=...``. Consume: ``-C -J -e`` (JSON envelope per record, exit at the end),
``-o`` offsets, ``-p`` partition. Query: ``-Q -t topic:partition:timestamp``. kcat cannot set
record timestamps, so records kcat produces are checked against the wall-clock window of the run;
exact timestamps are checked on records produced by confluent-kafka and read by kcat.
"""

from __future__ import annotations

import json
import random
import re
import string
import subprocess
import time
from collections.abc import Sequence

import pytest

from odradek.testing.helpers import create_topic

from .conftest import Target
from .support import (
    CODECS,
    Consumed,
    Rec,
    assert_exactly,
    librdkafka_partition,
    recent_ms,
    unique_topic,
)
from .test_confluent_kafka import produce as ck_produce

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

PARTITIONS = 4
HEADERS = (("app", b"kcat"), ("empty", b""), ("app", b"again"))


def run_kcat(
    kcat: str, args: Sequence[str], stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [kcat, *args],
        input=stdin,
        capture_output=True,
        timeout=30,
        check=False,
    )


def kcat_produce(
    kcat: str,
    bootstrap: str,
    topic: str,
    lines: Sequence[tuple[str, str]],
    *extra: str,
    headers: Sequence[tuple[str, bytes]] = HEADERS,
) -> subprocess.CompletedProcess[bytes]:
    args = ["-b", bootstrap, "-P", "-t", topic, "-K", "\t", *extra]
    for k, v in headers:
        args += ["-H", f"{k}={v.decode()}"]
    data = "".join(f"{k}\t{v}\n" for k, v in lines).encode()
    return run_kcat(kcat, args, data)


def kcat_consume(kcat: str, bootstrap: str, topic: str, *extra: str) -> list[Consumed]:
    p = run_kcat(kcat, ["-b", bootstrap, "-C", "-t", topic, "-e", "-J", "-q", *extra])
    assert p.returncode == 0, p.stderr.decode()
    out: list[Consumed] = []
    for line in p.stdout.decode().splitlines():
        m = json.loads(line)
        h = m.get("headers") or []
        headers = tuple((h[i], h[i + 1].encode()) for i in range(0, len(h), 2))
        assert m["tstype"] == "create", m
        key = None if m["key"] is None else m["key"].encode()
        value = None if m["payload"] is None else m["payload"].encode()
        out.append(Consumed(m["partition"], m["offset"], key, value, headers, m["ts"], 0))
    return out


def kcat_query(kcat: str, bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    p = run_kcat(kcat, ["-b", bootstrap, "-Q", "-t", f"{topic}:{partition}:{timestamp}"])
    assert p.returncode == 0, p.stderr.decode()
    m = re.search(rf"{re.escape(topic)} \[{partition}\] offset (-?\d+)", p.stdout.decode())
    assert m, p.stdout.decode()
    return int(m.group(1))


def lines_for(n: int, tag: str, keys: int = 40) -> list[tuple[str, str]]:
    return [(f"key-{i % keys:03d}", f"{tag}-{i:06d}-{'v' * (i % 50)}") for i in range(n)]


def check_kcat_produced(
    lines: Sequence[tuple[str, str]], got: list[Consumed], t0: int, t1: int
) -> None:
    """kcat's records back exactly; their CreateTime within the produce run and non-decreasing
    per partition; keys placed by librdkafka's consistent_random partitioner."""
    ts_of = {c.value: c.timestamp for c in got}
    for c in got:
        assert t0 <= c.timestamp <= t1, (c, t0, t1)
    for p in range(PARTITIONS):
        ts = [c.timestamp for c in sorted(got, key=lambda c: c.offset) if c.partition == p]
        assert ts == sorted(ts), f"partition {p}: timestamps go backwards"
    expected = [Rec(k.encode(), v.encode(), HEADERS, ts_of.get(v.encode(), -1)) for k, v in lines]
    assert_exactly(expected, got, partitions=PARTITIONS, partition_of=librdkafka_partition)


@pytest.fixture(autouse=True)
def _kcat_target(kafka: Target) -> None:
    kafka.require("kcat")


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_keyed_records_with_headers(kafka: Target, kcat: str, codec: str) -> None:
    topic = unique_topic(f"kc-{codec}")
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    lines = lines_for(1000, f"kc-{codec}")
    t0 = int(time.time() * 1000) - 1
    p = kcat_produce(
        kcat, kafka.bootstrap_servers, topic, lines, "-X", f"compression.codec={codec}"
    )
    t1 = int(time.time() * 1000) + 1
    assert p.returncode == 0, p.stderr.decode()
    got = kcat_consume(kcat, kafka.bootstrap_servers, topic, "-o", "beginning")
    check_kcat_produced(lines, got, t0, t1)
    # -o <offset> -p <partition>: the tail of one partition from a given offset.
    part0 = sorted((c for c in got if c.partition == 0), key=lambda c: c.offset)
    assert len(part0) > 10
    tail = kcat_consume(kcat, kafka.bootstrap_servers, topic, "-p", "0", "-o", "7")
    assert tail == part0[7:]
    # -o -N: the last N records of each partition.
    last = kcat_consume(kcat, kafka.bootstrap_servers, topic, "-p", "0", "-o", "-3")
    assert last == part0[-3:]


def test_reads_exact_records_produced_by_another_client(kafka: Target, kcat: str) -> None:
    topic = unique_topic("kc-cross")
    create_topic(kafka.bootstrap_servers, topic, 3)
    base = recent_ms()
    records = [
        Rec(
            f"k{i % 17}".encode(),
            f"value-{i}".encode(),
            (("seq", str(i).encode()), ("tag", b"x" * (i % 4))),
            base + 7 * i,
        )
        for i in range(600)
    ]
    ck_produce(kafka.bootstrap_servers, topic, records, **{"compression.type": "snappy"})
    got = kcat_consume(kcat, kafka.bootstrap_servers, topic, "-o", "beginning")
    assert_exactly(records, got, partitions=3, partition_of=librdkafka_partition)


def test_query_offsets(kafka: Target, kcat: str) -> None:
    kafka.require("latest_offset")
    topic = unique_topic("kc-query")
    create_topic(kafka.bootstrap_servers, topic, 2)
    base = recent_ms()
    records = [Rec(b"k", f"v{i}".encode(), (), base + 10 * i) for i in range(400)]
    ck_produce(kafka.bootstrap_servers, topic, records, partition_of=lambda i: i % 2)
    for p in (0, 1):
        ts = [r.timestamp for r in records[p::2]]
        assert kcat_query(kcat, kafka.bootstrap_servers, topic, p, -2) == 0  # earliest
        assert kcat_query(kcat, kafka.bootstrap_servers, topic, p, -1) == 200  # latest
        for k in (0, 1, 99, 199):
            assert kcat_query(kcat, kafka.bootstrap_servers, topic, p, ts[k]) == k
            assert kcat_query(kcat, kafka.bootstrap_servers, topic, p, ts[k] - 3) == k
        assert kcat_query(kcat, kafka.bootstrap_servers, topic, p, ts[-1] + 1) == -1


def test_restart_keeps_everything(kafka: Target, kcat: str) -> None:
    kafka.require("restart")
    topic = unique_topic("kc-restart")
    create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
    lines = lines_for(800, "kc-restart")
    t0 = int(time.time() * 1000) - 1
    p = kcat_produce(kcat, kafka.bootstrap_servers, topic, lines, "-X", "compression.codec=gzip")
    t1 = int(time.time() * 1000) + 1
    assert p.returncode == 0, p.stderr.decode()
    kafka.restart()
    got = kcat_consume(kcat, kafka.bootstrap_servers, topic, "-o", "beginning")
    check_kcat_produced(lines, got, t0, t1)
    for part in range(PARTITIONS):
        n = sum(1 for c in got if c.partition == part)
        assert kcat_query(kcat, kafka.bootstrap_servers, topic, part, -1) == n


def test_message_too_large_then_still_usable(kafka: Target, kcat: str) -> None:
    kafka.require("message_max_bytes")
    topic = unique_topic("kc-large")
    create_topic(kafka.bootstrap_servers, topic, 1)
    big = "".join(random.choices(string.ascii_letters, k=1_100_000))
    small = [(f"s{i}", f"small-{i}") for i in range(5)]
    # The client's own limit is raised so that the broker (message.max.bytes = 1048588) decides;
    # linger.ms=0 and batch.size keep the big record in a request of its own.
    p = kcat_produce(
        kcat,
        kafka.bootstrap_servers,
        topic,
        [("big", big), *small],
        "-p",
        "0",
        "-X",
        "message.max.bytes=5000000",
        "-X",
        "linger.ms=0",
    )
    assert b"Message size too large" in p.stderr, p.stderr.decode()[-2000:]
    # The same kcat run delivered the small records, and a second run still can.
    more = [(f"m{i}", f"more-{i}") for i in range(3)]
    p2 = kcat_produce(kcat, kafka.bootstrap_servers, topic, more, "-p", "0")
    assert p2.returncode == 0, p2.stderr.decode()
    got = kcat_consume(kcat, kafka.bootstrap_servers, topic, "-o", "beginning")
    assert [(c.offset, c.key, c.value) for c in got] == [
        (i, k.encode(), v.encode()) for i, (k, v) in enumerate([*small, *more])
    ]
