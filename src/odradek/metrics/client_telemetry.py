"""The metrics clients push to the broker (KIP-714 client telemetry) as Prometheus series.

``ClientTelemetryCollector(source)`` reads, at scrape time, what the broker's
``ClientTelemetryManager`` (``odradek.broker.client_telemetry``) holds, through the small
``ClientTelemetrySource`` protocol (the metrics never import the broker):

* ``odradek_client_metric{client_instance_id,client_id,name}``: the latest value of each
  metric each live client instance pushed (``name`` is the client's own name, e.g.
  ``org.apache.kafka.producer.node.request.latency.avg``; values in the client's units).
  Cardinality is bounded by the broker: instances not heard from for three push intervals
  (at least a minute) are dropped, at most 16384 instances and 512 names per instance are
  held, and only the subscribed metric prefixes are pushed;
* ``odradek_client_metric_last_push_timestamp_seconds{client_instance_id,client_id}``;
* ``kafka_server_clientmetrics_instance_count``: client instances known (Kafka's
  ``ClientMetricsInstanceCount``);
* ``kafka_server_clientmetrics_unknown_subscription_requests_total`` (Kafka's
  ``ClientMetricsUnknownSubscriptionRequest``), ``odradek_client_telemetry_pushes_total``,
  ``odradek_client_telemetry_throttled_requests_total``,
  ``odradek_client_telemetry_invalid_pushes_total`` (payloads answered INVALID_RECORD).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ClientInstance", "ClientTelemetryCollector", "ClientTelemetrySource"]


class ClientInstance(Protocol):
    """One client instance and the latest value of each metric it pushed."""

    @property
    def client_instance_id(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    @property
    def last_push_ms(self) -> int: ...

    @property
    def metrics(self) -> Sequence[tuple[str, float]]: ...


class ClientTelemetrySource(Protocol):
    """What the broker's client telemetry manager offers the metrics and the console."""

    unknown_subscription_requests: int
    throttled_requests: int
    pushes: int
    decode_errors: int

    def instances(self) -> Sequence[ClientInstance]: ...

    def instance_count(self) -> int: ...


class ClientTelemetryCollector(Collector):
    """Series of the metrics clients pushed (see the module docstring)."""

    def __init__(self, source: ClientTelemetrySource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        src = self.source
        values = GaugeMetricFamily(
            "odradek_client_metric",
            "Latest value of a metric a client pushed (KIP-714 client telemetry), by client "
            "instance, client id and the client's metric name.",
            labels=["client_instance_id", "client_id", "name"],
        )
        last_push = GaugeMetricFamily(
            "odradek_client_metric_last_push_timestamp_seconds",
            "When a client instance last pushed its metrics.",
            labels=["client_instance_id", "client_id"],
        )
        for inst in src.instances():
            for name, value in inst.metrics:
                values.add_metric([inst.client_instance_id, inst.client_id, name], value)
            last_push.add_metric(
                [inst.client_instance_id, inst.client_id], inst.last_push_ms / 1000.0
            )
        yield values
        yield last_push
        yield GaugeMetricFamily(
            "kafka_server_clientmetrics_instance_count",
            "Client instances that asked for telemetry subscriptions or pushed.",
            value=src.instance_count(),
        )
        yield CounterMetricFamily(
            "kafka_server_clientmetrics_unknown_subscription_requests",
            "Pushes answered UNKNOWN_SUBSCRIPTION_ID.",
            value=src.unknown_subscription_requests,
        )
        yield CounterMetricFamily(
            "odradek_client_telemetry_pushes",
            "Telemetry pushes accepted.",
            value=src.pushes,
        )
        yield CounterMetricFamily(
            "odradek_client_telemetry_throttled_requests",
            "Subscription requests and pushes answered THROTTLING_QUOTA_EXCEEDED.",
            value=src.throttled_requests,
        )
        yield CounterMetricFamily(
            "odradek_client_telemetry_invalid_pushes",
            "Pushes whose payload did not decompress or decode (INVALID_RECORD).",
            value=src.decode_errors,
        )
