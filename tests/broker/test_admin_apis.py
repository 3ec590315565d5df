"""Admin completeness over the raw protocol against a real broker process: the topic configs
Kafka 3.x accepts, DeleteRecords, dynamic broker configs, group configs and authorized
operations. Each test module gets its own broker (module-scoped ``broker``); the tests that
change broker-wide settings restore them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

from .wire import Wire, create, fetch_request, list_offsets_request, metadata_request, ms, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"log.retention.hours": "100", "log.retention.check.interval.ms": "100"}

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
INT32_MIN = -(2**31)
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, GROUP_CONFIG = 1, 2, 3, 4, 5, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        yield w


# -- helpers --------------------------------------------------------------------------------------


def describe(
    wire: Wire, rtype: int, name: str, version: int = 4, keys: tuple[str, ...] | None = None
) -> tuple[int, dict[str, Any]]:
    res = req(
        32, version, "DescribeConfigsResource", resource_type=rtype, resource_name=name,
        configuration_keys=keys,
    )  # fmt: skip
    r = wire.call(
        req(32, version, resources=(res,), include_synonyms=True, include_documentation=False)
    )
    result = r.results[0]
    return int(result.error_code), {c.name: c for c in result.configs}


def alter(
    wire: Wire, rtype: int, name: str, configs: dict[str, str | None], validate_only: bool = False
) -> tuple[int, str | None]:
    cfgs = tuple(req(33, 2, "AlterableConfig", name=k, value=v) for k, v in configs.items())
    res = req(33, 2, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=cfgs)
    r = wire.call(req(33, 2, resources=(res,), validate_only=validate_only))
    return int(r.responses[0].error_code), r.responses[0].error_message


def incremental(
    wire: Wire, rtype: int, name: str, ops: list[tuple[str, int, str | None]], version: int = 1
) -> tuple[int, str | None]:
    cfgs = tuple(
        req(44, version, "AlterableConfig", name=k, config_operation=op, value=v)
        for k, op, v in ops
    )
    res = req(
        44, version, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=cfgs
    )
    r = wire.call(req(44, version, resources=(res,), validate_only=False))
    return int(r.responses[0].error_code), r.responses[0].error_message


def produce_values(wire: Wire, topic: str, n: int, per_batch: int = 1) -> None:
    now = int(time.time() * 1000)
    for start in range(0, n, per_batch):
        data = build_batch(
            [(None, b"v%d" % i, (), now) for i in range(start, min(n, start + per_batch))]
        )
        tdata = req(
            0, 9, "TopicProduceData", name=topic,
            partition_data=(req(0, 9, "PartitionProduceData", index=0, records=data),),
        )  # fmt: skip
        r = wire.call(
            req(0, 9, transactional_id=None, acks=1, timeout=ms(5000), topic_data=(tdata,))
        )
        assert int(r.responses[0].partition_responses[0].error_code) == NONE


def delete_records(
    wire: Wire, topic: str, offsets: dict[int, int], version: int = 2
) -> dict[int, tuple[int, int]]:
    parts = tuple(
        req(21, version, "DeleteRecordsPartition", partition_index=p, offset=o)
        for p, o in offsets.items()
    )
    t = req(21, version, "DeleteRecordsTopic", name=topic, partitions=parts)
    r = wire.call(req(21, version, topics=(t,), timeout=ms(5000)))
    return {
        int(p.partition_index): (int(p.error_code), int(p.low_watermark))
        for p in r.topics[0].partitions
    }


def earliest_latest(wire: Wire, topic: str) -> tuple[int, int]:
    out = []
    for ts in (-2, -1):
        r = wire.call(list_offsets_request(topic, {0: ts}))
        p = r.topics[0].partitions[0]
        assert int(p.error_code) == NONE
        out.append(int(p.offset))
    return out[0], out[1]


def fetch_code(wire: Wire, topic: str, offset: int) -> int:
    r = wire.call(fetch_request(topic, {0: offset}))
    return int(r.responses[0].partitions[0].error_code)


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
