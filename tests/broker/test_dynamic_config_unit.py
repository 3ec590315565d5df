"""Unit tests of the config decisions: DynamicBrokerConfig (levels, precedence, synonyms,
validation, persistence, reconfiguration callbacks), GroupConfigManager, the incremental
operations, the topic configs Kafka 3.x accepts, and DeleteRecords' storage side."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.apis.incremental_alter_configs import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    apply_operations,
)
from odradek.broker.config import (
    BrokerConfig,
    ConfigError,
    ignored_topic_configs,
    validate_topic_configs,
)
from odradek.broker.config_store import BROKERS, DEFAULT_ENTITY, LocalConfigEntityStore
from odradek.broker.dynamic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    DynamicBrokerConfig,
    broker_config_synonyms,
)
from odradek.broker.group_configs import GROUP_CONFIG, GroupConfigManager
from odradek.clock import ManualClock
from odradek.protocol.records import build_batch
from odradek.storage import FileLog, LogConfig, LogManager
from odradek.storage.checkpoint import OffsetCheckpointFile

# -- DynamicBrokerConfig ---------------------------------------------------------------------------


def dynamic(tmp_path: Path, **static: str) -> DynamicBrokerConfig:
    props = {k.replace("_", "."): v for k, v in static.items()}
    d = DynamicBrokerConfig(BrokerConfig.from_properties(props), LocalConfigEntityStore(tmp_path))
    d.initialize()
    return d


def test_precedence_and_synonyms(tmp_path: Path) -> None:
    d = dynamic(tmp_path, log_retention_hours="1")
    assert d.config.retention_ms == 3_600_000
    asyncio.run(d.alter({"log.retention.ms": "5000"}, per_broker=False))
    assert d.config.retention_ms == 5000  # the dynamic default beats the static hours
    asyncio.run(d.alter({"log.retention.ms": "7000"}, per_broker=True))
    assert d.config.retention_ms == 7000  # per broker beats the default
    assert d.config_synonyms("log.retention.ms", broker_config_synonyms("log.retention.ms")) == [
        ("log.retention.ms", "7000", DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "5000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "1", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    # describing a lower synonym drops the higher ones before it (Kafka's dropWhile)
    assert d.config_synonyms(
        "log.retention.hours", broker_config_synonyms("log.retention.hours")
    ) == [
        ("log.retention.hours", "1", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    assert d.config.is_explicit("log.retention.hours")
    assert not d.config.is_explicit("log.retention.ms")  # static stays static
    asyncio.run(d.alter({}, per_broker=True))
    asyncio.run(d.alter({}, per_broker=False))
    assert d.config.retention_ms == 3_600_000


def test_persisted_and_reloaded(tmp_path: Path) -> None:
    d = dynamic(tmp_path)
    asyncio.run(d.alter({"log.segment.bytes": "1048576"}, per_broker=False))
    asyncio.run(d.alter({"log.cleaner.threads": "2"}, per_broker=True))
    store = LocalConfigEntityStore(tmp_path)
    assert store.entities(BROKERS) == {
        DEFAULT_ENTITY: {"log.segment.bytes": "1048576"},
        "0": {"log.cleaner.threads": "2"},
    }
    again = dynamic(tmp_path)
    assert again.config.log_segment_bytes == 1048576
    assert again.config.log_cleaner_threads == 2
    assert again.dynamic_default_configs() == {"log.segment.bytes": "1048576"}


def test_stored_invalid_keys_are_dropped_at_start(tmp_path: Path) -> None:
    store = LocalConfigEntityStore(tmp_path)
    store.write_entity_config(BROKERS, "0", {"broker.id": "3", "log.retention.ms": "9000"})
    d = DynamicBrokerConfig(BrokerConfig.default(), store)
    d.initialize()
    assert d.dynamic_broker_configs() == {"log.retention.ms": "9000"}
    assert d.config.broker_id == 0 and d.config.retention_ms == 9000


@pytest.mark.parametrize(
    ("props", "per_broker", "words"),
    [
        ({"broker.id": "1"}, True, "Cannot update these configs dynamically"),
        ({"log.retention.hours": "1"}, True, "Cannot update"),  # not dynamic in Kafka either
        ({"nope": "1"}, True, "unknown"),
        ({"num.io.threads": "17"}, True, "double"),
        ({"num.io.threads": "3"}, True, "half"),
        ({"sasl.kerberos.min.time.before.relogin": "1"}, False, "broker id must be specified"),
        ({"log.cleaner.min.cleanable.ratio": "2"}, True, "log.cleaner.min.cleanable.ratio"),
    ],
)
def test_refused(tmp_path: Path, props: dict[str, str], per_broker: bool, words: str) -> None:
    d = dynamic(tmp_path)
    with pytest.raises(ConfigError, match=words):
        asyncio.run(d.alter(props, per_broker=per_broker))
    assert d.dynamic_broker_configs() == {} and d.dynamic_default_configs() == {}
    assert not (tmp_path / "odradek-config-entities.json").exists()


def test_validate_only_and_callbacks(tmp_path: Path) -> None:
    d = dynamic(tmp_path)
    calls: list[tuple[Any, Any]] = []

    async def on_log(old: BrokerConfig, new: BrokerConfig) -> None:
        calls.append((old.log_segment_bytes, new.log_segment_bytes))

    d.add_reconfigurable({"log.segment.bytes"}, on_log)
    asyncio.run(d.alter({"log.segment.bytes": "2000000"}, per_broker=True, validate_only=True))
    assert calls == [] and d.config.log_segment_bytes == 1073741824
    asyncio.run(d.alter({"log.cleaner.backoff.ms": "10"}, per_broker=True))
    assert calls == []  # not its key
    asyncio.run(d.alter({"log.segment.bytes": "2000000"}, per_broker=True))
    assert calls == [(1073741824, 2000000)]


def test_memory_store(tmp_path: Path) -> None:
    store = LocalConfigEntityStore(None)
    d = DynamicBrokerConfig(BrokerConfig.default(), store)
    d.initialize()
    asyncio.run(d.alter({"log.retention.ms": "1"}, per_broker=True))
    assert store.entity_config(BROKERS, "0") == {"log.retention.ms": "1"}
    assert list(tmp_path.iterdir()) == []


# -- GroupConfigManager ---------------------------------------------------------------------------


def groups(**static: str) -> GroupConfigManager:
    props = {"group.coordinator.rebalance.protocols": "classic,consumer"}
    props.update({k.replace("_", "."): v for k, v in static.items()})
    return GroupConfigManager(BrokerConfig.from_properties(props), LocalConfigEntityStore(None))


def test_group_configs_validate_and_describe() -> None:
    g = groups()
    assert g.enabled
    assert not GroupConfigManager(BrokerConfig.default(), LocalConfigEntityStore(None)).enabled
    asyncio.run(g.alter("g1", {"consumer.session.timeout.ms": " 50000 "}, False))
    assert ("consumer.session.timeout.ms", "50000", GROUP_CONFIG) in g.describe("g1")
    assert ("consumer.heartbeat.interval.ms", "5000", 5) in g.describe("g1")
    assert g.effective("other")["consumer.session.timeout.ms"] == "45000"
    for props, words in [
        ({"consumer.session.timeout.ms": "30000"}, "greater than or equal"),
        ({"consumer.heartbeat.interval.ms": "20000"}, "less than or equal"),
        ({"share.record.lock.duration.ms": "1000"}, "greater than or equal"),
        ({"x": "1"}, "Unknown group config name"),
    ]:
        with pytest.raises(ConfigError, match=words):
            g.validate(props)
    # the broker's bounds decide; session must stay above heartbeat
    wide = groups(
        group_consumer_min_session_timeout_ms="1000",
        group_consumer_max_heartbeat_interval_ms="60000",
    )
    with pytest.raises(ConfigError, match=r"greater than consumer\.heartbeat\.interval\.ms"):
        wide.validate(
            {"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms": "6000"}
        )


# -- IncrementalAlterConfigs operations ----------------------------------------------------------


class Op:
    def __init__(self, name: str, op: int, value: str | None) -> None:
        self.name, self.config_operation, self.value = name, op, value


def test_apply_operations() -> None:
    base = {"cleanup.policy": "delete"}
    out, code, _ = apply_operations({}, [Op("cleanup.policy", APPEND, "compact")], base)
    assert (out, int(code)) == ({"cleanup.policy": "delete,compact"}, 0)
    out, _, _ = apply_operations(out, [Op("cleanup.policy", SUBTRACT, "delete")], base)
    assert out == {"cleanup.policy": "compact"}
    out, _, _ = apply_operations(
        {"retention.ms": "1"}, [Op("retention.ms", DELETE, None), Op("segment.ms", SET, "9")], base
    )
    assert out == {"segment.ms": "9"}
    _, code, message = apply_operations({}, [Op("retention.ms", APPEND, "1")], base)
    assert int(code) == 40 and message and "append" in message
    _, code, _ = apply_operations({}, [Op("a", SET, "1"), Op("a", SET, "2")], base)
    assert int(code) == 42


# -- topic configs -----------------------------------------------------------------------------


def test_topic_configs_kafka_accepts() -> None:
    configs = validate_topic_configs(
        {
            "message.format.version": "0.10.0.0",
            "message.downconversion.enable": "False",
            "segment.jitter.ms": "0",
            "compression.gzip.level": "-1",
            "leader.replication.throttled.replicas": "0:1,1:1",
            "remote.storage.enable": "false",
            "local.retention.bytes": "-2",
        }
    )
    assert configs["message.downconversion.enable"] == "false"
    warnings = ignored_topic_configs(configs)
    assert any("message.format.version" in w and "deprecated" in w for w in warnings)
    assert not any("downconversion" in w for w in warnings)
    LogConfig.from_topic_config(configs)  # storage accepts them too
    for key, value in [("message.format.version", "3.10"), ("compression.lz4.level", "0")]:
        with pytest.raises(ConfigError, match=key):
            validate_topic_configs({key: value})


# -- DeleteRecords: storage ---------------------------------------------------------------------


def test_log_start_offset_moves_segments_go_and_the_checkpoint_survives(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    config = LogConfig(segment_bytes=200)
    manager = LogManager([tmp_path], config, clock)
    log = manager.get_or_create("t", 0, config)
    for i in range(8):
        log.append(build_batch([(None, b"v%d" % i, (), clock.now_ms())]), 0)
    before = log.segment_count
    assert log.increment_log_start_offset(5)
    deleted = log.delete_segments_below_log_start()
    assert deleted > 0 and log.segment_count == before - deleted
    assert isinstance(log, FileLog)
    manager.checkpoint_log_start_offsets()
    # what a restart after a crash (no close) reads back
    checkpoint = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint").read()
    assert checkpoint == {("t", 0): 5}
    manager.close()
    again = LogManager([tmp_path], config, clock)
    assert again.get("t", 0).log_start_offset == 5  # type: ignore[union-attr]
    again.close()


# -- broker loggers -----------------------------------------------------------------------------


def test_broker_loggers_all_or_nothing() -> None:
    import logging

    from odradek.broker.loggers import BrokerLoggers, LoggerError

    manager = logging.Manager(logging.RootLogger(logging.WARNING))
    a = manager.getLogger("a")
    loggers = BrokerLoggers(manager)
    assert loggers.levels() == {"root": "WARN", "a": "WARN"}
    with pytest.raises(LoggerError, match="does not exist"):
        loggers.alter([("a", 0, "DEBUG"), ("b", 0, "DEBUG")], validate_only=False)
    assert a.level == logging.NOTSET  # nothing applied
    loggers.alter([("a", 0, "trace"), ("root", 0, "ERROR")], validate_only=False)
    assert loggers.levels() == {"root": "ERROR", "a": "TRACE"}
    loggers.alter([("a", 1, None)], validate_only=False)
    assert loggers.levels()["a"] == "ERROR"
