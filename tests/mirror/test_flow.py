"""`odradek mirror` between two real brokers: records, topics, configs, internal topics.

The internal topics are decoded here with struct layouts written from Kafka's OffsetSync and
Heartbeat classes (KIP-382), not with odradek.mirror's codec."""

from __future__ import annotations

import itertools
import re
import struct
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

from odradek.client import Admin, NewTopic, Producer
from odradek.testing.process import BrokerProcess

from .conftest import MirrorProcess, base_properties, end_offsets, read_topic, wait_until


def _mm2_string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def _produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(start, start + n):
            p.send(topic, b"value-%d" % i, key=b"key-%d" % (i % 97), headers=[("seq", b"%d" % i), ("empty", None)],
                   timestamp=1_700_000_000_000 + i)
        p.flush()


def test_records_topics_configs_and_internal_topics(clusters: tuple[BrokerProcess, BrokerProcess],
                                                     mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("flow.orders", 3, 1, {"retention.ms": "86400000", "min.insync.replicas": "1"}),
                             NewTopic("B.flow.back", 1, 1)])
    _produce(a.bootstrap_servers, "flow.orders", 3000)
    _produce(a.bootstrap_servers, "B.flow.back", 10)
    m = mirrors(base_properties(a, b, **{
        "A->B.topics": r"flow\..*, B\.flow\..*", "refresh.topics.interval.seconds": 1,
        "sync.topic.configs.interval.seconds": 1, "offset.lag.max": 50}))
    m.start("--metrics", "127.0.0.1:0")
    wait_until(lambda: sum(end_offsets(b.bootstrap_servers, "A.flow.orders").values()) >= 3000, 40, "3000 records on B", m.log)

    # records: key, value, headers, timestamp, partition, per-partition order
    src = read_topic(a.bootstrap_servers, "flow.orders")
    dst = read_topic(b.bootstrap_servers, "A.flow.orders")
    assert sorted(dst) == [0, 1, 2]
    for p in src:
        assert [(r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in dst[p]] == \
               [(r.key, r.value, r.headers, r.timestamp, r.timestamp_type) for r in src[p]]
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        topics = admin.list_topics()
        assert "A.B.flow.back" not in topics  # came from B: a cycle
        cfg = admin.describe_configs(["A.flow.orders"])["A.flow.orders"]
        assert cfg["retention.ms"].value == "86400000"
        assert cfg["min.insync.replicas"].is_default  # excluded by config.properties.exclude

    # offset syncs on A, decoded as Kafka's OffsetSync: key {topic STRING, partition INT32},
    # value {upstreamOffset INT64, offset INT64}; each pairs the same record on both sides
    def read_syncs() -> dict[int, list[tuple[int, int]]]:
        seen: dict[int, list[tuple[int, int]]] = {}
        for r in read_topic(a.bootstrap_servers, "mm2-offset-syncs.B.internal")[0]:
            assert r.key is not None and r.value is not None
            topic, pos = _mm2_string(r.key, 0)
            (partition,) = struct.unpack_from(">i", r.key, pos)
            assert pos + 4 == len(r.key) and len(r.value) == 16
            upstream, downstream = struct.unpack(">qq", r.value)
            assert topic in ("flow.orders", "B.flow.back")
            if topic == "flow.orders":
                seen.setdefault(partition, []).append((upstream, downstream))
        return seen

    # the last record's pair is emitted (delayed) within a second: translation at the end is exact
    seen = wait_until(lambda: (s := read_syncs()) and all(s.get(p, [(0, 0)])[-1] == (len(src[p]) - 1, len(dst[p]) - 1)
                                                         for p in src) and s, 10, "the final offset syncs", m.log)
    for p, pairs in seen.items():
        assert pairs[0] == (0, 0)
        for upstream, downstream in pairs:
            assert src[p][upstream].value == dst[p][downstream].value
        downs = [d for _u, d in pairs]
        assert all(y - x <= 51 for x, y in itertools.pairwise(downs)), p  # offset.lag.max

    # heartbeats on B, decoded as Kafka's Heartbeat: key {sourceClusterAlias, targetClusterAlias},
    # value {version INT16 = 0, timestamp INT64}
    hb = wait_until(lambda: read_topic(b.bootstrap_servers, "heartbeats")[0], 10, "heartbeats", m.log)
    assert hb[0].key is not None and hb[0].value is not None
    s, pos = _mm2_string(hb[0].key, 0)
    t, pos = _mm2_string(hb[0].key, pos)
    version, ts = struct.unpack(">hq", hb[0].value)
    assert (s, t, version) == ("A", "B", 0) and ts > 1_700_000_000_000

    # a new topic, a new partition and a config change are followed (refresh 1 s)
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("flow.late", 2, 1)])
        admin.create_partitions({"flow.orders": 4})
        admin.alter_configs({"flow.orders": {"retention.ms": "3600000"}})
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        p.send("flow.orders", b"in-new-partition", partition=3)
        p.send("flow.late", b"late", partition=1)
        p.flush()
    wait_until(lambda: end_offsets(b.bootstrap_servers, "A.flow.orders").get(3) == 1, 20, "partition 3 on B", m.log)
    wait_until(lambda: end_offsets(b.bootstrap_servers, "A.flow.late").get(1) == 1, 20, "flow.late on B", m.log)

    def retention() -> bool:
        with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
            return admin.describe_configs(["A.flow.orders"])["A.flow.orders"]["retention.ms"].value == "3600000"

    wait_until(retention, 20, "the config change on B", m.log)
    assert read_topic(b.bootstrap_servers, "A.flow.orders")[3][0].value == b"in-new-partition"

    # a topic deleted on the source: no longer copied, the others go on
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.delete_topics(["flow.late"])
    wait_until(lambda: "topic flow.late was deleted on A" in m.log(), 20, "the deletion noticed", m.log)
    before = end_offsets(b.bootstrap_servers, "A.flow.orders")[0]
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        p.send("flow.orders", b"after-the-deletion", partition=0).result(10)
    wait_until(lambda: end_offsets(b.bootstrap_servers, "A.flow.orders")[0] == before + 1, 20, "a record after the deletion", m.log)
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        assert "A.flow.late" in admin.list_topics()  # the remote topic is kept
    dst = read_topic(b.bootstrap_servers, "A.flow.orders")

    # MM2's metric names on /metrics
    url = re.search(r"metrics on (http://\S+/metrics)", m.log())
    assert url is not None
    text = urllib.request.urlopen(url.group(1), timeout=10).read().decode()
    for p in (0, 1, 2):
        assert f'kafka_connect_mirror_mirrorsourceconnector_record_count{{partition="{p}",target="B",topic="A.flow.orders"}} {len(dst[p])}.0' in text
    for name in ("byte_count", "record_age_ms", "record_age_ms_avg", "record_age_ms_min", "record_age_ms_max",
                 "replication_latency_ms", "replication_latency_ms_avg", "replication_latency_ms_max"):
        assert f"kafka_connect_mirror_mirrorsourceconnector_{name}{{" in text, name

    assert m.terminate() == 0
    log = m.log()
    assert "flow A->B:" in log and "records/s" in log and "mirror: stopped" in log


def test_unreachable_cluster_is_named_and_retried(clusters: tuple[BrokerProcess, BrokerProcess],
                                                  mirrors: Callable[..., MirrorProcess]) -> None:
    import socket

    _a, b = clusters
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    text = base_properties(_a, b).replace(f"A.bootstrap.servers = {_a.bootstrap_servers}", f"A.bootstrap.servers = {dead}")
    m = mirrors(text).start()
    wait_until(lambda: m.log().count(f"cluster A ({dead}) unreachable") >= 2, 30, "two attempts naming cluster A", m.log)
    line = next(ln for ln in m.log().splitlines() if "unreachable" in ln)
    assert "retrying in" in line
    assert m.terminate() == 0


def test_malformed_file_fails_at_start_naming_key_and_line(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\nA->B.enabled = yes please\n")
    r = subprocess.run([sys.executable, "-m", "odradek", "mirror", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert f"{path}:4: A->B.enabled: invalid value 'yes please'" in r.stderr


def test_both_directions_in_one_process_without_cycles(clusters: tuple[BrokerProcess, BrokerProcess],
                                                       mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("bi.a", 1, 1)])
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("bi.b", 1, 1)])
    _produce(a.bootstrap_servers, "bi.a", 10)
    _produce(b.bootstrap_servers, "bi.b", 10)
    text = base_properties(a, b, **{"B->A.enabled": "true", "topics": r"bi\..*, A\.bi\..*, B\.bi\..*",
                                    "refresh.topics.interval.seconds": 1})
    m = mirrors(text).start()
    wait_until(lambda: sum(end_offsets(b.bootstrap_servers, "A.bi.a").values()) == 10, 30, "A.bi.a on B", m.log)
    wait_until(lambda: sum(end_offsets(a.bootstrap_servers, "B.bi.b").values()) == 10, 30, "B.bi.b on A", m.log)
    # B's heartbeats (written by A->B) come back to A as B.heartbeats, and no further
    wait_until(lambda: sum(end_offsets(a.bootstrap_servers, "B.heartbeats").values()) > 0, 30, "B.heartbeats on A", m.log)
    # two more topic refreshes: the remote topics are never mirrored back
    n = m.log().count("flow A->B:")
    wait_until(lambda: m.log().count("flow A->B:") >= n + 3, 20, "more progress", m.log)
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        on_a = set(admin.list_topics())
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        on_b = set(admin.list_topics())
    assert not {"A.B.bi.b", "A.B.heartbeats"} & on_b and not {"B.A.bi.a", "B.A.heartbeats"} & on_a
    assert m.terminate() == 0
