"""/metrics, /health and /api of a real broker process against known states."""

from __future__ import annotations

import time
import urllib.parse

import pytest
from prometheus_client.parser import text_string_to_metric_families

from odradek.client import Admin, Producer, TopicPartition

from .harness import ConsoleBroker

pytestmark = pytest.mark.timeout(90)

TOPIC = "metrics-topic"
GROUP = "metrics-group"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def sample(all_: dict, name: str, **labels: str) -> float | None:
    return all_.get((name, tuple(sorted(labels.items()))))


def wait_metrics(cb: ConsoleBroker, ok, timeout: float = 20.0) -> dict:
    """Scrape until ``ok(samples)`` holds (the console caches a snapshot for up to 1 s)."""
    deadline = time.monotonic() + timeout
    last: dict = {}
    while time.monotonic() < deadline:
        status, text = cb.get("/metrics")
        assert status == 200
        last = samples(text)
        if ok(last):
            return last
        time.sleep(0.2)
    raise AssertionError(f"metrics never matched; last: {sorted(k for k in last if 'consumergroup' in k[0])}")


@pytest.fixture(scope="module")
def lagging(console_broker: ConsoleBroker) -> ConsoleBroker:
    """100 records in TOPIC (one partition), GROUP committed at 40: lag 60."""
    conf = {"bootstrap.servers": console_broker.bootstrap_servers}
    with Admin(conf) as admin:
        admin.create_topics([TOPIC])
    with Producer(conf) as producer:
        for i in range(100):
            producer.send(TOPIC, b'{"n": %d}' % i, key=b"key-%d" % i, headers=[("h", b"v")])
        producer.flush()
    with Admin(conf) as admin:
        admin.alter_group_offsets(GROUP, {TopicPartition(TOPIC, 0): 40})
    return console_broker


def test_health(console_broker: ConsoleBroker) -> None:
    assert console_broker.get("/health") == (200, "ready\n")


def test_lag_and_offsets(lagging: ConsoleBroker) -> None:
    m = wait_metrics(
        lagging,
        lambda s: sample(s, "kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC, partition="0")
        is not None,
    )
    g = {"consumergroup": GROUP, "topic": TOPIC, "partition": "0"}
    tp = {"topic": TOPIC, "partition": "0"}
    assert sample(m, "kafka_consumergroup_lag", **g) == 60
    assert sample(m, "kafka_consumergroup_current_offset", **g) == 40
    assert sample(m, "kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == 60
    assert sample(m, "kafka_consumergroup_members", consumergroup=GROUP) == 0
    lag_s = sample(m, "kafka_consumergroup_lag_seconds", **g)
    assert lag_s is not None and 0 <= lag_s < 120
    assert sample(m, "kafka_brokers") == 1
    assert sample(m, "kafka_topic_partitions", topic=TOPIC) == 1
    assert sample(m, "kafka_topic_partition_current_offset", **tp) == 100
    assert sample(m, "kafka_topic_partition_oldest_offset", **tp) == 0
    assert sample(m, "kafka_topic_partition_in_sync_replica", **tp) == 1
    assert sample(m, "kafka_topic_partition_under_replicated_partition", **tp) == 0
    # broker internals, read from the broker's state at scrape time
    assert sample(m, "kafka_log_log_logendoffset", **tp) == 100
    assert sample(m, "kafka_server_replicamanager_isrshrinks_total") == 0  # alone: no followers
    assert sample(m, "kafka_server_replicamanager_isrexpands_total") == 0
    size = sample(m, "kafka_log_log_size", **tp)
    assert size is not None and size > 100 * 10
    assert sample(m, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 100
    produce = sample(m, "kafka_network_requestmetrics_requests_total", request="Produce", version="9")
    produce = produce or sum(
        v for (name, labels), v in m.items()
        if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels
    )
    assert produce >= 1
    count = sample(m, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce")
    assert count is not None and count >= 1
    assert sample(m, "kafka_server_socketserver_connections") is not None
    assert sample(m, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedoperation="Fetch") is not None
    assert sample(m, "odradek_event_loop_lag_max_seconds") is not None


def test_caught_up_group_has_zero_lag_seconds(lagging: ConsoleBroker) -> None:
    with Admin({"bootstrap.servers": lagging.bootstrap_servers}) as admin:
        admin.alter_group_offsets("caught-up", {TopicPartition(TOPIC, 0): 100})
    g = {"consumergroup": "caught-up", "topic": TOPIC, "partition": "0"}
    m = wait_metrics(lagging, lambda s: sample(s, "kafka_consumergroup_lag", **g) is not None)
    assert sample(m, "kafka_consumergroup_lag", **g) == 0
    assert sample(m, "kafka_consumergroup_lag_seconds", **g) == 0
    assert sample(m, "kafka_consumergroup_lag_time_to_clear_seconds", **g) in (None, 0)


def test_api_and_pages(lagging: ConsoleBroker) -> None:
    import json

    status, body = lagging.get(f"/api/groups/{GROUP}")
    assert status == 200
    group = json.loads(body)
    (p,) = group["partitions"]
    assert (p["committed"], p["end"], p["lag"]) == (40, 100, 60)
    assert p["lag_seconds"] >= 0
    status, body = lagging.get(f"/api/topics/{TOPIC}/messages?partition=0&offset=41&limit=3")
    assert status == 200
    records = json.loads(body)
    assert [r["offset"] for r in records] == [41, 42, 43]
    assert records[0]["key"] == "key-41" and records[0]["value"] == '{"n": 41}'
    assert records[0]["headers"] == [["h", "v"]]
    status, body = lagging.get(f"/topics/{TOPIC}/messages?partition=0&offset=7&limit=1&format=hex")
    assert status == 200 and "6b 65 79 2d 37" in body  # "key-7"
    status, body = lagging.get(f"/groups/{GROUP}/lag")
    assert status == 200 and ">60<" in body
    assert lagging.get("/topics/no-such-topic")[0] == 404
    status, body = lagging.get(f"/topics/{TOPIC}")
    assert status == 200 and "retention.ms" in body


def test_group_actions_need_the_console_header(lagging: ConsoleBroker) -> None:
    conf = {"bootstrap.servers": lagging.bootstrap_servers}
    with Admin(conf) as admin:
        admin.alter_group_offsets("to-reset", {TopicPartition(TOPIC, 0): 10})
    form = {"topic": TOPIC, "to": "latest"}
    assert lagging.post("/groups/to-reset/reset", form, {})[0] == 403
    status, body = lagging.post("/groups/to-reset/reset", form, {"HX-Request": "true"})
    assert status == 200 and "committed 1 offset" in body
    with Admin(conf) as admin:
        assert admin.list_group_offsets("to-reset")[TopicPartition(TOPIC, 0)].offset == 100
    status, body = lagging.post("/groups/to-reset/delete", {}, {"HX-Request": "true"})
    assert status == 200 and "deleted group to-reset" in body
    with Admin(conf) as admin:
        assert "to-reset" not in {gid for gid, _t, _s in admin.list_groups()}


def test_bytes_and_messages_per_topic(console_broker: ConsoleBroker) -> None:
    """BytesIn/MessagesIn count what Produce appended, BytesOut what a consumer's Fetch carried:
    both equal the partition's log size here (one partition, read once from the start)."""
    from broker.wire import Wire, fetch_request

    topic = "traffic-topic"
    conf = {"bootstrap.servers": console_broker.bootstrap_servers}
    with Admin(conf) as admin:
        admin.create_topics([topic])
    with Producer(conf) as producer:
        for i in range(50):
            producer.send(topic, b"x" * (10 + i), key=b"k%d" % i)
        producer.flush()
    tp = {"topic": topic, "partition": "0"}
    m = wait_metrics(
        console_broker,
        lambda s: sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 50
        and sample(s, "kafka_log_log_logendoffset", **tp) == 50,
    )
    size = sample(m, "kafka_log_log_size", **tp)
    assert size is not None and size > 50 * 10
    assert sample(m, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size
    assert sample(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) is None
    with Wire(console_broker.bootstrap_servers) as wire:
        response = wire.call(fetch_request(topic, {0: 0}))
    assert len(response.responses[0].partitions[0].records) == size
    m = wait_metrics(
        console_broker,
        lambda s: sample(s, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic)
        is not None,
    )
    assert sample(m, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) == size


def test_refused_versions_are_counted_as_errors(console_broker: ConsoleBroker) -> None:
    """A request version the broker does not serve closes the connection and is counted under
    UNSUPPORTED_VERSION (how an operator sees old clients such as Burrow's ListOffsets v0)."""
    import struct

    from broker.wire import Wire

    with Wire(console_broker.bootstrap_servers) as wire:
        wire.send_raw(struct.pack(">ihhih", 10, 0, 99, 1, 0))  # Produce v99
        assert wire.is_closed_by_peer()
    m = wait_metrics(
        console_broker,
        lambda s: (sample(s, "kafka_network_requestmetrics_errors_total", request="Produce",
                          error="UNSUPPORTED_VERSION") or 0) >= 1,
    )
    assert sample(m, "kafka_network_requestmetrics_requests_total", request="Produce",
                  version="99") is None


def test_browse_by_timestamp(console_broker: ConsoleBroker) -> None:
    """The message browser from the first record at or after a timestamp, in milliseconds or
    ISO 8601 (ListOffsets by time, then a bounded read)."""
    import datetime
    import json

    topic = "browse-by-time"
    conf = {"bootstrap.servers": console_broker.bootstrap_servers}
    base = (int(time.time()) - 3600) * 1000  # whole seconds: exact in ISO form too
    with Admin(conf) as admin:
        admin.create_topics([topic])
    with Producer(conf) as producer:
        for i in range(10):
            producer.send(topic, b"at-%d" % i, partition=0, timestamp=base + 1000 * i)
        producer.flush()
    status, body = console_broker.get(
        f"/api/topics/{topic}/messages?partition=0&timestamp={base + 3500}&limit=2"
    )
    assert status == 200, body
    records = json.loads(body)
    assert [(r["offset"], r["value"]) for r in records] == [(4, "at-4"), (5, "at-5")]
    iso = datetime.datetime.fromtimestamp((base + 7000) / 1000, datetime.UTC).isoformat()
    status, body = console_broker.get(
        f"/topics/{topic}/messages?partition=0&timestamp={urllib.parse.quote(iso)}&limit=1"
    )
    assert status == 200 and "at-7" in body and "at-6" not in body
    status, body = console_broker.get(
        f"/api/topics/{topic}/messages?partition=0&timestamp={base + 60_000}&limit=5"
    )
    assert status == 200 and json.loads(body) == []  # after the last record: nothing
