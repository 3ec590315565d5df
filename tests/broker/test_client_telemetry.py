"""Client telemetry (KIP-714) over the raw protocol against a real broker process:
GetTelemetrySubscriptions (71) and PushTelemetry (72), client-metrics subscriptions set with
IncrementalAlterConfigs, and Kafka's error codes for bad pushes."""

from __future__ import annotations

import uuid
from typing import Any

import cramjam
import pytest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from odradek.testing.process import BrokerProcess

from .wire import Wire, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"num.partitions": 1}

NONE = 0
INVALID_REQUEST = 42
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87
THROTTLING_QUOTA_EXCEEDED = 89
UNKNOWN_SUBSCRIPTION_ID = 117
TELEMETRY_TOO_LARGE = 118
CLIENT_METRICS = 16


def metrics_data(name: str, value: float, *, node: str | None = None) -> bytes:
    attrs = (
        []
        if node is None
        else [common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(string_value=node))]
    )
    point = metrics_pb2.NumberDataPoint(as_double=value, attributes=attrs)
    metric = metrics_pb2.Metric(name=name, gauge=metrics_pb2.Gauge(data_points=[point]))
    data = metrics_pb2.MetricsData(
        resource_metrics=[
            metrics_pb2.ResourceMetrics(scope_metrics=[metrics_pb2.ScopeMetrics(metrics=[metric])])
        ]
    )
    return data.SerializeToString()


def subscribe(w: Wire, name: str, **configs: str) -> int:
    ops = tuple(
        req(44, 1, "AlterableConfig", name=k.replace("_", "."), config_operation=0, value=v)
        for k, v in configs.items()
    )
    res = req(
        44, 1, "AlterConfigsResource", resource_type=CLIENT_METRICS, resource_name=name, configs=ops
    )
    r = w.call(req(44, 1, resources=(res,), validate_only=False))
    return int(r.responses[0].error_code)


def get_subscriptions(w: Wire, instance: uuid.UUID | None = None) -> Any:
    return w.call(req(71, 0, client_instance_id=instance or uuid.UUID(int=0)))


def push(
    w: Wire,
    instance: uuid.UUID,
    subscription: int,
    payload: bytes,
    *,
    compression: int = 0,
    terminating: bool = False,
) -> int:
    r = w.call(
        req(
            72,
            0,
            client_instance_id=instance,
            subscription_id=subscription,
            terminating=terminating,
            compression_type=compression,
            metrics=payload,
        )
    )
    return int(r.error_code)


@pytest.fixture(scope="module")
def subscribed(broker: BrokerProcess) -> str:
    """One subscription matching only client id ``wire`` (the raw client's), every 60 s: long
    enough that a second push within the test is always within the interval."""
    with Wire(broker.bootstrap_servers) as w:
        assert (
            subscribe(
                w,
                "wire-sub",
                metrics="org.apache.kafka.",
                interval_ms="60000",
                match="client_id=wire",
            )
            == NONE
        )
    return "wire-sub"


def test_api_versions_advertises_telemetry(wire: Wire) -> None:
    r = wire.call(req(18, 3, client_software_name="wire", client_software_version="1"))
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert ranges[71] == (0, 0) and ranges[72] == (0, 0)


def test_subscription_then_push_is_accepted_and_resubscribing_is_throttled(
    wire: Wire, subscribed: str
) -> None:
    r = get_subscriptions(wire)
    assert int(r.error_code) == NONE
    instance = r.client_instance_id
    assert instance is not None and instance.int not in (0, 1)
    assert tuple(r.requested_metrics) == ("org.apache.kafka.",)
    assert r.push_interval.total_seconds() * 1000 == 60000
    assert int(r.telemetry_max_bytes) == 1048576
    assert r.delta_temporality is True
    assert sorted(int(c) for c in r.accepted_compression_types) == [1, 2, 3, 4]
    sub = int(r.subscription_id)
    payload = metrics_data("org.apache.kafka.producer.node.request.latency.avg", 1.5)
    assert push(wire, instance, sub, cramjam.zstd.compress(payload).read(), compression=4) == NONE
    # again at once: within the interval
    assert push(wire, instance, sub, payload) == THROTTLING_QUOTA_EXCEEDED
    assert int(get_subscriptions(wire, instance).error_code) == THROTTLING_QUOTA_EXCEEDED
    # a terminating push is accepted even within the interval; after it nothing is
    assert push(wire, instance, sub, payload, terminating=True) == NONE
    assert push(wire, instance, sub, payload) == INVALID_REQUEST


def test_bad_pushes_get_kafkas_errors_and_the_broker_stays_up(
    broker: BrokerProcess, subscribed: str
) -> None:
    with Wire(broker.bootstrap_servers) as w:
        payload = metrics_data("org.apache.kafka.producer.record.queue.time.avg", 2.0)
        assert push(w, uuid.UUID(int=1), 0, payload) == INVALID_REQUEST
        # an instance the broker never gave a subscription to
        assert push(w, uuid.uuid4(), 12345, payload) == UNKNOWN_SUBSCRIPTION_ID
        r = get_subscriptions(w)
        instance, sub = r.client_instance_id, int(r.subscription_id)
        assert push(w, instance, sub + 1, payload) == UNKNOWN_SUBSCRIPTION_ID
    cases = [
        (b"\xff\xfe garbage, not a protobuf \x00\x01", 0, INVALID_RECORD),
        (b"not zstd at all", 4, INVALID_RECORD),
        (payload, 9, UNSUPPORTED_COMPRESSION_TYPE),
        (b"\x00" * (1048576 + 1), 0, TELEMETRY_TOO_LARGE),
    ]
    for data, compression, expected in cases:
        with Wire(broker.bootstrap_servers) as w:
            r = get_subscriptions(w)
            got = push(
                w, r.client_instance_id, int(r.subscription_id), data, compression=compression
            )
            assert got == expected, (data[:20], compression)
    with Wire(broker.bootstrap_servers) as w:  # still serving
        assert (
            int(
                w.call(req(18, 3, client_software_name="w", client_software_version="1")).error_code
            )
            == NONE
        )


def test_client_metrics_resource_is_described_and_validated(wire: Wire, subscribed: str) -> None:
    res = req(
        32,
        4,
        "DescribeConfigsResource",
        resource_type=CLIENT_METRICS,
        resource_name=subscribed,
        configuration_keys=None,
    )
    r = wire.call(req(32, 4, resources=(res,), include_synonyms=False, include_documentation=False))
    result = r.results[0]
    assert int(result.error_code) == NONE
    assert {c.name: c.value for c in result.configs} == {
        "metrics": "org.apache.kafka.",
        "interval.ms": "60000",
        "match": "client_id=wire",
    }
    assert subscribe(wire, "bad", interval_ms="5") == 40  # INVALID_CONFIG
    assert subscribe(wire, "bad", no_such_key="1") == 40
    assert subscribe(wire, "bad", match="nobody=x") == 40
    assert subscribe(wire, "", metrics="*") == INVALID_REQUEST


def test_telemetry_max_bytes_is_the_brokers_key() -> None:
    with BrokerProcess({"telemetry.max.bytes": 1000}) as small, Wire(small.bootstrap_servers) as w:
        r = get_subscriptions(w)
        assert int(r.telemetry_max_bytes) == 1000
        instance, sub = r.client_instance_id, int(r.subscription_id)
        assert push(w, instance, sub, b"\x00" * 1001) == TELEMETRY_TOO_LARGE
        payload = metrics_data("org.apache.kafka.producer.record.queue.time.avg", 2.0)
        assert push(w, instance, sub, payload, terminating=True) == NONE
