"""Broker configuration: Kafka's key names, Kafka's defaults.

``BrokerConfig.from_properties({"log.dirs": "/tmp/x", ...})`` validates every key against the
table ``BROKER_KEYS``; an unknown key or a value that does not parse raises ``ConfigError``
naming the key. Each key is also an attribute with dots replaced by underscores
(``config.log_segment_bytes``), and ``config.get("log.segment.bytes")`` reads it by name.

Topic-level configs (``retention.ms``, ``segment.bytes``, ...) are described by ``TOPIC_KEYS``:
their type, the broker key that supplies the default, and validation. ``validate_topic_configs``
checks a dict of overrides (CreateTopics, AlterConfigs) and ``effective_topic_configs`` merges
overrides over the broker defaults (DescribeConfigs, building a storage ``LogConfig``).

``load_properties(text)`` parses Java ``.properties`` syntax: ``key=value``, ``key: value`` or
``key value``; ``#``/``!`` comments; backslash line continuations and escapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.storage.config import INT_MAX as _INT_MAX
from odradek.storage.config import LOG_TOPIC_KEYS
from odradek.storage.config import LONG_MAX as _LONG_MAX

__all__ = [
    "BROKER_KEYS",
    "TOPIC_KEYS",
    "BrokerConfig",
    "ConfigError",
    "ConfigKey",
    "Listener",
    "effective_topic_configs",
    "ignored_topic_configs",
    "load_properties",
    "load_properties_file",
    "parse_listeners",
    "validate_topic_configs",
]


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid. ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class Listener:
    """One entry of ``listeners``: ``NAME://host:port``. An empty host binds all interfaces."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


_LISTENER_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:]*):(\d+)$")


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    listeners: list[Listener] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER_RE.match(item)
        if m is None:
            raise ConfigError(key, f"invalid listener {item!r}; expected NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if port > 65535:
            raise ConfigError(key, f"invalid port in {item!r}")
        if name not in ("PLAINTEXT",):
            raise ConfigError(
                key, f"unsupported listener security protocol {name!r} (only PLAINTEXT)"
            )
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ConfigError(key, "no listener given")
    return listeners


# -- value parsers -------------------------------------------------------------------------------


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip())
        if lo is not None and value < lo:
            raise ValueError(f"must be at least {lo}")
        if hi is not None and value > hi:
            raise ValueError(f"must be at most {hi}")
        return value

    return parse


def _bool(text: str) -> bool:
    t = text.strip().lower()
    if t == "true":
        return True
    if t == "false":
        return False
    raise ValueError("must be true or false")


def _float(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text.strip())
        if not lo <= value <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return value

    return parse


def _str(text: str) -> str:
    return text.strip()


def _enum(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        t = text.strip()
        if t not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return t

    return parse


def _cleanup_policy(text: str) -> str:
    parts = [p.strip() for p in text.strip().strip("[]").split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("must be delete, compact or delete,compact")
    return ",".join(parts)


def _compression(text: str) -> str:
    return _enum("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")(text)


def _message_format_version(text: str) -> str:
    """A Kafka version string as ``message.format.version`` takes (``0.10.0``, ``0.11.0-IV2``,
    ``2.8``, ``3.0-IV1``...): validated as Kafka's MetadataVersion does, then ignored."""
    t = text.strip()
    if _VERSION_RE.match(t) is None:
        raise ValueError(f"Version {t} is not a valid version")
    return t


# 0.8.0 .. 0.11.0 (three parts), 1.0 .. 4.0 (two parts), each optionally -IVn; Kafka
# also accepts extra trailing parts (0.10.0.1, 2.8.1).
_VERSION_RE = re.compile(
    r"^(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|1\.[01]|2\.[0-8]|3\.[0-9]|4\.0)"
    r"(\.\d+)*(-IV\d+)?$"
)


def _gzip_level(text: str) -> int:
    value = int(text.strip())
    if value != -1 and not 1 <= value <= 9:
        raise ValueError("must be -1 (the default level) or in [1, 9]")
    return value


def _throttled_replicas(text: str) -> str:
    """``*`` or ``partition:broker,...`` (leader/follower.replication.throttled.replicas)."""
    t = text.strip()
    if t in ("", "*"):
        return t
    for item in t.split(","):
        if re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", item) is None:
            raise ValueError("must be * or a list of partition:broker")
    return t


def _false_only(text: str) -> bool:
    """remote.storage.enable: tiered storage is not offered (Kafka refuses true when the
    broker's remote log storage system is disabled)."""
    if _bool(text):
        raise ValueError(
            "Tiered Storage functionality is disabled in the broker "
            "(remote.log.storage.system.enable is false)"
        )
    return False


def _rebalance_protocols(text: str) -> str:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if "classic" not in parts or any(p not in ("classic", "consumer") for p in parts):
        raise ValueError("must list classic, and optionally consumer")
    return ",".join(parts)


def _dirs(text: str) -> str:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("needs at least one directory")
    return ",".join(parts)


def _listeners_value(text: str) -> str:
    parse_listeners(text)
    return text.strip()


def _http_listeners_value(text: str) -> str:
    # touch(broker): the console's HTTP listener (odradek.console.broker)
    from odradek.console.broker import parse_http_listeners

    parse_http_listeners(text)
    return text.strip()


def _advertised_value(text: str) -> str:
    if text.strip():
        parse_listeners(text, "advertised.listeners")
    return text.strip()


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str = ""


def _k(name: str, parse: Callable[[str], Any], default: Any, doc: str = "") -> ConfigKey:
    return ConfigKey(name, parse, default, doc)


BROKER_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        _k(
            "listeners", _listeners_value, "PLAINTEXT://127.0.0.1:9092", "Where the broker listens."
        ),
        _k(
            "advertised.listeners", _advertised_value, "", "Told to clients; defaults to listeners."
        ),
        _k(
            "http.listeners",
            _http_listeners_value,
            "http://127.0.0.1:9644",
            "The console, /metrics and /health (http://host:port); empty turns it off.",
        ),
        _k(
            "schema.registry.listeners",
            _http_listeners_value,
            "",
            "The Confluent-compatible schema registry (http://host:port); empty turns it off.",
        ),
        _k("broker.id", _int(-1), 0, "This broker's id (node id)."),
        _k("node.id", _int(-1), -1, "Alias of broker.id when set."),
        _k("log.dirs", _dirs, "./odradek-data", "Data directories, comma separated."),
        _k("log.dir", _dirs, "", "Used when log.dirs is empty."),
        _k("storage.engine", _enum("file", "memory"), "file", "odradek: file or memory."),
        _k("num.partitions", _int(1), 1),
        _k("default.replication.factor", _int(1), 1),
        _k("auto.create.topics.enable", _bool, True),
        _k("delete.topic.enable", _bool, True),
        _k("message.max.bytes", _int(0, _INT_MAX), 1048588),
        _k("socket.request.max.bytes", _int(1, _INT_MAX), 104857600),
        _k("log.segment.bytes", _int(14, _INT_MAX), 1073741824),
        _k("log.roll.ms", _int(1, _LONG_MAX), None),
        _k("log.roll.hours", _int(1, _INT_MAX), 168),
        _k("log.retention.ms", _int(-1, _LONG_MAX), None),
        _k("log.retention.minutes", _int(-1, _INT_MAX), None),
        _k("log.retention.hours", _int(-1, _INT_MAX), 168),
        _k("log.retention.bytes", _int(-1, _LONG_MAX), -1),
        _k("log.index.interval.bytes", _int(0, _INT_MAX), 4096),
        _k("log.index.size.max.bytes", _int(4, _INT_MAX), 10485760),
        _k("log.flush.interval.messages", _int(1, _LONG_MAX), _LONG_MAX),
        _k("log.flush.interval.ms", _int(0, _LONG_MAX), None),
        _k("log.flush.scheduler.interval.ms", _int(0, _LONG_MAX), _LONG_MAX),
        _k("log.retention.check.interval.ms", _int(1, _LONG_MAX), 300000),
        _k("log.flush.offset.checkpoint.interval.ms", _int(0, _INT_MAX), 60000),
        _k("log.flush.start.offset.checkpoint.interval.ms", _int(0, _INT_MAX), 60000),
        _k("log.cleanup.policy", _cleanup_policy, "delete"),
        _k("log.message.timestamp.type", _enum("CreateTime", "LogAppendTime"), "CreateTime"),
        _k("compression.type", _compression, "producer"),
        _k("log.cleaner.enable", _bool, True),
        _k("log.cleaner.threads", _int(0), 1),
        _k("log.cleaner.backoff.ms", _int(0), 15000),
        _k("log.cleaner.dedupe.buffer.size", _int(0), 134217728),
        _k("log.cleaner.io.buffer.size", _int(0), 524288),
        _k("log.cleaner.io.buffer.load.factor", _float(0.01, 1.0), 0.9),
        _k("log.cleaner.io.max.bytes.per.second", _float(1.0, float("inf")), float("inf")),
        _k("log.cleaner.min.cleanable.ratio", _float(0.0, 1.0), 0.5),
        _k("log.cleaner.delete.retention.ms", _int(0, _LONG_MAX), 86400000),
        _k("log.cleaner.min.compaction.lag.ms", _int(0, _LONG_MAX), 0),
        _k("log.cleaner.max.compaction.lag.ms", _int(1, _LONG_MAX), _LONG_MAX),
        _k("min.insync.replicas", _int(1), 1),
        _k("log.segment.delete.delay.ms", _int(0, _LONG_MAX), 60000),
        _k(
            "log.roll.jitter.ms",
            _int(0, _LONG_MAX),
            None,
            "Accepted; odradek rolls without jitter.",
        ),
        _k(
            "log.roll.jitter.hours", _int(0, _INT_MAX), 0, "Accepted; odradek rolls without jitter."
        ),
        _k("log.preallocate", _bool, False, "Accepted; segments are not preallocated."),
        _k(
            "log.message.format.version",
            _message_format_version,
            "3.0-IV1",
            "Deprecated; ignored (record batches are always v2), as in Kafka 3.x.",
        ),
        _k("log.message.downconversion.enable", _bool, True),
        _k("log.message.timestamp.difference.max.ms", _int(0, _LONG_MAX), _LONG_MAX),
        _k("log.message.timestamp.before.max.ms", _int(0, _LONG_MAX), _LONG_MAX),
        _k("log.message.timestamp.after.max.ms", _int(0, _LONG_MAX), _LONG_MAX),
        _k("log.local.retention.ms", _int(-2, _LONG_MAX), -2),
        _k("log.local.retention.bytes", _int(-2, _LONG_MAX), -2),
        _k("unclean.leader.election.enable", _bool, False),
        _k("compression.gzip.level", _gzip_level, -1),
        _k("compression.lz4.level", _int(1, 17), 9),
        _k("compression.zstd.level", _int(-131072, 22), 3),
        _k("background.threads", _int(1), 10, "Accepted for compatibility; unused."),
        _k("num.replica.fetchers", _int(1), 1),
        _k("max.connections", _int(0, _INT_MAX), _INT_MAX),
        _k("max.connections.per.ip", _int(0, _INT_MAX), _INT_MAX),
        _k("max.connection.creation.rate", _int(0, _INT_MAX), _INT_MAX),
        _k("transaction.partition.verification.enable", _bool, True),
        # SASL settings a client may set per broker (DynamicListenerConfig in Kafka); odradek
        # serves PLAINTEXT only, so they are accepted, stored and shown, and unused.
        _k("sasl.kerberos.service.name", _str, None),
        _k("sasl.kerberos.kinit.cmd", _str, "/usr/bin/kinit"),
        _k("sasl.kerberos.ticket.renew.window.factor", _float(0.0, 1.0), 0.8),
        _k("sasl.kerberos.ticket.renew.jitter", _float(0.0, 1.0), 0.05),
        _k("sasl.kerberos.min.time.before.relogin", _int(0, _LONG_MAX), 60000),
        _k("sasl.login.refresh.window.factor", _float(0.5, 1.0), 0.8),
        _k("sasl.login.refresh.window.jitter", _float(0.0, 0.25), 0.05),
        _k("sasl.login.refresh.min.period.seconds", _int(0, 900), 60),
        _k("sasl.login.refresh.buffer.seconds", _int(0, 3600), 300),
        _k(
            "group.coordinator.rebalance.protocols",
            _rebalance_protocols,
            "classic",
            "Kafka 3.9's default, classic; listing consumer enables the KIP-848 group configs "
            "(the GROUP config resource) as Kafka 4.0 does. The consumer protocol's "
            "heartbeats are not served.",
        ),
        # KIP-848 group configs: broker defaults and the bounds a group override must respect
        _k("group.consumer.session.timeout.ms", _int(1), 45000),
        _k("group.consumer.min.session.timeout.ms", _int(1), 45000),
        _k("group.consumer.max.session.timeout.ms", _int(1), 60000),
        _k("group.consumer.heartbeat.interval.ms", _int(1), 5000),
        _k("group.consumer.min.heartbeat.interval.ms", _int(1), 5000),
        _k("group.consumer.max.heartbeat.interval.ms", _int(1), 15000),
        _k("group.share.session.timeout.ms", _int(1), 45000),
        _k("group.share.min.session.timeout.ms", _int(1), 45000),
        _k("group.share.max.session.timeout.ms", _int(1), 60000),
        _k("group.share.heartbeat.interval.ms", _int(1), 5000),
        _k("group.share.min.heartbeat.interval.ms", _int(1), 5000),
        _k("group.share.max.heartbeat.interval.ms", _int(1), 15000),
        _k("group.share.record.lock.duration.ms", _int(1000), 30000),
        _k("group.share.min.record.lock.duration.ms", _int(1000), 15000),
        _k("group.share.max.record.lock.duration.ms", _int(1000), 60000),
        _k("offsets.topic.num.partitions", _int(1), 50),
        _k("offsets.topic.replication.factor", _int(1), 1),
        _k("offsets.topic.segment.bytes", _int(1), 104857600),
        _k("offsets.topic.compression.codec", _int(0, 4), 0),
        _k("offsets.retention.minutes", _int(1), 10080),
        _k("offsets.retention.check.interval.ms", _int(1), 600000),
        _k("offsets.commit.timeout.ms", _int(1), 5000),
        _k("group.initial.rebalance.delay.ms", _int(0), 3000),
        _k("group.min.session.timeout.ms", _int(0), 6000),
        _k("group.max.session.timeout.ms", _int(0), 1800000),
        _k("group.max.size", _int(1), _INT_MAX),
        _k(
            "offset.metadata.max.bytes",
            _int(0, _INT_MAX),
            4096,
            "Longest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond).",
        ),
        _k("transaction.state.log.replication.factor", _int(1), 1),
        _k("transaction.state.log.num.partitions", _int(1), 50),
        _k("transaction.state.log.segment.bytes", _int(1), 104857600),
        _k("transaction.max.timeout.ms", _int(1), 900000),
        _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", _int(1), 10000),
        _k("transaction.remove.expired.transaction.cleanup.interval.ms", _int(1), 3600000),
        _k("transaction.state.log.min.isr", _int(1), 1),
        _k("transactional.id.expiration.ms", _int(1), 604800000),
        _k("producer.id.expiration.ms", _int(1), 86400000),
        _k("max.incremental.fetch.session.cache.slots", _int(0), 1000),
        _k("replica.fetch.max.bytes", _int(0), 1048576),
        _k("replica.lag.time.max.ms", _int(1), 30000),
        _k("replica.fetch.wait.max.ms", _int(0), 500),
        _k("replica.fetch.min.bytes", _int(1), 1),
        _k("replica.fetch.response.max.bytes", _int(0), 10485760),
        _k("replica.fetch.backoff.ms", _int(0), 1000),
        _k("replica.socket.timeout.ms", _int(1), 30000),
        _k("replica.high.watermark.checkpoint.interval.ms", _int(1), 5000),
        _k("fetch.max.bytes", _int(0), 57671680),
        _k("num.network.threads", _int(1), 3, "Accepted for compatibility; unused."),
        _k("num.io.threads", _int(1), 8, "Accepted for compatibility; unused."),
        _k("num.recovery.threads.per.data.dir", _int(1), 1, "Accepted for compatibility; unused."),
        _k("socket.send.buffer.bytes", _int(-1), 102400),
        _k("socket.receive.buffer.bytes", _int(-1), 102400),
        _k("connections.max.idle.ms", _int(-1), 600000),
        _k(
            "zookeeper.connect",
            _str,
            "",
            "host:port[,host:port][/chroot]: join a cluster on ZooKeeper; empty runs alone.",
        ),
        _k("zookeeper.connection.timeout.ms", _int(0), 18000),
        _k("zookeeper.session.timeout.ms", _int(0), 18000),
        # the cluster mode (zookeeper.connect): controller, replication, controlled shutdown
        _k("unclean.leader.election.enable", _bool, False),
        _k("auto.leader.rebalance.enable", _bool, True),
        _k("leader.imbalance.check.interval.seconds", _int(1), 300),
        _k("leader.imbalance.per.broker.percentage", _int(0), 10),
        _k("controlled.shutdown.enable", _bool, True),
        _k("controlled.shutdown.max.retries", _int(0), 3),
        _k("controlled.shutdown.retry.backoff.ms", _int(0), 5000),
        _k("controller.socket.timeout.ms", _int(1), 30000),
        _k(
            "num.replica.fetchers",
            _int(1),
            1,
            "Fetchers (each its own connection) per leader broker; read at start.",
        ),
        _k("request.timeout.ms", _int(1), 30000),
    ]
}


class BrokerConfig:
    """Validated broker settings. Attribute ``x_y_z`` holds key ``x.y.z``."""

    listeners: str
    advertised_listeners: str
    http_listeners: str
    schema_registry_listeners: str
    broker_id: int
    node_id: int
    log_dirs: str
    log_dir: str
    storage_engine: str
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    log_segment_bytes: int
    log_roll_ms: int | None
    log_roll_hours: int
    log_retention_ms: int | None
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int | None
    log_flush_scheduler_interval_ms: int
    log_retention_check_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    log_cleanup_policy: str
    log_message_timestamp_type: str
    compression_type: str
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_backoff_ms: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    min_insync_replicas: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_topic_compression_codec: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_commit_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    offset_metadata_max_bytes: int
    transaction_state_log_replication_factor: int
    transaction_state_log_num_partitions: int
    transaction_state_log_segment_bytes: int
    transaction_max_timeout_ms: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    transaction_state_log_min_isr: int
    transactional_id_expiration_ms: int
    producer_id_expiration_ms: int
    max_incremental_fetch_session_cache_slots: int
    replica_fetch_max_bytes: int
    fetch_max_bytes: int
    num_network_threads: int
    num_io_threads: int
    num_recovery_threads_per_data_dir: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    connections_max_idle_ms: int
    zookeeper_connect: str
    zookeeper_connection_timeout_ms: int
    zookeeper_session_timeout_ms: int
    unclean_leader_election_enable: bool
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int
    controller_socket_timeout_ms: int
    num_replica_fetchers: int
    request_timeout_ms: int

    def __init__(self, values: Mapping[str, Any], explicit: Mapping[str, str]) -> None:
        self._values = dict(values)
        self._explicit = dict(explicit)
        for key, value in self._values.items():
            setattr(self, key.replace(".", "_"), value)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str] | None = None) -> BrokerConfig:
        """Validate ``props`` (strings as in a .properties file) over Kafka's defaults."""
        props = dict(props or {})
        values: dict[str, Any] = {name: key.default for name, key in BROKER_KEYS.items()}
        explicit: dict[str, str] = {}
        for name, raw in props.items():
            name = name.strip()
            spec = BROKER_KEYS.get(name)
            if spec is None:
                raise ConfigError(name, "unknown configuration key")
            if not isinstance(raw, str):
                raw = str(raw).lower() if isinstance(raw, bool) else str(raw)
            try:
                values[name] = spec.parse(raw)
            except ConfigError:
                raise
            except ValueError as exc:
                detail = (
                    str(exc)
                    if str(exc) and "invalid literal" not in str(exc)
                    else "not a valid value"
                )
                raise ConfigError(name, f"invalid value {raw!r}: {detail}") from None
            explicit[name] = raw
        if values["node.id"] >= 0 and "broker.id" not in explicit:
            values["broker.id"] = values["node.id"]
        if "log.dirs" not in explicit and values["log.dir"]:
            values["log.dirs"] = values["log.dir"]
        return cls(values, explicit)

    @classmethod
    def default(cls) -> BrokerConfig:
        return cls.from_properties({})

    def with_overrides(self, props: Mapping[str, str]) -> BrokerConfig:
        merged = dict(self._explicit)
        merged.update(props)
        return BrokerConfig.from_properties(merged)

    def update_current(self, current: BrokerConfig) -> None:
        """Take every value of ``current`` (this config with dynamic broker configs applied,
        see ``broker.dynamic_config``), in place so that every holder sees it; the keys set
        statically (``is_explicit``, ``explicit()``) stay as they were."""
        self._values = dict(current._values)
        for key, value in self._values.items():
            setattr(self, key.replace(".", "_"), value)

    def copy(self) -> BrokerConfig:
        """A snapshot of the current values."""
        return BrokerConfig(self._values, self._explicit)

    # -- access ------------------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (Kafka's name), or ``default`` for an unknown key."""
        return self._values.get(key, default)

    def is_explicit(self, key: str) -> bool:
        return key in self._explicit

    def explicit(self) -> dict[str, str]:
        """The keys that were set (not defaults), as given."""
        return dict(self._explicit)

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self._values.items())

    # -- derived values ---------------------------------------------------------------------

    @property
    def node_id_effective(self) -> int:
        return self.broker_id if self.broker_id >= 0 else 0

    @property
    def listener(self) -> Listener:
        return parse_listeners(self.listeners)[0]

    @property
    def advertised_listener(self) -> Listener:
        """The first advertised listener (defaults to the first listener)."""
        if self.advertised_listeners:
            return parse_listeners(self.advertised_listeners, "advertised.listeners")[0]
        return self.listener

    @property
    def data_dirs(self) -> list[Path]:
        return [Path(p) for p in self.log_dirs.split(",") if p]

    @property
    def in_memory(self) -> bool:
        return self.storage_engine == "memory"

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours (Kafka's precedence); -1 = forever."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return -1 if self.log_retention_minutes < 0 else self.log_retention_minutes * 60_000
        return -1 if self.log_retention_hours < 0 else self.log_retention_hours * 3_600_000

    @property
    def roll_ms(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * 3_600_000

    @property
    def flush_interval_ms(self) -> int:
        """log.flush.interval.ms, defaulting to log.flush.scheduler.interval.ms (Kafka)."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    def topic_defaults(self) -> dict[str, str]:
        """Broker-level defaults of every topic config, as strings keyed by topic config name."""
        out: dict[str, str] = {}
        for name, tk in TOPIC_KEYS.items():
            out[name] = tk.default_from(self)
        return out

    def __repr__(self) -> str:
        return f"BrokerConfig({self._explicit!r})"


# -- topic configs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicKey:
    name: str
    parse: Callable[[str], Any]
    broker_key: str | None
    default_from: Callable[[BrokerConfig], str]
    read_only: bool = False
    ignored: str | None = None
    """Why odradek accepts this key and does not act on it (logged as a warning when set);
    None for the keys that are applied."""


def _from(key: str) -> Callable[[BrokerConfig], str]:
    def get(config: BrokerConfig) -> str:
        value = config.get(key)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


def _const(value: str) -> Callable[[BrokerConfig], str]:
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


def effective_topic_configs(config: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic config: the override when set, else the broker default."""
    merged = config.topic_defaults()
    merged.update(overrides)
    return merged


# -- Java .properties ----------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def load_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text into a dict (later keys win)."""
    logical: list[str] = []
    pending = ""
    for raw_line in text.splitlines():
        line = raw_line.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        # a line continues when it ends with an odd number of backslashes
        stripped = line
        n = len(stripped) - len(stripped.rstrip("\\"))
        if n % 2 == 1:
            pending += stripped[:-1]
            continue
        logical.append(pending + stripped)
        pending = ""
    if pending:
        logical.append(pending)
    result: dict[str, str] = {}
    for line in logical:
        i = 0
        key_chars: list[str] = []
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if ch in "=: \t\f":
                break
            key_chars.append(ch)
            i += 1
        # skip whitespace, then one separator, then whitespace
        while i < len(line) and line[i] in " \t\f":
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
            while i < len(line) and line[i] in " \t\f":
                i += 1
        key = _unescape("".join(key_chars))
        value = _unescape(line[i:].rstrip("\r\n"))
        result[key] = value
    return result


def load_properties_file(path: str | Path) -> dict[str, str]:
    return load_properties(Path(path).read_text(encoding="utf-8"))
