"""Prometheus metrics: broker internals (``broker``), cluster topics and consumer groups with
kafka_exporter's names (``cluster``), consumer lag in offsets, seconds and time to clear (``lag``)."""

from odradek.metrics.broker import BrokerMetrics, BrokerStateCollector, EventLoopLag
from odradek.metrics.lag import LagHistory, LagSample, lag_seconds, offset_lag, time_to_clear

__all__ = [
    "BrokerMetrics",
    "BrokerStateCollector",
    "EventLoopLag",
    "LagHistory",
    "LagSample",
    "lag_seconds",
    "offset_lag",
    "time_to_clear",
]
