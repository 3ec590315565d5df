"""``BrokerConfig``: the validated settings of one broker, read by attribute or by name."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from odradek.broker.config.broker_keys import BROKER_KEYS
from odradek.broker.config.security_keys import LISTENER_PREFIX, parse_protocol_map
from odradek.broker.config.topic_keys import topic_defaults
from odradek.broker.config.values import ConfigError, Listener, parse_listeners


def _check_listener_protocols(values: Mapping[str, Any]) -> None:
    """Every listener name must be in listener.security.protocol.map (Kafka's rule)."""
    protocols = parse_protocol_map(values["listener.security.protocol.map"])
    for key in ("listeners", "advertised.listeners"):
        if not values[key]:
            continue
        for listener in parse_listeners(values[key], key):
            if listener.name not in protocols:
                raise ConfigError(
                    key,
                    f"listener {listener.name} has no security protocol in "
                    "listener.security.protocol.map",
                )
    ib = values.get("inter.broker.listener.name")
    if ib and ib.upper() not in {x.name for x in parse_listeners(values["listeners"])}:
        raise ConfigError("inter.broker.listener.name", f"{ib} is not one of listeners")


class BrokerConfig:
    """Validated broker settings. Attribute ``x_y_z`` holds key ``x.y.z``."""

    listeners: str
    advertised_listeners: str
    http_listeners: str
    schema_registry_listeners: str
    broker_id: int
    node_id: int
    broker_rack: str | None
    replica_selector_class: str | None
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
            if spec is None and name.startswith(LISTENER_PREFIX):
                # per-listener security settings, read as given (odradek.broker.endpoints)
                explicit[name] = str(raw)
                continue
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
        _check_listener_protocols(values)
        return cls(values, explicit)

    @classmethod
    def default(cls) -> BrokerConfig:
        return cls.from_properties({})

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
        """The address this broker registers (and other brokers reach it on): the advertised
        entry of the inter-broker listener (``inter.broker.listener.name``, else the listener
        named after ``security.inter.broker.protocol``) when there is one, else the first
        advertised listener; advertised.listeners defaults to listeners."""
        listeners = parse_listeners(self.listeners)
        advertised = listeners
        if self.advertised_listeners:
            advertised = parse_listeners(self.advertised_listeners, "advertised.listeners")
        ib = self.get("inter.broker.listener.name") or self.get("security.inter.broker.protocol")
        for entry in advertised:
            if ib and entry.name == str(ib).upper():
                return entry
        return advertised[0]

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
        return topic_defaults(self)

    def __repr__(self) -> str:
        return f"BrokerConfig({self._explicit!r})"
