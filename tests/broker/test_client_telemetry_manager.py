"""``ClientTelemetryManager`` (KIP-714) on a manual clock: subscriptions and their matching,
push-interval enforcement, subscription ids that change with the subscriptions, decoding and
combining of pushed metrics, and the expiry that bounds what /metrics exports."""

from __future__ import annotations

from typing import Any

import cramjam
import pytest
from kio.schema.errors import ErrorCode
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from odradek.broker.client_telemetry import (
    DEFAULT_INTERVAL_MS,
    DEFAULT_SUBSCRIPTION,
    MAX_METRICS_PER_INSTANCE,
    ClientTelemetryManager,
    TelemetryDecodeError,
    decode_metrics_data,
    parse_subscription,
)
from odradek.broker.config_store import LocalConfigEntityStore
from odradek.clock import ManualClock
from odradek.metrics.client_telemetry import ClientTelemetryCollector

DELTA = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE


def _point(value: float, node: str | None = None) -> metrics_pb2.NumberDataPoint:
    attrs = (
        []
        if node is None
        else [common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(string_value=node))]
    )
    return metrics_pb2.NumberDataPoint(as_double=value, attributes=attrs)


def payload(*metrics: metrics_pb2.Metric) -> bytes:
    return metrics_pb2.MetricsData(
        resource_metrics=[
            metrics_pb2.ResourceMetrics(scope_metrics=[metrics_pb2.ScopeMetrics(metrics=metrics)])
        ]
    ).SerializeToString()


def gauge(name: str, *points: metrics_pb2.NumberDataPoint) -> metrics_pb2.Metric:
    return metrics_pb2.Metric(name=name, gauge=metrics_pb2.Gauge(data_points=points))


def total(name: str, value: int, temporality: Any) -> metrics_pb2.Metric:
    point = metrics_pb2.NumberDataPoint(as_int=value)
    return metrics_pb2.Metric(
        name=name,
        sum=metrics_pb2.Sum(
            data_points=[point], aggregation_temporality=temporality, is_monotonic=True
        ),
    )


async def manager(
    subscriptions: dict[str, dict[str, str]] | None = None,
) -> tuple[ClientTelemetryManager, ManualClock, LocalConfigEntityStore]:
    clock = ManualClock()
    store = LocalConfigEntityStore(None)
    for name, configs in (subscriptions or {}).items():
        await store.change_entity_config("client-metrics", name, configs)
    return ClientTelemetryManager(clock, store), clock, store


async def test_default_subscription_without_client_metrics_resources() -> None:
    m, _clock, _store = await manager()
    answer = m.get_subscriptions(None, "app", "10.0.0.1")
    assert answer.error is ErrorCode.none
    assert answer.requested_metrics == tuple(sorted(DEFAULT_SUBSCRIPTION.metrics))
    assert answer.push_interval_ms == 30_000
    assert answer.client_instance_id.int not in (0, 1)


async def test_matching_union_and_shortest_interval() -> None:
    m, _clock, _store = await manager(
        {
            "producers": {
                "metrics": "org.apache.kafka.producer.",
                "interval.ms": "5000",
                "match": "client_id=pay-.*",
            },
            "latency": {
                "metrics": "org.apache.kafka.producer.node.",
                "interval.ms": "1000",
                "match": "client_id=pay-.*,client_source_address=10\\..*",
            },
            "others": {"metrics": "*", "interval.ms": "2000", "match": "client_id=other"},
        }
    )
    both = m.get_subscriptions(None, "pay-1", "10.1.2.3")
    assert both.requested_metrics == (
        "org.apache.kafka.producer.",
        "org.apache.kafka.producer.node.",
    )
    assert both.push_interval_ms == 1000
    one = m.get_subscriptions(None, "pay-2", "192.168.0.1")
    assert one.requested_metrics == ("org.apache.kafka.producer.",)
    assert one.push_interval_ms == 5000
    every = m.get_subscriptions(None, "other", "10.0.0.1")
    assert every.requested_metrics == ("*",)  # every metric: "*" alone, as Kafka answers
    nobody = m.get_subscriptions(None, "nobody", "10.0.0.1")
    assert nobody.requested_metrics == ()
    assert nobody.push_interval_ms == DEFAULT_INTERVAL_MS


async def test_push_interval_is_enforced_and_a_changed_subscription_is_unknown() -> None:
    m, clock, store = await manager({"all": {"metrics": "org.", "interval.ms": "1000"}})
    a = m.get_subscriptions(None, "c", "h")
    iid, sub = a.client_instance_id, a.subscription_id
    data = payload(gauge("org.x.avg", _point(1.0)))
    assert m.push(iid, sub, False, 0, data, "c", "h").error is ErrorCode.none  # first: at once
    clock.advance(999)
    assert m.push(iid, sub, False, 0, data, "c", "h").error is ErrorCode.throttling_quota_exceeded
    assert m.get_subscriptions(iid, "c", "h").error is ErrorCode.throttling_quota_exceeded
    clock.advance(1)
    assert m.push(iid, sub, False, 0, data, "c", "h").error is ErrorCode.none
    # the subscriptions change: the old subscription id is unknown, a new one is handed out
    await store.change_entity_config(
        "client-metrics", "all", {"metrics": "org.", "interval.ms": "2000"}
    )
    clock.advance(1000)
    assert m.push(iid, sub, False, 0, data, "c", "h").error is ErrorCode.unknown_subscription_id
    clock.advance(1)  # a round trip later
    b = m.get_subscriptions(iid, "c", "h")  # at once: the push was refused for its id
    assert b.error is ErrorCode.none and b.client_instance_id == iid
    assert b.subscription_id != sub and b.push_interval_ms == 2000
    assert m.push(iid, b.subscription_id, False, 0, data, "c", "h").error is ErrorCode.none
    assert m.unknown_subscription_requests == 1 and m.throttled_requests == 2


@pytest.mark.parametrize(
    "codec, compress",
    [
        (1, lambda b: bytes(cramjam.gzip.compress(b))),
        (2, lambda b: bytes(cramjam.snappy.compress_raw(b))),
        (3, lambda b: bytes(cramjam.lz4.compress(b))),
        (4, lambda b: bytes(cramjam.zstd.compress(b))),
    ],
)
async def test_every_accepted_compression_decodes(codec: int, compress: object) -> None:
    m, _clock, _store = await manager({"all": {"metrics": "*", "interval.ms": "100"}})
    a = m.get_subscriptions(None, "c", "h")
    data = compress(payload(gauge("org.x.avg", _point(2.5))))  # type: ignore[operator]
    assert (
        m.push(a.client_instance_id, a.subscription_id, False, codec, data, "c", "h").error
        is ErrorCode.none
    )
    assert m.instances()[0].metrics == (("org.x.avg", 2.5),)


async def test_values_are_combined_per_name_and_deltas_accumulate() -> None:
    m, clock, _store = await manager({"all": {"metrics": "*", "interval.ms": "100"}})
    a = m.get_subscriptions(None, "c", "h")
    iid, sub = a.client_instance_id, a.subscription_id
    first = payload(
        gauge("x.latency.avg", _point(2.0, "1"), _point(4.0, "2")),
        gauge("x.latency.max", _point(2.0, "1"), _point(9.0, "2")),
        total("x.connection.creation.total", 3, DELTA),
        total("x.bytes.total", 100, CUMULATIVE),
    )
    assert m.push(iid, sub, False, 0, first, "c", "h").error is ErrorCode.none
    clock.advance(100)
    second = payload(
        total("x.connection.creation.total", 2, DELTA), total("x.bytes.total", 150, CUMULATIVE)
    )
    assert m.push(iid, sub, False, 0, second, "c", "h").error is ErrorCode.none
    (view,) = m.instances()
    assert dict(view.metrics) == {
        "x.latency.avg": 3.0,  # mean over the nodes
        "x.latency.max": 9.0,  # the maximum
        "x.connection.creation.total": 5.0,  # deltas added up
        "x.bytes.total": 150.0,  # cumulative as given
    }
    assert view.client_id == "c" and view.pushes == 2


async def test_metric_names_per_instance_are_bounded() -> None:
    m, _clock, _store = await manager({"all": {"metrics": "*", "interval.ms": "100"}})
    a = m.get_subscriptions(None, "c", "h")
    many = payload(*(gauge(f"m{i}", _point(i)) for i in range(MAX_METRICS_PER_INSTANCE + 10)))
    assert (
        m.push(a.client_instance_id, a.subscription_id, False, 0, many, "c", "h").error
        is ErrorCode.none
    )
    assert len(m.instances()[0].metrics) == MAX_METRICS_PER_INSTANCE


async def test_silent_and_terminated_instances_are_dropped_from_metrics() -> None:
    m, clock, _store = await manager({"all": {"metrics": "*", "interval.ms": "30000"}})
    data = payload(gauge("org.x.avg", _point(1.0)))
    quiet = m.get_subscriptions(None, "quiet", "h")
    leaving = m.get_subscriptions(None, "leaving", "h")
    for a, cid in ((quiet, "quiet"), (leaving, "leaving")):
        assert (
            m.push(a.client_instance_id, a.subscription_id, False, 0, data, cid, "h").error
            is ErrorCode.none
        )
    clock.advance(1000)
    assert (
        m.push(
            leaving.client_instance_id, leaving.subscription_id, True, 0, data, "leaving", "h"
        ).error
        is ErrorCode.none
    )
    labels = {
        s.labels["client_id"]
        for f in ClientTelemetryCollector(m).collect()
        for s in f.samples
        if f.name == "odradek_client_metric"
    }
    assert labels == {"quiet", "leaving"}
    clock.advance(30_001)  # one interval after the terminating push
    assert [v.client_id for v in m.instances()] == ["quiet"]
    clock.advance(3 * 30_000)  # three intervals without a word
    assert m.instances() == [] and m.instance_count() == 0


def test_garbage_is_not_metrics_data() -> None:
    with pytest.raises(TelemetryDecodeError):
        decode_metrics_data(b"\xff\xff\xff\xff garbage")
    assert decode_metrics_data(b"") == []


@pytest.mark.parametrize(
    "configs",
    [
        {"interval.ms": "99"},
        {"interval.ms": "3600001"},
        {"interval.ms": "soon"},
        {"match": "client_id"},
        {"match": "nobody=.*"},
        {"match": "client_id=("},
        {"metric": "x"},
    ],
)
def test_invalid_client_metrics_configs(configs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        parse_subscription("s", configs)


async def test_the_least_recent_instance_goes_first_when_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from odradek.broker import client_telemetry

    monkeypatch.setattr(client_telemetry, "MAX_INSTANCES", 3)
    m, clock, _store = await manager({"all": {"metrics": "*", "interval.ms": "100"}})
    ids = []
    for n in range(3):
        ids.append(m.get_subscriptions(None, f"c{n}", "h").client_instance_id)
        clock.advance(100)
    m.get_subscriptions(ids[0], "c0", "h")  # c0 is heard from again: c1 is now the oldest
    m.get_subscriptions(None, "c3", "h")
    assert m.instance_count() == 3
    clock.advance(100)
    assert m.get_subscriptions(ids[2], "c2", "h").subscription_id != 0
    known = {i.client_id for i in m._instances.values()}
    assert known == {"c0", "c2", "c3"}
