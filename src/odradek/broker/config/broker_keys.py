"""The broker key table: every key ``server.properties`` accepts, its parser and its default.

``BROKER_KEYS`` maps Kafka's key name to a ``ConfigKey``; the default is the typed value
(``None`` where Kafka derives the value from another key, e.g. ``log.retention.ms`` from
``log.retention.hours``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.broker.config.security_keys import SECURITY_KEY_SPECS
from odradek.broker.config.values import (
    _advertised_value,
    _bool,
    _cleanup_policy,
    _compression,
    _dirs,
    _enum,
    _float,
    _gzip_level,
    _http_listeners_value,
    _int,
    _listeners_value,
    _message_format_version,
    _rebalance_protocols,
    _str,
)
from odradek.storage.config import INT_MAX as _INT_MAX
from odradek.storage.config import LONG_MAX as _LONG_MAX

RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
"""Kafka's selector that sends a consumer to an in-sync replica in its ``client.rack``."""


def _replica_selector(text: str) -> str | None:
    """``replica.selector.class``: empty (the leader only) or Kafka's rack-aware selector."""
    t = text.strip()
    if not t:
        return None
    if t != RACK_AWARE_REPLICA_SELECTOR:
        raise ValueError(f"must be empty or {RACK_AWARE_REPLICA_SELECTOR}")
    return t


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
            "http.authentication.skip.paths",
            _str,
            "/metrics,/health",
            "HTTP paths served without a login when the broker has an authorizer.",
        ),
        _k(
            "http.session.timeout.ms",
            _int(60_000),
            8 * 3600 * 1000,
            "How long a console login lasts.",
        ),
        _k(
            "schema.registry.listeners",
            _http_listeners_value,
            "",
            "The Confluent-compatible schema registry (http://host:port); empty turns it off.",
        ),
        _k("broker.id", _int(-1), 0, "This broker's id (node id)."),
        _k("node.id", _int(-1), -1, "Alias of broker.id when set."),
        _k("broker.rack", _str, None, "This broker's rack; rack-aware assignment and KIP-392."),
        _k(
            "replica.selector.class",
            _replica_selector,
            None,
            "Where consumers with a rack fetch from (KIP-392); unset: the leader.",
        ),
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
        # SASL settings of Kerberos and of a client's login (DynamicListenerConfig in Kafka):
        # accepted, stored and shown, and unused (GSSAPI is not served).
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
        # authorization (odradek.security.authorizer)
        _k("authorizer.class.name", _str, ""),
        _k("super.users", _str, ""),
        _k("allow.everyone.if.no.acl.found", _bool, False),
        *(_k(name, parse, default, doc) for name, parse, default, doc in SECURITY_KEY_SPECS),
        # client quotas (odradek.security.quota_store)
        _k("quota.window.num", _int(1), 11),
        _k("quota.window.size.seconds", _int(1), 1),
        _k("controller.quota.window.num", _int(1), 11),
        _k("controller.quota.window.size.seconds", _int(1), 1),
        # client telemetry, KIP-714 (odradek.broker.client_telemetry)
        _k("telemetry.max.bytes", _int(1), 1048576),
    ]
}
