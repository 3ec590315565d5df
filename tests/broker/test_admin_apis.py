"""Admin completeness over the raw protocol against a real broker process: the topic configs
Kafka 3.x accepts, DeleteRecords, dynamic broker configs, group configs and authorized
operations. Each test module gets its own broker (module-scoped ``broker``); the tests that
change broker-wide settings restore them."""

from __future__ import annotations

import pytest

from odradek.testing.process import BrokerProcess

from .admin_helpers import (
    APPEND,
    BROKER_LOGGER,
    DEFAULT,
    DELETE,
    GROUP,
    GROUP_CONFIG,
    INT32_MIN,
    INVALID_CONFIG,
    INVALID_REQUEST,
    NONE,
    OFFSET_OUT_OF_RANGE,
    POLICY_VIOLATION,
    SET,
    TOPIC,
    TOPIC_CONFIG,
    UNKNOWN_TOPIC_OR_PARTITION,
    alter,
    delete_records,
    describe,
    earliest_latest,
    fetch_code,
    incremental,
    produce_values,
    topic_name,
)
from .wire import Wire, create, metadata_request, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"log.retention.hours": "100", "log.retention.check.interval.ms": "100"}

# -- topic configs Kafka 3.x accepts ---------------------------------------------------------------


def test_deprecated_topic_configs_are_accepted_and_described(wire: Wire) -> None:
    t = topic_name("deprecated")
    create(
        wire, t, 1, {"message.format.version": "0.10.0", "message.downconversion.enable": "false"}
    )
    # librdkafka 0092 changes message.format.version with AlterConfigs
    assert alter(wire, TOPIC, t, {"message.format.version": "0.10.0.1"}) == (NONE, None)
    code, configs = describe(wire, TOPIC, t)
    assert code == NONE
    assert configs["message.format.version"].value == "0.10.0.1"
    assert int(configs["message.format.version"].config_source) == TOPIC_CONFIG
    for key in (
        "message.downconversion.enable", "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms", "segment.jitter.ms", "compression.zstd.level",
        "local.retention.ms", "remote.storage.enable", "follower.replication.throttled.replicas",
    ):  # fmt: skip
        assert key in configs, key
    assert configs["message.downconversion.enable"].value == "true"  # back to the default
    assert int(configs["message.downconversion.enable"].config_source) == DEFAULT


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("message.format.version", "0.7.0"),
        ("message.format.version", "banana"),
        ("remote.storage.enable", "true"),
        ("compression.gzip.level", "12"),
        ("leader.replication.throttled.replicas", "0-1"),
        ("local.retention.ms", "-3"),
    ],
)
def test_bad_values_of_accepted_topic_configs(wire: Wire, key: str, value: str) -> None:
    t = topic_name("badcfg")
    create(wire, t)
    code, message = alter(wire, TOPIC, t, {key: value})
    assert code == INVALID_CONFIG
    assert message is not None and key in message


def test_min_compaction_lag_above_max_is_refused(wire: Wire) -> None:
    t = topic_name("lag")
    create(wire, t)
    code, message = alter(
        wire, TOPIC, t, {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"}
    )
    assert code == INVALID_CONFIG and message and "min.compaction.lag.ms" in message


# -- DeleteRecords -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_moves_the_log_start(wire: Wire, version: int) -> None:
    t = topic_name("dr")
    create(wire, t, 1, {"segment.bytes": "200"})  # a batch or two per segment
    produce_values(wire, t, 10)
    assert delete_records(wire, t, {0: 4}, version) == {0: (NONE, 4)}
    assert earliest_latest(wire, t) == (4, 10)
    assert fetch_code(wire, t, 3) == OFFSET_OUT_OF_RANGE
    assert fetch_code(wire, t, 4) == NONE
    # never backwards; -1 is the high watermark
    assert delete_records(wire, t, {0: 2}, version) == {0: (NONE, 4)}
    assert delete_records(wire, t, {0: -1}, version) == {0: (NONE, 10)}
    assert earliest_latest(wire, t) == (10, 10)


def test_delete_records_errors(wire: Wire) -> None:
    t = topic_name("drerr")
    create(wire, t)
    produce_values(wire, t, 3)
    assert delete_records(wire, t, {0: 4}) == {0: (OFFSET_OUT_OF_RANGE, -1)}  # above the HW
    assert delete_records(wire, t, {0: -2}) == {0: (OFFSET_OUT_OF_RANGE, -1)}
    assert delete_records(wire, t, {1: 0}) == {1: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert delete_records(wire, topic_name("nope"), {0: 0}) == {0: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
    compacted = topic_name("drcompact")
    create(wire, compacted, 1, {"cleanup.policy": "compact"})
    assert delete_records(wire, compacted, {0: 0}) == {0: (POLICY_VIOLATION, -1)}
    assert earliest_latest(wire, t) == (0, 3)


def test_delete_records_is_advertised(wire: Wire) -> None:
    r = wire.call(req(18, 3, client_software_name="t", client_software_version="1"))
    keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert keys[21] == (0, 2)


# -- authorized operations -------------------------------------------------------------------------


def _ops(bits: int) -> set[int]:
    return {i for i in range(32) if bits & (1 << i)}


def test_metadata_authorized_operations(wire: Wire) -> None:
    t = topic_name("ops")
    create(wire, t)
    for version in (8, 10, 12):
        m = metadata_request([t], version=version)
        asked = req(
            3, version, topics=m.topics, allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True, include_topic_authorized_operations=True,
        )  # fmt: skip
        r = wire.call(asked)
        # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS: librdkafka 0081 expects 8
        assert _ops(int(r.topics[0].topic_authorized_operations)) == {3, 4, 5, 6, 7, 8, 10, 11}
        if version <= 10:
            assert _ops(int(r.cluster_authorized_operations)) == {5, 7, 8, 9, 10, 11, 12}
        plain = wire.call(m)
        assert int(plain.topics[0].topic_authorized_operations) == INT32_MIN


def test_describe_cluster_authorized_operations(wire: Wire) -> None:
    for version in (0, 1):
        r = wire.call(req(60, version, include_cluster_authorized_operations=True, endpoint_type=1))
        # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE: 7
        assert _ops(int(r.cluster_authorized_operations)) == {5, 7, 8, 9, 10, 11, 12}
        r = wire.call(
            req(60, version, include_cluster_authorized_operations=False, endpoint_type=1)
        )
        assert int(r.cluster_authorized_operations) == INT32_MIN


# -- group configs -------------------------------------------------------------------------------


def describe_group_operations(wire: Wire, group: str) -> int:
    r = wire.call(req(15, 5, groups=(group,), include_authorized_operations=True))
    return int(r.groups[0].authorized_operations)


def test_group_configs_refused_as_kafka_3_9(wire: Wire) -> None:
    """group.coordinator.rebalance.protocols=classic (Kafka 3.9's default): no GROUP config
    resource, and READ, DELETE, DESCRIBE on groups (librdkafka 0081 expects both below 4.0)."""
    g = topic_name("group")
    code, message = incremental(wire, GROUP, g, [("consumer.session.timeout.ms", SET, "50000")])
    assert code == INVALID_REQUEST and message and "consumer" in message
    assert describe(wire, GROUP, g)[0] == INVALID_REQUEST
    assert _ops(describe_group_operations(wire, g)) == {3, 6, 8}


@pytest.mark.parametrize(
    "fresh_broker", [{"group.coordinator.rebalance.protocols": "classic,consumer"}], indirect=True
)
def test_group_configs(fresh_broker: BrokerProcess) -> None:
    """As Kafka 4.0 (consumer listed): group configs, and DESCRIBE_CONFIGS, ALTER_CONFIGS on
    groups."""
    with Wire(fresh_broker.bootstrap_servers) as wire:
        _check_group_configs(wire)
        assert _ops(describe_group_operations(wire, "any")) == {3, 6, 8, 10, 11}


def _check_group_configs(wire: Wire) -> None:
    g = topic_name("group")
    code, configs = describe(wire, GROUP, g)  # a group need not exist
    assert code == NONE
    assert configs["consumer.session.timeout.ms"].value == "45000"
    assert int(configs["consumer.session.timeout.ms"].config_source) == DEFAULT
    assert incremental(wire, GROUP, g, [("consumer.session.timeout.ms", SET, "50000")]) == (
        NONE,
        None,
    )
    code, configs = describe(wire, GROUP, g, keys=("consumer.session.timeout.ms",))
    assert list(configs) == ["consumer.session.timeout.ms"]
    entry = configs["consumer.session.timeout.ms"]
    assert (entry.value, int(entry.config_source)) == ("50000", GROUP_CONFIG)
    assert [(s.name, s.value, int(s.source)) for s in entry.synonyms] == [
        ("consumer.session.timeout.ms", "50000", GROUP_CONFIG)
    ]
    # bounds: group.consumer.{min,max}.session.timeout.ms, heartbeat < session
    for key, value in [
        ("consumer.session.timeout.ms", "44999"),
        ("consumer.session.timeout.ms", "60001"),
        ("consumer.heartbeat.interval.ms", "4000"),
        ("consumer.heartbeat.interval.ms", "x"),
        ("no.such.group.config", "1"),
    ]:
        code, message = incremental(wire, GROUP, g, [(key, SET, value)])
        assert code == INVALID_CONFIG, (key, value)
        assert message is not None and key in message
    assert incremental(wire, GROUP, g, [("consumer.session.timeout.ms", DELETE, None)])[0] == NONE
    _, configs = describe(wire, GROUP, g)
    assert int(configs["consumer.session.timeout.ms"].config_source) == DEFAULT
    assert incremental(wire, GROUP, "", [("consumer.session.timeout.ms", SET, "50000")])[0] == (
        INVALID_REQUEST
    )
    assert describe(wire, GROUP, "")[0] == INVALID_REQUEST


# -- broker loggers ----------------------------------------------------------------------------


def test_broker_logger_levels(wire: Wire) -> None:
    code, loggers = describe(wire, BROKER_LOGGER, "0")
    assert code == NONE
    assert "root" in loggers and "odradek.broker" in loggers
    assert int(loggers["odradek.broker"].config_source) == 6  # DYNAMIC_BROKER_LOGGER_CONFIG
    before = loggers["odradek.broker"].value
    assert incremental(wire, BROKER_LOGGER, "0", [("odradek.broker", SET, "DEBUG")]) == (NONE, None)
    assert describe(wire, BROKER_LOGGER, "0")[1]["odradek.broker"].value == "DEBUG"
    assert incremental(wire, BROKER_LOGGER, "0", [("odradek.broker", DELETE, None)])[0] == NONE
    assert describe(wire, BROKER_LOGGER, "0")[1]["odradek.broker"].value == before
    for ops, code in [
        ([("no.such.logger", SET, "DEBUG")], INVALID_CONFIG),
        ([("odradek.broker", SET, "LOUD")], INVALID_CONFIG),
        ([("root", DELETE, None)], INVALID_REQUEST),
        ([("odradek.broker", APPEND, "DEBUG")], INVALID_REQUEST),
    ]:
        assert incremental(wire, BROKER_LOGGER, "0", ops)[0] == code, ops
    assert incremental(wire, BROKER_LOGGER, "", [("root", SET, "INFO")])[0] == INVALID_REQUEST
    assert describe(wire, BROKER_LOGGER, "")[0] == INVALID_REQUEST
    assert alter(wire, BROKER_LOGGER, "0", {"root": "INFO"})[0] == INVALID_REQUEST  # legacy API
