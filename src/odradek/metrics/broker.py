"""Broker internals as Prometheus metrics, in the style of Kafka's JMX names.

``BrokerMetrics`` holds what must be counted as it happens, with plain methods the broker calls:

* ``request_done(api_key, version, seconds, request_bytes, response_bytes)`` once per answered
  request (the only hot-path call: a dict lookup, a bisect and a few additions; no locks, it runs
  on the event loop);
* ``request_failed(api_key, version, seconds, request_bytes, error)`` for a request whose handler
  raised (counted as a request, timed, and counted in the errors series under ``error``);
  ``request_refused(api_key, error)`` for one refused before its handler (errors series only);
* ``topic_bytes_in(topic, n, records)`` / ``topic_bytes_out(topic, n)`` for per-topic traffic,
  called by the Produce handler per partition appended to and by the Fetch handler per partition
  read by a consumer (``RequestContext.metrics``); a topic's series appear with its first call.

Everything else is read from the broker when Prometheus scrapes (``BrokerStateCollector``), through
the small ``BrokerState`` protocol: partition logs (log size, start and end offsets, high
watermark), purgatory size, connection count. ``EventLoopLag`` measures how late a timer fires.

Exported series (``docs/operations.md`` describes each one):

* ``kafka_network_requestmetrics_requests_total{request,version}``
* ``kafka_network_requestmetrics_totaltime_seconds{request}`` (histogram)
* ``kafka_network_requestmetrics_request_bytes_total{request}``, ``..._response_bytes_total{request}``
* ``kafka_network_requestmetrics_errors_total{request,error}``
* ``kafka_server_brokertopicmetrics_bytesin_total{topic}``, ``..._bytesout_total{topic}``,
  ``..._messagesin_total{topic}``
* ``kafka_server_socketserver_connections``
* ``kafka_log_log_size{topic,partition}``, ``kafka_log_log_logstartoffset{topic,partition}``,
  ``kafka_log_log_logendoffset{topic,partition}``, ``kafka_log_log_numlogsegments{topic,partition}``
* ``kafka_server_replicamanager_partitioncount``, ``..._underreplicatedpartitions``,
  ``..._isrshrinks_total``, ``..._isrexpands_total``
* ``kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation}``
* ``kafka_server_socket_server_metrics_successful_authentication_total{listener,mechanism}``,
  ``kafka_server_socket_server_metrics_failed_authentication_total{listener,mechanism}``
  (a failed TLS handshake: mechanism ``SSL``)
* ``odradek_event_loop_lag_seconds`` (histogram), ``odradek_event_loop_lag_max_seconds``
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

__all__ = [
    "LATENCY_BUCKETS",
    "AuthenticationCounts",
    "BrokerMetrics",
    "BrokerState",
    "BrokerStateCollector",
    "EventLoopLag",
    "authentication_families",
]

LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
)
"""Upper bounds (seconds) of the request-latency and event-loop-lag histograms."""


class _Histogram:
    """Counts per bucket, sum and count; exported as a Prometheus histogram."""

    __slots__ = ("buckets", "count", "sum")

    def __init__(self, n: int) -> None:
        self.buckets = [0] * (n + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, bounds: tuple[float, ...], value: float) -> None:
        self.buckets[bisect.bisect_left(bounds, value)] += 1
        self.count += 1
        self.sum += value

    def cumulative(self, bounds: tuple[float, ...]) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip(bounds, self.buckets, strict=False):
            total += n
            out.append((repr(bound), float(total)))
        out.append(("+Inf", float(self.count)))
        return out


class BrokerMetrics(Collector):
    """Counters the broker updates as requests are answered; a Prometheus collector."""

    def __init__(self, api_names: Mapping[int, str] | None = None) -> None:
        """``api_names``: Kafka's request names (``Produce``, ``Fetch``...) by API key, as the
        broker's registry has them (a key without a name is exported by its number)."""
        self._names = dict(api_names) if api_names is not None else {}
        self._count: dict[tuple[int, int], int] = {}
        self._latency: dict[int, _Histogram] = {}
        self._bytes_req: dict[int, int] = {}
        self._bytes_resp: dict[int, int] = {}
        self._topic_in: dict[str, list[int]] = {}  # topic -> [bytes, records]
        self._topic_out: dict[str, int] = {}
        self._errors: dict[tuple[int, str], int] = {}

    # -- called by the broker -----------------------------------------------------------------

    def request_done(
        self,
        api_key: int,
        version: int,
        seconds: float,
        request_bytes: int = 0,
        response_bytes: int = 0,
    ) -> None:
        key = (api_key, version)
        count = self._count
        count[key] = count.get(key, 0) + 1
        hist = self._latency.get(api_key)
        if hist is None:
            hist = self._latency[api_key] = _Histogram(len(LATENCY_BUCKETS))
        hist.observe(LATENCY_BUCKETS, seconds)
        if request_bytes:
            self._bytes_req[api_key] = self._bytes_req.get(api_key, 0) + request_bytes
        if response_bytes:
            self._bytes_resp[api_key] = self._bytes_resp.get(api_key, 0) + response_bytes

    def request_failed(
        self, api_key: int, version: int, seconds: float, request_bytes: int, error: str
    ) -> None:
        self.request_done(api_key, version, seconds, request_bytes)
        key = (api_key, error)
        self._errors[key] = self._errors.get(key, 0) + 1

    def request_refused(self, api_key: int, error: str) -> None:
        key = (api_key, error)
        self._errors[key] = self._errors.get(key, 0) + 1

    def topic_bytes_in(self, topic: str, nbytes: int, records: int) -> None:
        entry = self._topic_in.get(topic)
        if entry is None:
            entry = self._topic_in[topic] = [0, 0]
        entry[0] += nbytes
        entry[1] += records

    def topic_bytes_out(self, topic: str, nbytes: int) -> None:
        self._topic_out[topic] = self._topic_out.get(topic, 0) + nbytes

    # -- read back ----------------------------------------------------------------------------

    def request_name(self, api_key: int) -> str:
        return self._names.get(api_key, str(api_key))

    def request_counts(self) -> dict[tuple[str, int], int]:
        return {(self.request_name(k), v): n for (k, v), n in self._count.items()}

    def error_counts(self) -> dict[tuple[str, str], int]:
        return {(self.request_name(k), e): n for (k, e), n in self._errors.items()}

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API (Kafka's RequestMetrics RequestsPerSec).",
            labels=["request", "version"],
        )
        for (key, version), n in sorted(self._count.items()):
            requests.add_metric([self.request_name(key), str(version)], n)
        yield requests
        latency = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its response being queued (Kafka's TotalTimeMs).",
            labels=["request"],
        )
        for key, hist in sorted(self._latency.items()):
            latency.add_metric(
                [self.request_name(key)], hist.cumulative(LATENCY_BUCKETS), sum_value=hist.sum
            )
        yield latency
        for name, doc, values in (
            ("request_bytes", "Request bytes received, per API.", self._bytes_req),
            ("response_bytes", "Response bytes queued, per API.", self._bytes_resp),
        ):
            if not values and name == "response_bytes":
                continue  # only when the broker reports response sizes
            fam = CounterMetricFamily(
                f"kafka_network_requestmetrics_{name}", doc, labels=["request"]
            )
            for key, n in sorted(values.items()):
                fam.add_metric([self.request_name(key)], n)
            yield fam
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Requests that failed, per API and Kafka error name (Kafka's RequestMetrics "
            "ErrorsPerSec): UNKNOWN_SERVER_ERROR when the handler raised, UNSUPPORTED_VERSION "
            "and INVALID_REQUEST when refused before it (the connection is closed).",
            labels=["request", "error"],
        )
        for (key, error), n in sorted(self._errors.items()):
            errors.add_metric([self.request_name(key), error], n)
        yield errors
        bytes_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesin",
            "Record bytes appended by producers, per topic (BytesInPerSec).",
            labels=["topic"],
        )
        messages_in = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by producers, per topic (MessagesInPerSec).",
            labels=["topic"],
        )
        for topic, (nbytes, records) in sorted(self._topic_in.items()):
            bytes_in.add_metric([topic], nbytes)
            messages_in.add_metric([topic], records)
        yield bytes_in
        yield messages_in
        bytes_out = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent to consumers, per topic (BytesOutPerSec).",
            labels=["topic"],
        )
        for topic, nbytes in sorted(self._topic_out.items()):
            bytes_out.add_metric([topic], nbytes)
        yield bytes_out


class LogView(Protocol):
    """What the collectors read from one partition log (storage.PartitionLog has these)."""

    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def segment_count(self) -> int: ...


class BrokerState(Protocol):
    """The broker state read at scrape time, handed over by the broker (the metrics never
    import it): ``odradek.broker.observed_state.ObservedState`` implements it."""

    def logs(self) -> Iterable[LogView]: ...

    def connection_count(self) -> int: ...

    def purgatory_size(self) -> int: ...

    def under_replicated(self) -> int: ...

    def isr_changes(self) -> tuple[int, int]:
        """(ISR shrinks, ISR expands) of partitions led here since the broker started."""
        ...

    def authentications(self) -> AuthenticationCounts:
        """(succeeded, failed) authentications since the broker started, per (listener,
        mechanism); a failed TLS handshake is a failure of mechanism ``SSL``."""
        ...


AuthenticationCounts = tuple[Mapping[tuple[str, str], int], Mapping[tuple[str, str], int]]
"""(succeeded, failed) authentications per (listener, mechanism)."""


class BrokerStateCollector(Collector):
    """Series read from the broker when Prometheus scrapes (see the module docstring)."""

    def __init__(self, state: BrokerState, metrics: BrokerMetrics | None = None) -> None:
        self.state = state
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        st = self.state
        yield GaugeMetricFamily(
            "kafka_server_socketserver_connections",
            "Open client connections.",
            value=st.connection_count(),
        )
        size = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of the partition's log segments.", labels=["topic", "partition"]
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "Log start offset.", labels=["topic", "partition"]
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset", "Log end offset.", labels=["topic", "partition"]
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Number of segments.", labels=["topic", "partition"]
        )
        count = 0
        for plog in st.logs():
            labels = [plog.topic, str(plog.partition)]
            size.add_metric(labels, plog.size_in_bytes)
            start.add_metric(labels, plog.log_start_offset)
            end.add_metric(labels, plog.log_end_offset)
            segments.add_metric(labels, plog.segment_count)
            count += 1
        yield from (size, start, end, segments)
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount",
            "Partitions with a log on this broker.",
            value=count,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            value=st.under_replicated(),
        )
        shrinks, expands = st.isr_changes()
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks of partitions led here (committed by the controller).",
            value=shrinks,
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions of partitions led here (committed by the controller).",
            value=expands,
        )
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked in a purgatory.",
            labels=["delayedoperation"],
        )
        purgatory.add_metric(["Fetch"], st.purgatory_size())
        yield purgatory
        yield from authentication_families(st.authentications())


def authentication_families(counts: AuthenticationCounts) -> Iterator[Metric]:
    """Kafka's ``successful-authentication-total`` and ``failed-authentication-total``
    (socket-server-metrics, per listener) as Prometheus counters, labelled by listener and
    mechanism: ``kafka_server_socket_server_metrics_{successful,failed}_authentication_total``."""
    for name, help_text, values in (
        (
            "kafka_server_socket_server_metrics_successful_authentication",
            "Connections that authenticated (SASL exchanges completed).",
            counts[0],
        ),
        (
            "kafka_server_socket_server_metrics_failed_authentication",
            "Failed authentications: SASL exchanges refused and TLS handshakes failed "
            "(mechanism SSL).",
            counts[1],
        ),
    ):
        family = CounterMetricFamily(name, help_text, labels=["listener", "mechanism"])
        for (listener, mechanism), value in sorted(values.items()):
            family.add_metric([listener, mechanism], value)
        yield family


class EventLoopLag(Collector):
    """How late a timer on the event loop fires: a ``probe`` task sleeps ``interval_s`` and
    records the overshoot (time spent in callbacks that did not yield)."""

    def __init__(
        self, interval_s: float = 0.25, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._monotonic = monotonic
        self._hist = _Histogram(len(LATENCY_BUCKETS))
        self.max_s = 0.0
        self.last_s = 0.0
        self._task: asyncio.Task[None] | None = None

    def observe(self, lag_s: float) -> None:
        lag_s = max(lag_s, 0.0)
        self.last_s = lag_s
        self.max_s = max(self.max_s, lag_s)
        self._hist.observe(LATENCY_BUCKETS, lag_s)

    async def probe(self) -> None:
        while True:
            before = self._monotonic()
            await asyncio.sleep(self.interval_s)
            self.observe(self._monotonic() - before - self.interval_s)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.probe())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def collect(self) -> Iterator[Metric]:
        hist = HistogramMetricFamily(
            "odradek_event_loop_lag_seconds",
            "How late the event loop ran a timer (a measure of blocking work on the loop).",
        )
        hist.add_metric([], self._hist.cumulative(LATENCY_BUCKETS), sum_value=self._hist.sum)
        yield hist
        yield GaugeMetricFamily(
            "odradek_event_loop_lag_max_seconds", "Largest event-loop lag seen.", value=self.max_s
        )
