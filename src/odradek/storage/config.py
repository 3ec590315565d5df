"""Per-log configuration with Kafka's names, defaults and bounds.

Every field has a topic-level key (``segment.bytes``) and a broker-level default key
(``log.segment.bytes``), exactly as Kafka spells them:

=========================  ===============================  ===========================  =================
field                      topic key                        broker key                   default
=========================  ===============================  ===========================  =================
segment_bytes              segment.bytes                    log.segment.bytes            1 GiB
segment_ms                 segment.ms                       log.roll.ms / log.roll.hours 7 days
retention_ms               retention.ms                     log.retention.ms/.minutes/   7 days (-1 = no
                                                            .hours                       limit)
retention_bytes            retention.bytes                  log.retention.bytes          -1 (no limit)
index_interval_bytes       index.interval.bytes             log.index.interval.bytes     4096
segment_index_bytes        segment.index.bytes              log.index.size.max.bytes     10 MiB
max_message_bytes          max.message.bytes                message.max.bytes            1048588
flush_interval_messages    flush.messages                   log.flush.interval.messages  Long.MAX (never)
flush_interval_ms          flush.ms                         log.flush.interval.ms        Long.MAX (never)
cleanup_policy             cleanup.policy                   log.cleanup.policy           delete
message_timestamp_type     message.timestamp.type           log.message.timestamp.type   CreateTime
file_delete_delay_ms       file.delete.delay.ms             log.segment.delete.delay.ms  60000
delete_retention_ms        delete.retention.ms              log.cleaner.delete.retention 1 day
                                                            .ms
min_compaction_lag_ms      min.compaction.lag.ms            log.cleaner.min.compaction   0
                                                            .lag.ms
max_compaction_lag_ms      max.compaction.lag.ms            log.cleaner.max.compaction   Long.MAX
                                                            .lag.ms
min_cleanable_dirty_ratio  min.cleanable.dirty.ratio        log.cleaner.min.cleanable    0.5
                                                            .ratio
=========================  ===============================  ===========================  =================

The last four drive the log cleaner (``odradek.storage.cleaner``) on ``cleanup.policy=compact``.

With the default flush policy odradek never calls fsync on its own: the OS writes the page cache
back, and replication (later) provides durability, as in Kafka. ``flush()`` is always available.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.storage.errors import InvalidConfigError

__all__ = ["INT_MAX", "LOG_TOPIC_KEYS", "LONG_MAX", "LogConfig"]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_DAY_MS = 24 * 60 * 60 * 1000

# Topic-level keys Kafka accepts that the storage layer does not act on (yet). They are
# accepted and ignored by from_topic_config so that a Kafka topic config round-trips.
_IGNORED_TOPIC_KEYS = frozenset(
    {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Configuration of one partition log (immutable; build a new one to change it)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    max_message_bytes: int = 1048588
    flush_interval_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    message_timestamp_type: str = "CreateTime"
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    # Derived once in __post_init__ (read on every append: plain attributes, not properties).
    compact: bool = dataclasses.field(init=False, repr=False, compare=False)
    """True when ``cleanup.policy`` contains ``compact`` (the log cleaner applies)."""
    delete_enabled: bool = dataclasses.field(init=False, repr=False, compare=False)
    """True when ``cleanup.policy`` contains ``delete`` (retention applies)."""
    log_append_time: bool = dataclasses.field(init=False, repr=False, compare=False)
    """True when ``message.timestamp.type=LogAppendTime``."""
    max_segment_ms: int = dataclasses.field(init=False, repr=False, compare=False)
    """The active segment's age at which it rolls: ``segment.ms``, or
    ``max.compaction.lag.ms`` when smaller on a compacted log (as in Kafka), so that old data
    leaves the active segment and becomes cleanable (and deletable)."""

    # topic key -> (field, minimum, maximum)
    _TOPIC_KEYS = {
        "segment.bytes": ("segment_bytes", 14, INT_MAX),
        "segment.ms": ("segment_ms", 1, LONG_MAX),
        "retention.ms": ("retention_ms", -1, LONG_MAX),
        "retention.bytes": ("retention_bytes", -1, LONG_MAX),
        "index.interval.bytes": ("index_interval_bytes", 0, INT_MAX),
        "segment.index.bytes": ("segment_index_bytes", 4, INT_MAX),
        "max.message.bytes": ("max_message_bytes", 0, INT_MAX),
        "flush.messages": ("flush_interval_messages", 1, LONG_MAX),
        "flush.ms": ("flush_interval_ms", 0, LONG_MAX),
        "cleanup.policy": ("cleanup_policy", None, None),
        "message.timestamp.type": ("message_timestamp_type", None, None),
        "file.delete.delay.ms": ("file_delete_delay_ms", 0, LONG_MAX),
        "delete.retention.ms": ("delete_retention_ms", 0, LONG_MAX),
        "min.compaction.lag.ms": ("min_compaction_lag_ms", 0, LONG_MAX),
        "max.compaction.lag.ms": ("max_compaction_lag_ms", 1, LONG_MAX),
        "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", None, None),
    }

    def __post_init__(self) -> None:
        for key, (field, lo, hi) in self._TOPIC_KEYS.items():
            value = getattr(self, field)
            if lo is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidConfigError(key, f"expected an integer, got {value!r}")
            if value < lo or (hi is not None and value > hi):
                raise InvalidConfigError(key, f"value {value} is outside [{lo}, {hi}]")
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise InvalidConfigError(
                "min.cleanable.dirty.ratio", f"value {ratio!r} is outside [0, 1]"
            )
        policies = {p.strip() for p in self.cleanup_policy.split(",")}
        if not policies or not policies <= {"delete", "compact"}:
            raise InvalidConfigError(
                "cleanup.policy", f"{self.cleanup_policy!r} is not delete, compact or both"
            )
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise InvalidConfigError(
                "message.timestamp.type",
                f"{self.message_timestamp_type!r} is not CreateTime or LogAppendTime",
            )
        compact = "compact" in self.cleanup_policy
        object.__setattr__(self, "compact", compact)
        object.__setattr__(self, "delete_enabled", "delete" in self.cleanup_policy)
        object.__setattr__(self, "log_append_time", self.message_timestamp_type == "LogAppendTime")
        object.__setattr__(
            self,
            "max_segment_ms",
            min(self.segment_ms, self.max_compaction_lag_ms) if compact else self.segment_ms,
        )

    @property
    def max_index_entries(self) -> int:
        """Offset index entries a segment may hold before it rolls (``segment.index.bytes`` / 8)."""
        return self.segment_index_bytes // 8

    def to_topic_config(self) -> dict[str, str]:
        """Topic-level keys and string values (DescribeConfigs), the inverse of from_topic_config."""
        return {key: str(getattr(self, field)) for key, (field, _, _) in self._TOPIC_KEYS.items()}

    @classmethod
    def from_topic_config(
        cls, config: Mapping[str, Any], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Topic-level overrides (``{"retention.ms": "1000"}``) merged over ``defaults``.

        Values may be strings (as in CreateTopics) or ints. An unknown key or a bad value raises
        ``InvalidConfigError`` naming the key. Kafka topic keys the storage layer does not use
        (``min.insync.replicas``, ``compression.type``, ...) are accepted and ignored.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for key, raw in config.items():
            spec = cls._TOPIC_KEYS.get(key)
            if spec is None:
                if key in _IGNORED_TOPIC_KEYS:
                    continue
                raise InvalidConfigError(key, "unknown topic config")
            field, lo, _ = spec
            if field == "min_cleanable_dirty_ratio":
                changes[field] = _parse_float(key, raw)
            else:
                changes[field] = _parse_int(key, raw) if lo is not None else _parse_str(key, raw)
        return dataclasses.replace(base, **changes) if changes else base

    @classmethod
    def from_broker_config(cls, config: Mapping[str, Any]) -> LogConfig:
        """Broker-level defaults from broker keys (``log.segment.bytes``, ``log.roll.hours`` ...).

        Keys that are absent or ``None`` keep Kafka's defaults; keys that are not log defaults
        are ignored (the broker config holds many others). ``*.ms`` wins over ``*.minutes`` over
        ``*.hours``, as in Kafka.
        """

        def get(key: str) -> Any:
            value = config.get(key)
            return None if value is None or value == "" else value

        values: dict[str, Any] = {}
        simple = {
            "log.segment.bytes": "segment_bytes",
            "log.retention.bytes": "retention_bytes",
            "log.index.interval.bytes": "index_interval_bytes",
            "log.index.size.max.bytes": "segment_index_bytes",
            "message.max.bytes": "max_message_bytes",
            "log.flush.interval.messages": "flush_interval_messages",
            "log.flush.interval.ms": "flush_interval_ms",
            "log.segment.delete.delay.ms": "file_delete_delay_ms",
            "log.cleaner.delete.retention.ms": "delete_retention_ms",
            "log.cleaner.min.compaction.lag.ms": "min_compaction_lag_ms",
            "log.cleaner.max.compaction.lag.ms": "max_compaction_lag_ms",
        }
        for key, field in simple.items():
            if (v := get(key)) is not None:
                values[field] = _parse_int(key, v)
        if (v := get("log.roll.ms")) is not None:
            values["segment_ms"] = _parse_int("log.roll.ms", v)
        elif (v := get("log.roll.hours")) is not None:
            values["segment_ms"] = _parse_int("log.roll.hours", v) * 3_600_000
        if (v := get("log.retention.ms")) is not None:
            values["retention_ms"] = _parse_int("log.retention.ms", v)
        elif (v := get("log.retention.minutes")) is not None:
            values["retention_ms"] = _minus_one_or(_parse_int("log.retention.minutes", v), 60_000)
        elif (v := get("log.retention.hours")) is not None:
            values["retention_ms"] = _minus_one_or(_parse_int("log.retention.hours", v), 3_600_000)
        if (v := get("log.cleaner.min.cleanable.ratio")) is not None:
            values["min_cleanable_dirty_ratio"] = _parse_float("log.cleaner.min.cleanable.ratio", v)
        if (v := get("log.cleanup.policy")) is not None:
            values["cleanup_policy"] = _parse_str("log.cleanup.policy", v)
        if (v := get("log.message.timestamp.type")) is not None:
            values["message_timestamp_type"] = _parse_str("log.message.timestamp.type", v)
        try:
            return cls(**values)
        except InvalidConfigError as exc:  # report the broker key, not the topic key
            broker_key = {
                "segment.ms": "log.roll.ms",
                "retention.ms": "log.retention.ms",
                "max.message.bytes": "message.max.bytes",
                "segment.index.bytes": "log.index.size.max.bytes",
                "flush.messages": "log.flush.interval.messages",
                "flush.ms": "log.flush.interval.ms",
                "file.delete.delay.ms": "log.segment.delete.delay.ms",
                "delete.retention.ms": "log.cleaner.delete.retention.ms",
                "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
                "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
                "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
            }.get(exc.key, "log." + exc.key)
            raise InvalidConfigError(broker_key, str(exc).split(": ", 1)[1]) from None


LOG_TOPIC_KEYS: dict[str, tuple[str, int | None, int | None]] = LogConfig._TOPIC_KEYS
"""Topic config key -> (LogConfig field, minimum, maximum; None for non-integers): the one
copy of the ranges of the topic configs storage acts on (the broker validates with them)."""


def _minus_one_or(value: int, scale: int) -> int:
    return -1 if value < 0 else value * scale


def _parse_int(key: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise InvalidConfigError(key, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(key, f"expected an integer, got {raw!r}") from None


def _parse_float(key: str, raw: Any) -> float:
    if isinstance(raw, bool):
        raise InvalidConfigError(key, f"expected a number, got {raw!r}")
    if isinstance(raw, int | float):
        return float(raw)
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(key, f"expected a number, got {raw!r}") from None


def _parse_str(key: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise InvalidConfigError(key, f"expected a string, got {raw!r}")
    return raw.strip()
