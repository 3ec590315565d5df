"""The topic-config table: every topic-level key, its parser, the broker key that supplies its
default, and whether odradek acts on it.

``validate_topic_configs`` checks a dict of overrides (CreateTopics, AlterConfigs) and
``effective_topic_configs`` merges overrides over the broker defaults (DescribeConfigs,
building a storage ``LogConfig``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.broker.config.values import (
    ConfigError,
    _bool,
    _cleanup_policy,
    _compression,
    _enum,
    _false_only,
    _float,
    _gzip_level,
    _int,
    _message_format_version,
    _throttled_replicas,
)
from odradek.storage.config import LOG_TOPIC_KEYS
from odradek.storage.config import LONG_MAX as _LONG_MAX


class BrokerValues(Protocol):
    """What a topic key's default is read from (``BrokerConfig`` is one)."""

    @property
    def retention_ms(self) -> int: ...

    @property
    def roll_ms(self) -> int: ...

    @property
    def flush_interval_ms(self) -> int: ...

    def get(self, key: str, default: Any = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class TopicKey:
    name: str
    parse: Callable[[str], Any]
    broker_key: str | None
    default_from: Callable[[BrokerValues], str]
    read_only: bool = False
    ignored: str | None = None
    """Why odradek accepts this key and does not act on it (logged as a warning when set);
    None for the keys that are applied."""


def _from(key: str) -> Callable[[BrokerValues], str]:
    def get(config: BrokerValues) -> str:
        value = config.get(key)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


def _const(value: str) -> Callable[[BrokerValues], str]:
    return lambda _config: value


def _log_int(key: str) -> Callable[[str], int]:
    """The range storage gives ``key`` (``storage.config.LOG_TOPIC_KEYS``: one copy)."""
    _field, lo, hi = LOG_TOPIC_KEYS[key]
    return _int(lo, hi)


TOPIC_KEYS: dict[str, TopicKey] = {
    t.name: t
    for t in [
        TopicKey(
            "cleanup.policy", _cleanup_policy, "log.cleanup.policy", _from("log.cleanup.policy")
        ),
        TopicKey(
            "compression.type",
            _compression,
            "compression.type",
            _from("compression.type"),
            ignored="batches are stored as produced (no recompression)",
        ),
        TopicKey(
            "retention.ms",
            _log_int("retention.ms"),
            "log.retention.ms",
            lambda c: str(c.retention_ms),
        ),
        TopicKey(
            "retention.bytes",
            _log_int("retention.bytes"),
            "log.retention.bytes",
            _from("log.retention.bytes"),
        ),
        TopicKey(
            "segment.bytes",
            _log_int("segment.bytes"),
            "log.segment.bytes",
            _from("log.segment.bytes"),
        ),
        TopicKey("segment.ms", _log_int("segment.ms"), "log.roll.ms", lambda c: str(c.roll_ms)),
        TopicKey(
            "segment.index.bytes",
            _log_int("segment.index.bytes"),
            "log.index.size.max.bytes",
            _from("log.index.size.max.bytes"),
        ),
        TopicKey(
            "index.interval.bytes",
            _log_int("index.interval.bytes"),
            "log.index.interval.bytes",
            _from("log.index.interval.bytes"),
        ),
        TopicKey(
            "max.message.bytes",
            _log_int("max.message.bytes"),
            "message.max.bytes",
            _from("message.max.bytes"),
        ),
        TopicKey(
            "message.timestamp.type",
            _enum("CreateTime", "LogAppendTime"),
            "log.message.timestamp.type",
            _from("log.message.timestamp.type"),
        ),
        TopicKey(
            "flush.messages",
            _log_int("flush.messages"),
            "log.flush.interval.messages",
            _from("log.flush.interval.messages"),
        ),
        TopicKey(
            "flush.ms",
            _log_int("flush.ms"),
            "log.flush.interval.ms",
            lambda c: str(c.flush_interval_ms),
        ),
        TopicKey(
            "min.insync.replicas", _int(1), "min.insync.replicas", _from("min.insync.replicas")
        ),
        TopicKey(
            "unclean.leader.election.enable",
            _bool,
            "unclean.leader.election.enable",
            _from("unclean.leader.election.enable"),
        ),
        TopicKey(
            "message.timestamp.difference.max.ms",
            _int(0, _LONG_MAX),
            "log.message.timestamp.difference.max.ms",
            _from("log.message.timestamp.difference.max.ms"),
            ignored="deprecated; record timestamps are not checked against the broker's clock",
        ),
        TopicKey(
            "delete.retention.ms",
            _log_int("delete.retention.ms"),
            "log.cleaner.delete.retention.ms",
            _from("log.cleaner.delete.retention.ms"),
        ),
        TopicKey(
            "min.compaction.lag.ms",
            _log_int("min.compaction.lag.ms"),
            "log.cleaner.min.compaction.lag.ms",
            _from("log.cleaner.min.compaction.lag.ms"),
        ),
        TopicKey(
            "max.compaction.lag.ms",
            _log_int("max.compaction.lag.ms"),
            "log.cleaner.max.compaction.lag.ms",
            _from("log.cleaner.max.compaction.lag.ms"),
        ),
        TopicKey(
            "min.cleanable.dirty.ratio",
            _float(0.0, 1.0),
            "log.cleaner.min.cleanable.ratio",
            _from("log.cleaner.min.cleanable.ratio"),
        ),
        TopicKey(
            "file.delete.delay.ms",
            _log_int("file.delete.delay.ms"),
            "log.segment.delete.delay.ms",
            _from("log.segment.delete.delay.ms"),
        ),
        TopicKey(
            "preallocate",
            _bool,
            "log.preallocate",
            _from("log.preallocate"),
            ignored="segments are not preallocated",
        ),
        # -- accepted as Kafka 3.x accepts them; not acted on (``ignored`` says why) --------
        TopicKey(
            "message.format.version",
            _message_format_version,
            "log.message.format.version",
            _from("log.message.format.version"),
            ignored=(
                "deprecated; ignored because the inter-broker protocol is 3.0 or later "
                "(batches are always written as v2), as in Kafka 3.x"
            ),
        ),
        TopicKey(
            "message.downconversion.enable",
            _bool,
            "log.message.downconversion.enable",
            _from("log.message.downconversion.enable"),
        ),
        TopicKey(
            "message.timestamp.before.max.ms",
            _int(0, _LONG_MAX),
            "log.message.timestamp.before.max.ms",
            _from("log.message.timestamp.before.max.ms"),
            ignored="record timestamps are not checked against the broker's clock",
        ),
        TopicKey(
            "message.timestamp.after.max.ms",
            _int(0, _LONG_MAX),
            "log.message.timestamp.after.max.ms",
            _from("log.message.timestamp.after.max.ms"),
            ignored="record timestamps are not checked against the broker's clock",
        ),
        TopicKey(
            "segment.jitter.ms",
            _int(0, _LONG_MAX),
            "log.roll.jitter.ms",
            lambda c: str(
                c.get("log.roll.jitter.ms")
                if c.get("log.roll.jitter.ms") is not None
                else c.get("log.roll.jitter.hours") * 3_600_000
            ),
            ignored="segments roll without jitter",
        ),
        TopicKey(
            "compression.gzip.level",
            _gzip_level,
            "compression.gzip.level",
            _from("compression.gzip.level"),
            ignored="batches are stored as produced",
        ),
        TopicKey(
            "compression.lz4.level",
            _int(1, 17),
            "compression.lz4.level",
            _from("compression.lz4.level"),
            ignored="batches are stored as produced",
        ),
        TopicKey(
            "compression.zstd.level",
            _int(-131072, 22),
            "compression.zstd.level",
            _from("compression.zstd.level"),
            ignored="batches are stored as produced",
        ),
        TopicKey(
            "leader.replication.throttled.replicas",
            _throttled_replicas,
            None,
            _const(""),
            ignored="replication is not throttled",
        ),
        TopicKey(
            "follower.replication.throttled.replicas",
            _throttled_replicas,
            None,
            _const(""),
            ignored="replication is not throttled",
        ),
        TopicKey("remote.storage.enable", _false_only, None, _const("false")),
        TopicKey(
            "local.retention.ms",
            _int(-2, _LONG_MAX),
            "log.local.retention.ms",
            _from("log.local.retention.ms"),
            ignored="there is no tiered storage",
        ),
        TopicKey(
            "local.retention.bytes",
            _int(-2, _LONG_MAX),
            "log.local.retention.bytes",
            _from("log.local.retention.bytes"),
            ignored="there is no tiered storage",
        ),
        TopicKey(
            "remote.log.copy.disable",
            _bool,
            None,
            _const("false"),
            ignored="there is no tiered storage",
        ),
        TopicKey(
            "remote.log.delete.on.disable",
            _bool,
            None,
            _const("false"),
            ignored="there is no tiered storage",
        ),
    ]
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic config overrides; returns them normalised. Raises ConfigError naming the key."""
    out: dict[str, str] = {}
    for name, raw in configs.items():
        spec = TOPIC_KEYS.get(name)
        if spec is None:
            raise ConfigError(name, "unknown topic configuration key")
        if raw is None:
            raise ConfigError(name, "null value")
        try:
            value = spec.parse(raw)
        except ValueError as exc:
            detail = (
                str(exc) if str(exc) and "invalid literal" not in str(exc) else "not a valid value"
            )
            raise ConfigError(name, f"invalid value {raw!r}: {detail}") from None
        out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    lo = out.get("min.compaction.lag.ms")
    hi = out.get("max.compaction.lag.ms")
    if lo is not None and hi is not None and int(lo) > int(hi):
        raise ConfigError(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
            f"max.compaction.lag.ms ({hi})",
        )
    return out


def ignored_topic_configs(configs: Mapping[str, str]) -> list[str]:
    """The warnings for the keys of ``configs`` that are accepted but not acted on (Kafka
    logs such a warning for ``message.format.version``); the caller logs them."""
    out = []
    for name in sorted(configs):
        spec = TOPIC_KEYS.get(name)
        if spec is not None and spec.ignored is not None:
            out.append(f"topic config {name}={configs[name]} is ignored: {spec.ignored}")
    return out


def topic_defaults(config: BrokerValues) -> dict[str, str]:
    """Broker-level defaults of every topic config, as strings keyed by topic config name."""
    return {name: tk.default_from(config) for name, tk in TOPIC_KEYS.items()}


def effective_topic_configs(config: BrokerValues, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic config: the override when set, else the broker default."""
    merged = topic_defaults(config)
    merged.update(overrides)
    return merged
