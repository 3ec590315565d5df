"""Option parsing and validation for the ``odradek`` Spark data source.

The option names and meanings are those of Spark's own Kafka source and sink
(``format("kafka")``), so that a job moves to ``format("odradek")`` by changing one word.
Spark hands options over case-insensitively (keys arrive lower-cased); every lookup here is
case-insensitive as well.

Everything in this module is pure: no Spark session and no broker are needed, and the parsed
results are small frozen dataclasses that pickle cheaply (they travel to executors).

Offset specifications (``startingOffsets`` / ``endingOffsets``), as in Kafka's source:

* ``"earliest"`` / ``"latest"``, or
* JSON per topic and partition: ``{"topicA": {"0": 23, "1": -2}, "topicB": {"0": -1}}``
  where ``-2`` means earliest and ``-1`` means latest.

Timestamp specifications: ``startingTimestamp`` / ``endingTimestamp`` (milliseconds since the
epoch, one value for every partition) and ``startingOffsetsByTimestamp`` /
``endingOffsetsByTimestamp`` (JSON like the offsets, the values being timestamps).
Precedence is Kafka's: ``*Timestamp`` > ``*OffsetsByTimestamp`` > ``*Offsets``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from odradek.client.avro import REGISTRY_CLIENT_KEYS, SchemaRegistryClient

__all__ = [
    "EARLIEST",
    "LATEST",
    "AvroFormats",
    "OffsetSpec",
    "OptionError",
    "SinkOptions",
    "SourceOptions",
    "parse_duration_ms",
    "parse_sink_options",
    "parse_source_options",
]

EARLIEST = -2
"""Kafka's sentinel for "earliest" in JSON offset specs (and ListOffsets)."""
LATEST = -1
"""Kafka's sentinel for "latest" in JSON offset specs (and ListOffsets)."""

DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in the log any more; either "
    "the data was aged out by retention or the topic may have been deleted before all the data "
    "in the topic was processed. If you want your query to continue in such cases, set the "
    'source option "failOnDataLoss" to "false".'
)


class OptionError(ValueError):
    """An invalid data source option. The message names the option."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start or end reading, per Kafka's source semantics.

    kind:
      * ``"earliest"`` / ``"latest"`` — the same for every partition;
      * ``"offsets"`` — ``per_partition`` maps (topic, partition) to an offset, or to
        ``EARLIEST`` (-2) / ``LATEST`` (-1); partitions not listed are an error at planning
        time for batch queries and start from earliest for streaming ones (new partitions);
      * ``"timestamp"`` — ``timestamp`` applies to every partition;
      * ``"timestamps"`` — ``per_partition`` maps (topic, partition) to a timestamp in ms.
    ``strategy`` (timestamps only): ``"error"`` fails when no record has a timestamp at or
    after the given one, ``"latest"`` uses the latest offset instead.
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    per_partition: tuple[tuple[str, int, int], ...] = ()
    timestamp: int | None = None
    strategy: Literal["error", "latest"] = "error"

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): v for t, p, v in self.per_partition}


@dataclass(frozen=True, slots=True)
class AvroFormats:
    """``key.format`` / ``value.format`` (``raw`` or ``avro``), ``schema.registry.url``, and per
    column the subject (``key.subject`` / ``value.subject``) and schema (``key.schema`` /
    ``value.schema``) when given. ``registry_config``: the registry client's credentials and
    TLS settings, the options ``schema.registry.<key>`` for the keys of
    ``odradek.client.avro.REGISTRY_CLIENT_KEYS`` (``schema.registry.basic.auth.user.info``,
    ``schema.registry.bearer.auth.token``, ``schema.registry.ssl.ca.location``, ...), stored
    without the prefix."""

    key_format: Literal["raw", "avro"] = "raw"
    value_format: Literal["raw", "avro"] = "raw"
    registry_url: str | None = None
    registry_config: tuple[tuple[str, str], ...] = ()
    key_subject: str | None = None
    value_subject: str | None = None
    key_schema: str | None = None
    value_schema: str | None = None

    @property
    def avro_columns(self) -> tuple[str, ...]:
        """The columns in Avro, in schema order (``key`` before ``value``)."""
        return tuple(
            c for c, f in (("key", self.key_format), ("value", self.value_format)) if f == "avro"
        )

    def subject(self, column: str, topics: tuple[str, ...] | None) -> str:
        """The subject of ``column``: given, else TopicNameStrategy ``<topic>-<column>`` for
        a single topic (OptionError otherwise)."""
        given = self.key_subject if column == "key" else self.value_subject
        if given:
            return given
        if topics is None or len(topics) != 1:
            raise OptionError(
                f"option '{column}.subject' is required with '{column}.format' avro unless the "
                "query reads or writes exactly one topic (TopicNameStrategy: <topic>-"
                f"{column})"
            )
        return f"{topics[0]}-{column}"

    def schema(self, column: str) -> str | None:
        return self.key_schema if column == "key" else self.value_schema


_REGISTRY_PREFIX = "schema.registry."
_FORMAT_OPTIONS = {
    "key.format",
    "value.format",
    "schema.registry.url",
    "key.subject",
    "value.subject",
    "key.schema",
    "value.schema",
} | {_REGISTRY_PREFIX + k for k in REGISTRY_CLIENT_KEYS}


def _avro_formats(opts: dict[str, str]) -> AvroFormats:
    formats: dict[str, Literal["raw", "avro"]] = {}
    for column in ("key", "value"):
        text = opts.get(f"{column}.format", "raw").strip().lower()
        if text not in ("raw", "avro"):
            raise OptionError(f"option '{column}.format' must be 'raw' or 'avro', got {text!r}")
        formats[column] = "avro" if text == "avro" else "raw"
    url = opts.get("schema.registry.url", "").strip() or None
    if url is None and "avro" in formats.values():
        raise OptionError(
            "option 'schema.registry.url' is required with key.format/value.format avro "
            '(e.g. .option("schema.registry.url", "http://127.0.0.1:8081"))'
        )
    if url is not None and not re.match(r"https?://", url):
        raise OptionError(f"option 'schema.registry.url' must be an http(s) URL, got {url!r}")
    for column in ("key", "value"):
        for what in ("subject", "schema"):
            name = f"{column}.{what}"
            if name in opts and formats[column] != "avro":
                raise OptionError(f"option '{name}' needs '{column}.format' avro")
            if name in opts and not opts[name].strip():
                raise OptionError(f"option '{name}' must not be empty")
    registry_config = tuple(
        sorted(
            (name[len(_REGISTRY_PREFIX) :], opts[name].strip())
            for name in opts
            if name.startswith(_REGISTRY_PREFIX)
            and name[len(_REGISTRY_PREFIX) :] in REGISTRY_CLIENT_KEYS
            and opts[name].strip()
        )
    )
    if registry_config and url is None:
        raise OptionError(
            f"option '{_REGISTRY_PREFIX}{registry_config[0][0]}' needs 'schema.registry.url'"
        )
    if url is not None:
        try:  # the settings' own errors (a bad credentials source, TLS files) name the option
            SchemaRegistryClient(url, config=dict(registry_config))
        except (ValueError, OSError) as exc:
            raise OptionError(f"schema registry options: {exc}") from None
    return AvroFormats(
        key_format=formats["key"],
        value_format=formats["value"],
        registry_url=url.rstrip("/") if url else None,
        registry_config=registry_config,
        key_subject=opts.get("key.subject", "").strip() or None,
        value_subject=opts.get("value.subject", "").strip() or None,
        key_schema=opts.get("key.schema", "").strip() or None,
        value_schema=opts.get("value.schema", "").strip() or None,
    )


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Parsed, validated source options (picklable; shipped to executors)."""

    client_config: tuple[tuple[str, str], ...]
    """`kafka.*` options with the prefix stripped, e.g. ("bootstrap.servers", "h:9092")."""
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[tuple[str, int], ...] | None = None
    starting: OffsetSpec = field(default_factory=lambda: OffsetSpec("latest"))
    ending: OffsetSpec = field(default_factory=lambda: OffsetSpec("latest"))
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    max_rows_per_batch: int = 100_000
    commit_offsets_to_group: str | None = None
    """``commitOffsetsToGroup``: consumer group the streaming source commits its progress to."""
    formats: AvroFormats = field(default_factory=lambda: AvroFormats())
    """``value.format`` / ``key.format`` and the schema registry (odradek.spark.avro)."""
    mode: Literal["PERMISSIVE", "FAILFAST"] = "PERMISSIVE"
    """``mode``: what an Avro record that does not decode does (Spark's ``mode`` option)."""

    @property
    def config(self) -> dict[str, str]:
        """The client configuration (Java client keys)."""
        return dict(self.client_config)

    @property
    def read_committed(self) -> bool:
        """``kafka.isolation.level`` (default read_committed): read only committed records."""
        return self.config.get("isolation.level") == "read_committed"

    def matches(self, topic: str) -> bool:
        """Whether a topic is part of the subscription (subscribe / subscribePattern)."""
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        assert self.assign is not None
        return any(t == topic for t, _ in self.assign)


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Parsed, validated sink options (picklable; shipped to executors)."""

    client_config: tuple[tuple[str, str], ...]
    topic: str | None = None
    include_headers: bool = True
    exactly_once: bool = True
    commit_topic: str = "__odradek_sink_commits"
    formats: AvroFormats = field(default_factory=lambda: AvroFormats())

    @property
    def config(self) -> dict[str, str]:
        return dict(self.client_config)


# Options of Spark's Kafka source that we accept for compatibility but do not need.
_IGNORED_SOURCE_OPTIONS = {
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
    "groupidprefix",
    "path",
    "checkpointlocation",
}
_KNOWN_SOURCE_OPTIONS = {
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "failondataloss",
    "includeheaders",
    "minpartitions",
    "maxrecordsperpartition",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "maxrowsperbatch",
    "commitoffsetstogroup",
    "mode",
} | _IGNORED_SOURCE_OPTIONS | _FORMAT_OPTIONS

# Kafka consumer/producer settings the Kafka source refuses, with the reason it gives.
_UNSUPPORTED_CONSUMER_KEYS = {
    "auto.offset.reset": "use the source option startingOffsets instead",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "enable.auto.commit": "offsets are tracked by Spark's checkpoint, not committed to the broker",
    "interceptor.classes": "consumer interceptors are not supported",
}
_UNSUPPORTED_PRODUCER_KEYS = {
    "key.serializer": "keys are always written as binary",
    "value.serializer": "values are always written as binary",
}

_DURATION_UNITS_MS = {
    "ms": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def parse_duration_ms(name: str, text: str) -> int:
    """Parse a duration like ``"15m"``, ``"30 seconds"`` or ``"500"`` (ms) into milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m:
        raise OptionError(
            f"option '{name}': invalid duration {text!r} (e.g. '15m', '30s', '500ms')"
        )
    unit = m.group(2).lower() or "ms"
    if unit not in _DURATION_UNITS_MS:
        raise OptionError(f"option '{name}': unknown duration unit {m.group(2)!r} in {text!r}")
    return int(m.group(1)) * _DURATION_UNITS_MS[unit]


def _bool(name: str, text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "false"):
        return t == "true"
    raise OptionError(f"option '{name}' must be 'true' or 'false', got {text!r}")


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {text!r}")
    return value


def _json_per_partition(name: str, text: str) -> tuple[tuple[str, int, int], ...]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option '{name}': invalid JSON {text!r} ({exc.msg}); expected e.g. "
            '{"topicA":{"0":23,"1":-2}}'
        ) from None
    if not isinstance(data, dict) or not data:
        raise OptionError(
            f"option '{name}': expected a JSON object of topics, e.g. "
            f'{{"topicA":{{"0":23,"1":-2}}}}, got {text!r}'
        )
    out: list[tuple[str, int, int]] = []
    for topic, parts in data.items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(
                f"option '{name}': topic {topic!r} must map partitions to values, got {parts!r}"
            )
        for p, v in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option '{name}': partition {p!r} of topic {topic!r} is not an integer"
                ) from None
            if isinstance(v, bool) or not isinstance(v, int):
                raise OptionError(
                    f"option '{name}': value for {topic}-{partition} must be an integer, got {v!r}"
                )
            out.append((str(topic), partition, v))
    return tuple(sorted(out))


def _timestamp(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(
            f"option '{name}' must be a timestamp in milliseconds since the epoch, got {text!r}"
        ) from None
    if value < 0:
        raise OptionError(f"option '{name}' must not be negative, got {text!r}")
    return value


def _offset_spec(
    opts: dict[str, str],
    prefix: Literal["starting", "ending"],
    *,
    default: Literal["earliest", "latest"],
    streaming: bool,
) -> OffsetSpec:
    ts_name = f"{prefix}Timestamp"
    by_ts_name = f"{prefix}OffsetsByTimestamp"
    off_name = f"{prefix}Offsets"
    strategy_text = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_text not in ("error", "latest"):
        raise OptionError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"got {strategy_text!r}"
        )
    strategy: Literal["error", "latest"] = "latest" if strategy_text == "latest" else "error"
    if ts_name.lower() in opts:
        return OffsetSpec(
            "timestamp", timestamp=_timestamp(ts_name, opts[ts_name.lower()]), strategy=strategy
        )
    if by_ts_name.lower() in opts:
        per = _json_per_partition(by_ts_name, opts[by_ts_name.lower()])
        for t, p, v in per:
            if v < 0:
                raise OptionError(
                    f"option '{by_ts_name}': timestamp for {t}-{p} must not be negative, got {v}"
                )
        return OffsetSpec("timestamps", per_partition=per, strategy=strategy)
    text = opts.get(off_name.lower())
    if text is None:
        return OffsetSpec(default)
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if prefix == "ending" and word == "earliest":
            raise OptionError(f"option '{off_name}': 'earliest' is not allowed for endingOffsets")
        if prefix == "starting" and word == "latest" and not streaming:
            raise OptionError(
                f"option '{off_name}': 'latest' is not allowed for startingOffsets in batch queries"
            )
        return OffsetSpec("earliest" if word == "earliest" else "latest")
    per = _json_per_partition(off_name, text)
    for t, p, v in per:
        if v < EARLIEST:
            raise OptionError(f"option '{off_name}': offset {v} for {t}-{p} is not valid")
        if prefix == "ending" and v == EARLIEST:
            raise OptionError(
                f"option '{off_name}': earliest (-2) is not allowed as ending offset for {t}-{p}"
            )
        if prefix == "starting" and v == LATEST and not streaming:
            raise OptionError(
                f"option '{off_name}': latest (-1) is not allowed as starting offset for {t}-{p} "
                "in batch queries"
            )
    return OffsetSpec("offsets", per_partition=per)


def _client_config(
    opts: dict[str, str], unsupported: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    config: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith("kafka."):
            name = key[len("kafka.") :]
            if name in unsupported:
                raise OptionError(f"option 'kafka.{name}' is not supported: {unsupported[name]}")
            config[name] = value
    if not config.get("bootstrap.servers", "").strip():
        raise OptionError(
            "option 'kafka.bootstrap.servers' is required (e.g. .option(\"kafka.bootstrap.servers\","
            ' "127.0.0.1:9092"))'
        )
    return tuple(sorted(config.items()))


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate source options; raise OptionError naming the first bad option.

    ``streaming`` selects the defaults of Kafka's source: batch queries start at earliest and
    end at latest; streaming queries start at latest and have no end (``endingOffsets`` and
    ``endingTimestamp`` are refused). ``None`` (used by ``DataSource.schema()`` at ``load()``,
    before Spark says which kind of query it is) checks everything except the rules that
    differ between batch and streaming; the reader re-checks with the real mode.
    """
    opts = _lower(options)
    for key in opts:
        if not key.startswith("kafka.") and key not in _KNOWN_SOURCE_OPTIONS:
            raise OptionError(f"option '{key}' is not a known option of the odradek source")
    config = _client_config(opts, _UNSUPPORTED_CONSUMER_KEYS)
    isolation = dict(config).get("isolation.level", "read_committed").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise OptionError(
            "option 'kafka.isolation.level' must be read_committed (the default) or "
            f"read_uncommitted, got {isolation!r}"
        )
    config = tuple(sorted({**dict(config), "isolation.level": isolation}.items()))
    group = opts.get("commitoffsetstogroup")
    if group is not None:
        group = group.strip()
        if not group:
            raise OptionError("option 'commitOffsetsToGroup' must not be empty")
        if streaming is False:
            raise OptionError("option 'commitOffsetsToGroup' is only applicable to streaming queries")

    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        names = {
            "subscribe": "subscribe",
            "subscribepattern": "subscribePattern",
            "assign": "assign",
        }
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be given"
            + (f"; got {', '.join(repr(names[c]) for c in chosen)}" if chosen else "")
        )
    subscribe = subscribe_pattern = assign = None
    if "subscribe" in opts:
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' must list at least one topic")
        subscribe = topics
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise OptionError("option 'subscribePattern' must not be empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(
                f"option 'subscribePattern': invalid pattern {pattern!r}: {exc}"
            ) from None
        subscribe_pattern = pattern
    else:
        try:
            data = json.loads(opts["assign"])
        except json.JSONDecodeError:
            data = None
        if (
            not isinstance(data, dict)
            or not data
            or not all(
                isinstance(ps, list)
                and all(isinstance(p, int) and not isinstance(p, bool) for p in ps)
                for ps in data.values()
            )
        ):
            raise OptionError(
                'option \'assign\' must be JSON like {"topicA":[0,1],"topicB":[2,4]}, '
                f"got {opts['assign']!r}"
            )
        assign = tuple(sorted({(str(t), int(p)) for t, ps in data.items() for p in ps}))
        if not assign:
            raise OptionError("option 'assign' must name at least one partition")

    if streaming is True:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise OptionError(f"option '{name}' is not applicable to streaming queries")
    starting = _offset_spec(
        opts,
        "starting",
        default="latest" if streaming else "earliest",
        streaming=streaming is not False,
    )
    ending = (
        OffsetSpec("latest")
        if streaming
        else _offset_spec(opts, "ending", default="latest", streaming=streaming is not False)
    )
    if streaming is False:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                # Kafka's source ignores these in batch queries; refusing them is kinder.
                raise OptionError(f"option '{name}' is only applicable to streaming queries")

    max_opt = opts.get("maxoffsetspertrigger")
    min_opt = opts.get("minoffsetspertrigger")
    max_per = _positive_int("maxOffsetsPerTrigger", max_opt) if max_opt is not None else None
    min_per = _positive_int("minOffsetsPerTrigger", min_opt) if min_opt is not None else None
    if max_per is not None and min_per is not None and min_per > max_per:
        raise OptionError(
            f"option 'minOffsetsPerTrigger' ({min_per}) must not exceed 'maxOffsetsPerTrigger' "
            f"({max_per})"
        )
    delay = opts.get("maxtriggerdelay")
    formats = _avro_formats(opts)
    mode = opts.get("mode", "PERMISSIVE").strip().upper()
    if mode not in ("PERMISSIVE", "FAILFAST"):
        raise OptionError(f"option 'mode' must be PERMISSIVE or FAILFAST, got {opts['mode']!r}")
    if "mode" in opts and not formats.avro_columns:
        raise OptionError("option 'mode' needs 'value.format' or 'key.format' avro")
    avro_topics: tuple[str, ...] | None = subscribe
    if assign is not None:
        avro_topics = tuple(sorted({t for t, _ in assign}))
    for column in formats.avro_columns:
        formats.subject(column, avro_topics)  # OptionError when it cannot be known
    return SourceOptions(
        client_config=config,
        subscribe=subscribe,
        subscribe_pattern=subscribe_pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        min_partitions=(
            _positive_int("minPartitions", opts["minpartitions"])
            if "minpartitions" in opts
            else None
        ),
        max_records_per_partition=(
            _positive_int("maxRecordsPerPartition", opts["maxrecordsperpartition"])
            if "maxrecordsperpartition" in opts
            else None
        ),
        max_offsets_per_trigger=max_per,
        min_offsets_per_trigger=min_per,
        max_trigger_delay_ms=(
            parse_duration_ms("maxTriggerDelay", delay) if delay is not None else 15 * 60 * 1000
        ),
        max_rows_per_batch=(
            _positive_int("maxRowsPerBatch", opts["maxrowsperbatch"])
            if "maxrowsperbatch" in opts
            else 100_000
        ),
        commit_offsets_to_group=group,
        formats=formats,
        mode="FAILFAST" if mode == "FAILFAST" else "PERMISSIVE",
    )


_KNOWN_SINK_OPTIONS = {
    "topic",
    "includeheaders",
    "exactlyonce",
    "committopic",
    "path",
    "checkpointlocation",
} | _FORMAT_OPTIONS


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate sink options; raise OptionError naming the first bad option.

    ``topic`` (optional) overrides the ``topic`` column. ``exactlyOnce`` (streaming only,
    default true) turns the replay fence on (docs/spark.md); ``commitTopic`` names the topic
    holding the fence's markers (default ``__odradek_sink_commits``).
    """
    opts = _lower(options)
    for key in opts:
        if not key.startswith("kafka.") and key not in _KNOWN_SINK_OPTIONS:
            raise OptionError(f"option '{key}' is not a known option of the odradek sink")
    config = _client_config(opts, _UNSUPPORTED_PRODUCER_KEYS)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' must not be empty")
    commit_topic = opts.get("committopic", "__odradek_sink_commits").strip()
    if not commit_topic:
        raise OptionError("option 'commitTopic' must not be empty")
    formats = _avro_formats(opts)
    for column in formats.avro_columns:
        if formats.schema(column) == "latest":
            formats.subject(column, None if topic is None else (topic.strip(),))
    return SinkOptions(
        formats=formats,
        client_config=config,
        topic=topic.strip() if topic is not None else None,
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "true")),
        exactly_once=_bool("exactlyOnce", opts.get("exactlyonce", "true")),
        commit_topic=commit_topic,
    )
