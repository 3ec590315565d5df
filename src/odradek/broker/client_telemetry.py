"""Client telemetry (KIP-714): the subscriptions clients ask for, the pushes they send, and the
latest value of every metric each client instance pushed (Kafka's ``ClientMetricsManager``).

Subscriptions are Kafka's client-metrics resources (ConfigResource type CLIENT_METRICS, 16;
stored as the config entities of type ``client-metrics``, Kafka's ``/config/client-metrics/<name>``),
each with the keys

* ``metrics``: comma-separated metric name prefixes (``org.apache.kafka.producer.``); ``*`` is
  every metric; empty is none (the resource still sets the interval of the clients it matches);
* ``interval.ms``: the push interval (100 to 3600000; default 300000);
* ``match``: comma-separated ``selector=regex`` pairs, every one of which must match the whole
  client attribute: ``client_instance_id``, ``client_id``, ``client_software_name``,
  ``client_software_version``, ``client_source_address``, ``client_source_port`` (empty: every
  client). The software name and version are not known to this broker (they travel in
  ApiVersions, which is answered before a connection is tied to a client instance): a
  selector on them never matches.

A client's subscription is the union of the prefixes of every resource matching it, at the
shortest of their intervals (Kafka's rule). When no client-metrics resource is configured at
all, ``DEFAULT_SUBSCRIPTION`` applies (an odradek default: Kafka subscribes no metric until
one is configured): every ``org.apache.kafka.producer.`` and ``org.apache.kafka.consumer.``
metric every 30 s, so that librdkafka (``enable.metrics.push`` is on by default) and Java
clients push without setup. One resource with an empty ``metrics`` turns pushing off.

Requests, as Kafka 3.9 answers them:

* GetTelemetrySubscriptions: a zero (or null) client instance id gets a new random id; the
  answer carries the subscription id (a CRC-32C of the prefixes, the interval and the
  instance id), the requested metric prefixes (``*`` alone for every metric, none when no
  subscription matches), the accepted compression types (zstd, lz4, gzip, snappy), the
  interval (the shortest of the matching subscriptions', at most 300000), ``telemetry.max.bytes``
  and delta temporality (true). Asking again before one push interval has passed since the
  last request of that instance: THROTTLING_QUOTA_EXCEEDED (89), except right after a push
  refused with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
* PushTelemetry: the reserved ids (zero, one) are INVALID_REQUEST (42); after a push with
  ``terminating`` every further push is INVALID_REQUEST; a push sooner than one interval after
  the previous one (the first push after a GetTelemetrySubscriptions is always accepted,
  clients jitter their interval) is THROTTLING_QUOTA_EXCEEDED unless terminating; a
  subscription id other than the instance's current one (the subscriptions changed, or the
  broker restarted) is UNKNOWN_SUBSCRIPTION_ID (117); an unknown compression type
  UNSUPPORTED_COMPRESSION_TYPE (76); a payload over ``telemetry.max.bytes``
  TELEMETRY_TOO_LARGE (118); a payload that does not decompress or is not an OTLP
  ``MetricsData`` protobuf INVALID_RECORD (87).

Decoded pushes are kept per instance as the latest value of each metric (gauges as given;
sums: cumulative as given, delta added to what was held; histograms and summaries as their
mean), one value per metric name: several data points of one name (per node, say) are
combined (``.max`` names by their maximum, sums by their total, others by their mean). At most
``MAX_INSTANCES`` instances and ``MAX_METRICS_PER_INSTANCE`` names each are held, so the
series exported from here stay bounded; an instance not heard from for three push intervals
(at least a minute) is dropped, as is one that pushed ``terminating``, once its interval has
passed. Not thread-safe: the broker's event loop calls it. Time comes from the injected clock.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import crc32c
from kio.schema.errors import ErrorCode

from odradek.broker.config_store import ConfigEntityStore
from odradek.clock import Clock
from odradek.protocol.records import decompress

__all__ = [
    "ACCEPTED_COMPRESSION_TYPES",
    "CLIENT_METRICS",
    "CLIENT_METRICS_ENTITY",
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_SUBSCRIPTION",
    "DEFAULT_TELEMETRY_MAX_BYTES",
    "DYNAMIC_CLIENT_METRICS_CONFIG",
    "MATCH_SELECTORS",
    "MAX_INSTANCES",
    "MAX_METRICS_PER_INSTANCE",
    "ClientInstanceView",
    "ClientMetricsSubscription",
    "ClientTelemetryManager",
    "MetricPoint",
    "PushOutcome",
    "SubscriptionAnswer",
    "TelemetryDecodeError",
    "decode_metrics_data",
    "decoder_loaded",
    "load_decoder",
    "parse_subscription",
]

CLIENT_METRICS = 16
"""The CLIENT_METRICS config resource type (DescribeConfigs, IncrementalAlterConfigs)."""
DYNAMIC_CLIENT_METRICS_CONFIG = 7
"""Kafka's ConfigSource of a client-metrics resource's configs (DescribeConfigs)."""
CLIENT_METRICS_ENTITY = "client-metrics"
"""The config entity type of client-metrics resources (Kafka's ``/config/client-metrics``)."""
DEFAULT_INTERVAL_MS = 300_000
"""``interval.ms`` when a resource does not set it, and the interval of a client that no
subscription matches (Kafka's ``ClientMetricsConfigs.DEFAULT_INTERVAL_MS``)."""
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
DEFAULT_TELEMETRY_MAX_BYTES = 1_048_576
"""Kafka's ``telemetry.max.bytes`` default."""
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
"""zstd, lz4, gzip, snappy: Kafka's order of preference (none, 0, is always accepted)."""
MATCH_SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
MAX_INSTANCES = 16_384
"""Client instances held at most (Kafka's instance cache size); the least recent goes first."""
MAX_METRICS_PER_INSTANCE = 512
"""Metric names held per instance at most; names past it are ignored."""
MIN_EXPIRY_MS = 60_000
EXPIRY_CHECK_MS = 1_000
ALL_METRICS = "*"


class TelemetryDecodeError(ValueError):
    """A push whose payload does not decompress or is not an OTLP MetricsData (INVALID_RECORD)."""


@dataclass(frozen=True, slots=True)
class ClientMetricsSubscription:
    """One client-metrics resource: its name, metric prefixes, interval and match patterns."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int = DEFAULT_INTERVAL_MS
    match: tuple[tuple[str, re.Pattern[str]], ...] = ()

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return all(
            sel in attributes and pattern.fullmatch(attributes[sel]) is not None
            for sel, pattern in self.match
        )


DEFAULT_SUBSCRIPTION = ClientMetricsSubscription(
    "default", ("org.apache.kafka.producer.", "org.apache.kafka.consumer."), 30_000
)
"""What clients are asked for while no client-metrics resource is configured."""


def parse_subscription(name: str, configs: Mapping[str, str | None]) -> ClientMetricsSubscription:
    """The resource ``name`` from its stored configs; ValueError names a bad key or value."""
    unknown = sorted(set(configs) - {"metrics", "interval.ms", "match"})
    if unknown:
        raise ValueError(f"unknown client-metrics config: {', '.join(unknown)}")
    metrics = tuple(m.strip() for m in (configs.get("metrics") or "").split(",") if m.strip())
    raw_interval = configs.get("interval.ms")
    try:
        interval = DEFAULT_INTERVAL_MS if raw_interval in (None, "") else int(str(raw_interval))
    except ValueError:
        raise ValueError(f"interval.ms: not an integer: {raw_interval}") from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ValueError(
            f"interval.ms: {interval} is not in [{MIN_INTERVAL_MS}, {MAX_INTERVAL_MS}]"
        )
    match: list[tuple[str, re.Pattern[str]]] = []
    for pair in (configs.get("match") or "").split(","):
        if not pair.strip():
            continue
        selector, sep, pattern = pair.partition("=")
        selector = selector.strip()
        if not sep or selector not in MATCH_SELECTORS:
            raise ValueError(f"match: {pair.strip()!r} is not selector=regex")
        try:
            match.append((selector, re.compile(pattern.strip())))
        except re.error as exc:
            raise ValueError(f"match: bad regex for {selector}: {exc}") from None
    return ClientMetricsSubscription(name, metrics, interval, tuple(match))


class MetricPoint(NamedTuple):
    """One data point of a pushed metric: its name, kind, value and attributes."""

    name: str
    kind: str  # gauge | sum | histogram | summary
    value: float
    delta: bool
    attributes: tuple[tuple[str, str], ...]


def _attr_value(value: Any) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


_decoder_loaded = False


def decoder_loaded() -> bool:
    """Whether opentelemetry-proto's modules are imported (~30 ms the first time)."""
    return _decoder_loaded


def load_decoder() -> None:
    """Import the OTLP protobuf modules (the broker does it in a worker thread, once, before
    the first push is decoded on its event loop)."""
    global _decoder_loaded
    from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: F401

    _decoder_loaded = True


def decode_metrics_data(payload: bytes) -> list[MetricPoint]:
    """The data points of an OTLP ``MetricsData`` protobuf (opentelemetry-proto's
    ``metrics_pb2``); TelemetryDecodeError when it does not parse."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(payload)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise TelemetryDecodeError(f"not an OTLP MetricsData: {exc}") from None
    delta = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    out: list[MetricPoint] = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    body = getattr(metric, kind)
                    is_delta = kind == "sum" and body.aggregation_temporality == delta
                    for p in body.data_points:
                        value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                        attrs = tuple((a.key, _attr_value(a.value)) for a in p.attributes)
                        out.append(MetricPoint(metric.name, kind, float(value), is_delta, attrs))
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    for p in getattr(metric, kind).data_points:
                        mean = p.sum / p.count if p.count else 0.0
                        attrs = tuple((a.key, _attr_value(a.value)) for a in p.attributes)
                        out.append(MetricPoint(metric.name, kind, mean, False, attrs))
    return out


class SubscriptionAnswer(NamedTuple):
    """What GetTelemetrySubscriptions answers (``error`` NONE or THROTTLING_QUOTA_EXCEEDED)."""

    error: ErrorCode
    client_instance_id: uuid.UUID
    subscription_id: int
    requested_metrics: tuple[str, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    accepted_compression_types: tuple[int, ...] = ACCEPTED_COMPRESSION_TYPES
    delta_temporality: bool = True


class PushOutcome(NamedTuple):
    error: ErrorCode
    message: str | None = None


class ClientInstanceView(NamedTuple):
    """One client instance as the metrics and the console see it."""

    client_instance_id: str
    client_id: str
    client_address: str
    subscription_id: int
    push_interval_ms: int
    last_push_ms: int
    pushes: int
    metrics: tuple[tuple[str, float], ...]
    """(metric name, latest value), by name."""


@dataclass(slots=True)
class _Instance:
    instance_id: uuid.UUID
    client_id: str
    address: str
    subscription_id: int = 0
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_seen_ms: int = 0
    terminating: bool = False
    pushes: int = 0
    last_error: ErrorCode = ErrorCode.none
    points: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[str, float]] = field(
        default_factory=dict
    )


_RESERVED = (uuid.UUID(int=0), uuid.UUID(int=1))
_ASK_AGAIN_AT_ONCE = (ErrorCode.unknown_subscription_id, ErrorCode.unsupported_compression_type)
"""A push refused with these makes the client ask for its subscription again at once: that
GetTelemetrySubscriptions is not throttled (Kafka's stated intent; its 3.9 condition, an
``a != X || a != Y``, throttles it anyway, and the client then waits one interval)."""


def _subscription_id(metrics: Sequence[str], interval_ms: int, instance: uuid.UUID) -> int:
    text = f"{','.join(metrics)}|{interval_ms}|{instance}".encode()
    value: int = crc32c.crc32c(text)
    return value - (1 << 32) if value >= 1 << 31 else value


def _combine(name: str, values: list[tuple[str, float]]) -> float:
    if len(values) == 1:
        return values[0][1]
    numbers = [v for _, v in values]
    if name.endswith(".max"):
        return max(numbers)
    if values[0][0] == "sum":
        return sum(numbers)
    return sum(numbers) / len(numbers)


class ClientTelemetryManager:
    """Subscriptions, instances and their latest metrics (see the module docstring).

    ``store`` holds the client-metrics resources (its ``client-metrics`` entities; None: none
    can be configured); ``max_bytes()`` returns the current ``telemetry.max.bytes``.
    """

    def __init__(
        self,
        clock: Clock,
        store: ConfigEntityStore | None = None,
        max_bytes: Callable[[], int] = lambda: DEFAULT_TELEMETRY_MAX_BYTES,
    ) -> None:
        self.clock = clock
        self.store = store
        self._subscriptions: Callable[[], Mapping[str, Mapping[str, str]]] = (
            dict if store is None else lambda: store.entities(CLIENT_METRICS_ENTITY)
        )
        self._max_bytes = max_bytes
        self._instances: dict[uuid.UUID, _Instance] = {}
        self._last_expiry_ms = -EXPIRY_CHECK_MS
        self.unknown_subscription_requests = 0
        self.throttled_requests = 0
        self.pushes = 0
        self.decode_errors = 0

    # -- subscriptions ---------------------------------------------------------------------------

    def describe(self, name: str) -> list[tuple[str, str]]:
        """A client-metrics resource's stored configs, by key (DescribeConfigs)."""
        stored = self.store.entity_config(CLIENT_METRICS_ENTITY, name) if self.store else {}
        return sorted(stored.items())

    async def alter(self, name: str, configs: Mapping[str, str], validate_only: bool) -> None:
        """Replace a client-metrics resource's configs (an empty map removes it); ValueError
        when a key or value is invalid or the name empty (nothing stored then)."""
        if not name:
            raise ValueError("Subscription name can't be empty")
        parse_subscription(name, configs)
        if self.store is None:
            raise ValueError("client-metrics resources cannot be stored here")
        if not validate_only:
            await self.store.change_entity_config(CLIENT_METRICS_ENTITY, name, dict(configs))

    def list_client_metrics_resources(self) -> list[str]:
        """The name of every client-metrics resource that exists (one with at least one config
        stored, parsable or not), sorted (ListClientMetricsResources; Kafka's
        ``ClientMetricsManager.listClientMetricsResources``)."""
        return sorted(self._subscriptions())

    def configured(self) -> list[ClientMetricsSubscription]:
        """The client-metrics resources in force (``DEFAULT_SUBSCRIPTION`` when none is
        configured); a stored resource that does not parse is skipped."""
        stored = self._subscriptions()
        if not stored:
            return [DEFAULT_SUBSCRIPTION]
        out = []
        for name, configs in sorted(stored.items()):
            try:
                out.append(parse_subscription(name, configs))
            except ValueError:
                continue
        return out

    def _subscription_for(self, inst: _Instance) -> tuple[tuple[str, ...], int]:
        attributes = {
            "client_instance_id": str(inst.instance_id),
            "client_id": inst.client_id,
            "client_source_address": inst.address,
        }
        prefixes: list[str] = []
        interval = DEFAULT_INTERVAL_MS
        for sub in self.configured():
            if not sub.matches(attributes):
                continue
            for m in sub.metrics:
                if m not in prefixes:
                    prefixes.append(m)
            interval = min(interval, sub.interval_ms)
        if ALL_METRICS in prefixes:
            prefixes = [ALL_METRICS]  # Kafka answers "*" alone for every metric
        return tuple(sorted(prefixes)), interval

    def _instance(self, instance_id: uuid.UUID, client_id: str, address: str) -> _Instance:
        """The cached instance, created (or renewed with a new subscription id and fresh
        timestamps, as Kafka does) when the subscriptions that match it changed."""
        inst = self._instances.pop(instance_id, None)  # re-inserted last: least recent first
        if inst is None:
            inst = _Instance(instance_id, client_id, address)
            while len(self._instances) >= MAX_INSTANCES:
                del self._instances[next(iter(self._instances))]
        else:
            inst.client_id, inst.address = client_id, address
        self._instances[instance_id] = inst
        metrics, interval = self._subscription_for(inst)
        if inst.subscription_id == 0 or (metrics, interval) != (inst.metrics, inst.interval_ms):
            inst.metrics, inst.interval_ms = metrics, interval
            inst.subscription_id = _subscription_id(metrics, interval, instance_id)
            inst.last_get_ms = inst.last_push_ms = 0
            inst.terminating = False
        return inst

    # -- requests --------------------------------------------------------------------------------

    def get_subscriptions(
        self, client_instance_id: uuid.UUID | None, client_id: str, address: str
    ) -> SubscriptionAnswer:
        now = self.clock.now_ms()
        self.expire(now)
        instance_id = client_instance_id
        if instance_id is None or instance_id == _RESERVED[0]:
            instance_id = uuid.uuid4()
            while instance_id in _RESERVED or instance_id in self._instances:
                instance_id = uuid.uuid4()
        inst = self._instance(instance_id, client_id, address)
        inst.last_seen_ms = now
        error = ErrorCode.none
        if now - max(inst.last_get_ms, inst.last_push_ms) >= inst.interval_ms or (
            inst.last_error in _ASK_AGAIN_AT_ONCE
        ):
            inst.last_get_ms = now
            inst.last_error = ErrorCode.none
        else:
            error = inst.last_error = ErrorCode.throttling_quota_exceeded
            self.throttled_requests += 1
        return SubscriptionAnswer(
            error,
            instance_id,
            inst.subscription_id,
            inst.metrics,
            inst.interval_ms,
            self._max_bytes(),
        )

    def push(
        self,
        client_instance_id: uuid.UUID | None,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        payload: bytes,
        client_id: str,
        address: str,
    ) -> PushOutcome:
        if client_instance_id is None or client_instance_id in _RESERVED:
            return PushOutcome(
                ErrorCode.invalid_request,
                f"Invalid request from the client [{client_instance_id}], invalid client "
                "instance id",
            )
        now = self.clock.now_ms()
        self.expire(now)
        inst = self._instance(client_instance_id, client_id, address)
        inst.last_seen_ms = now
        outcome = self._validate_push(
            inst, subscription_id, terminating, compression_type, payload, now
        )
        inst.terminating = inst.terminating or terminating
        if outcome is not None:
            inst.last_error = outcome.error
            return outcome
        if payload:
            try:
                points = self._decode(compression_type, payload)
            except TelemetryDecodeError as exc:
                self.decode_errors += 1
                inst.last_error = ErrorCode.invalid_record
                return PushOutcome(ErrorCode.invalid_record, str(exc))
            self._record(inst, points)
        inst.pushes += 1
        self.pushes += 1
        inst.last_error = ErrorCode.none
        return PushOutcome(ErrorCode.none)

    def _validate_push(
        self,
        inst: _Instance,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        payload: bytes,
        now: int,
    ) -> PushOutcome | None:
        if inst.terminating:
            return PushOutcome(
                ErrorCode.invalid_request,
                f"Client [{inst.instance_id}] sent the previous request with state terminating "
                "to TRUE, can not accept any requests after that",
            )
        # the first push after GetTelemetrySubscriptions is accepted at once (clients jitter)
        accept = inst.last_get_ms > inst.last_push_ms or now - inst.last_push_ms >= inst.interval_ms
        if accept:
            inst.last_push_ms = now
        elif not terminating:
            self.throttled_requests += 1
            return PushOutcome(
                ErrorCode.throttling_quota_exceeded,
                f"Request from the client [{inst.instance_id}] arrived before the throttle time",
            )
        if subscription_id != inst.subscription_id:
            self.unknown_subscription_requests += 1
            return PushOutcome(
                ErrorCode.unknown_subscription_id,
                f"Unknown client subscription id for the client [{inst.instance_id}]",
            )
        if compression_type != 0 and compression_type not in ACCEPTED_COMPRESSION_TYPES:
            return PushOutcome(
                ErrorCode.unsupported_compression_type,
                f"Unknown compression type [{compression_type}] received for telemetry request "
                f"from [{inst.instance_id}]",
            )
        max_bytes = self._max_bytes()
        if len(payload) > max_bytes:
            return PushOutcome(
                ErrorCode.telemetry_too_large,
                f"Telemetry request from [{inst.instance_id}] is larger than the maximum "
                f"allowed size [{max_bytes}]",
            )
        return None

    def _decode(self, compression_type: int, payload: bytes) -> list[MetricPoint]:
        try:
            raw = decompress(compression_type, payload) if compression_type else payload
        except ValueError as exc:
            raise TelemetryDecodeError(f"payload does not decompress: {exc}") from None
        if len(raw) > 64 * max(self._max_bytes(), 1):
            raise TelemetryDecodeError("payload decompresses to more than 64 x telemetry.max.bytes")
        return decode_metrics_data(raw)

    @staticmethod
    def _record(inst: _Instance, points: Iterable[MetricPoint]) -> None:
        held = inst.points
        names = {name for name, _ in held}
        for p in points:
            key = (p.name, p.attributes)
            if key not in held and p.name not in names:
                if len(names) >= MAX_METRICS_PER_INSTANCE:
                    continue
                names.add(p.name)
            if p.delta and key in held:
                held[key] = (p.kind, held[key][1] + p.value)
            else:
                held[key] = (p.kind, p.value)

    # -- reading back ----------------------------------------------------------------------------

    def expire(self, now_ms: int | None = None) -> None:
        """Drop the instances not heard from for three push intervals (at least a minute), and
        terminated ones once their interval has passed."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        if now - self._last_expiry_ms < EXPIRY_CHECK_MS:
            return  # one scan a second at most: a push costs O(1), not O(instances)
        self._last_expiry_ms = now
        gone = [
            key
            for key, inst in self._instances.items()
            if now - inst.last_seen_ms > max(3 * inst.interval_ms, MIN_EXPIRY_MS)
            or (inst.terminating and now - inst.last_seen_ms > inst.interval_ms)
        ]
        for key in gone:
            del self._instances[key]

    def instances(self) -> list[ClientInstanceView]:
        """Every live instance that has pushed metrics, by client id and instance id."""
        self.expire()
        out = []
        for inst in self._instances.values():
            if not inst.points:
                continue
            by_name: dict[str, list[tuple[str, float]]] = {}
            for (name, _attrs), value in inst.points.items():
                by_name.setdefault(name, []).append(value)
            metrics = tuple(sorted((n, _combine(n, v)) for n, v in by_name.items()))
            out.append(
                ClientInstanceView(
                    str(inst.instance_id),
                    inst.client_id,
                    inst.address,
                    inst.subscription_id,
                    inst.interval_ms,
                    inst.last_push_ms,
                    inst.pushes,
                    metrics,
                )
            )
        out.sort(key=lambda v: (v.client_id, v.client_instance_id))
        return out

    def instance_count(self) -> int:
        self.expire()
        return len(self._instances)
