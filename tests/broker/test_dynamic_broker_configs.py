"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on the BROKER resource)
over the raw protocol against a real broker process: validation, sources and synonyms in
DescribeConfigs, application to live logs without a restart, persistence across restarts
(with group configs and DeleteRecords' log start offsets, also after kill -9)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from odradek.protocol.records import build_batch
from odradek.testing.process import BrokerProcess

from .admin_helpers import (
    APPEND,
    BROKER,
    DEFAULT,
    DELETE,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT,
    GROUP,
    GROUP_CONFIG,
    INVALID_CONFIG,
    INVALID_REQUEST,
    NONE,
    SET,
    STATIC,
    SUBTRACT,
    TOPIC,
    alter,
    delete_records,
    describe,
    earliest_latest,
    incremental,
    produce_values,
    topic_name,
)
from .wire import Wire, create, produce_request

MESSAGE_TOO_LARGE = 10

pytestmark = pytest.mark.timeout(90)

BROKER_SETTINGS = {
    "log.retention.hours": "100",
    "log.retention.check.interval.ms": "100",
    "group.coordinator.rebalance.protocols": "classic,consumer",  # group configs, as Kafka 4.0
}


@pytest.fixture(autouse=True)
def _no_dynamic_config_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test on the module's broker (``wire``) leaves no dynamic broker config behind for
    the next one; cleared on the test's own connection, which closes after this."""
    if "wire" not in request.fixturenames:
        yield
        return
    wire: Wire = request.getfixturevalue("wire")
    yield
    assert alter(wire, BROKER, "0", {})[0] == NONE
    assert alter(wire, BROKER, "", {})[0] == NONE


def synonyms(entry: object) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, int(s.source)) for s in entry.synonyms]  # type: ignore[attr-defined]


def test_static_and_default_sources(wire: Wire) -> None:
    code, configs = describe(wire, BROKER, "0")
    assert code == NONE
    hours = configs["log.retention.hours"]
    assert (hours.value, int(hours.config_source), hours.read_only) == ("100", STATIC, True)
    assert synonyms(hours) == [
        ("log.retention.hours", "100", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]
    ms_ = configs["log.retention.ms"]
    assert (ms_.value, int(ms_.config_source), ms_.read_only) == (None, DEFAULT, False)
    mmb = configs["message.max.bytes"]
    assert (mmb.value, int(mmb.config_source), mmb.read_only) == ("1048588", DEFAULT, False)
    assert configs["broker.id"].read_only
    assert describe(wire, BROKER, "")[1] == {}  # no dynamic default yet


def test_alter_broker_configs_sources_and_synonyms(wire: Wire) -> None:
    t = topic_name("dyn")
    create(wire, t)
    assert alter(wire, BROKER, "0", {"log.retention.ms": "3600000"}) == (NONE, None)
    assert alter(wire, BROKER, "", {"log.segment.bytes": "1048576"}) == (NONE, None)
    _, configs = describe(wire, BROKER, "0")
    entry = configs["log.retention.ms"]
    assert (entry.value, int(entry.config_source)) == ("3600000", DYNAMIC_BROKER)
    assert synonyms(entry) == [
        ("log.retention.ms", "3600000", DYNAMIC_BROKER),
        ("log.retention.hours", "100", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]
    seg = configs["log.segment.bytes"]
    assert (seg.value, int(seg.config_source)) == ("1048576", DYNAMIC_DEFAULT)
    _, defaults = describe(wire, BROKER, "")
    assert {k: (c.value, int(c.config_source)) for k, c in defaults.items()} == {
        "log.segment.bytes": ("1048576", DYNAMIC_DEFAULT)
    }
    # a topic without overrides follows the dynamic broker defaults
    _, topic = describe(wire, TOPIC, t)
    assert (topic["retention.ms"].value, int(topic["retention.ms"].config_source)) == (
        "3600000",
        DYNAMIC_BROKER,
    )
    assert (topic["segment.bytes"].value, int(topic["segment.bytes"].config_source)) == (
        "1048576",
        DYNAMIC_DEFAULT,
    )
    # AlterConfigs replaces the whole level: the per-broker retention goes
    assert alter(wire, BROKER, "0", {"log.cleaner.backoff.ms": "1000"})[0] == NONE
    _, configs = describe(wire, BROKER, "0")
    assert int(configs["log.retention.ms"].config_source) == DEFAULT
    assert int(configs["log.cleaner.backoff.ms"].config_source) == DYNAMIC_BROKER


@pytest.mark.parametrize(
    ("name", "configs", "code", "words"),
    [
        ("0", {"broker.id": "5"}, INVALID_CONFIG, "dynamically"),
        ("0", {"num.partitions": "3"}, INVALID_CONFIG, "dynamically"),
        ("0", {"no.such.key": "3"}, INVALID_CONFIG, "unknown"),
        ("0", {"log.retention.ms": "soon"}, INVALID_CONFIG, "log.retention.ms"),
        ("0", {"log.segment.bytes": "10"}, INVALID_CONFIG, "log.segment.bytes"),
        ("0", {"background.threads": "30"}, INVALID_CONFIG, "double"),
        ("0", {"background.threads": "4"}, INVALID_CONFIG, "half"),
        ("", {"sasl.kerberos.min.time.before.relogin": "58000"}, INVALID_CONFIG, "broker id"),
        ("7", {"log.retention.ms": "1000"}, INVALID_REQUEST, "Unexpected broker id"),
        ("x", {"log.retention.ms": "1000"}, INVALID_REQUEST, "integer"),
    ],
)
def test_refused_broker_configs(
    wire: Wire, name: str, configs: dict[str, str], code: int, words: str
) -> None:
    got, message = alter(wire, BROKER, name, dict(configs))
    assert got == code
    assert message is not None and words in message
    assert describe(wire, BROKER, "")[1] == {}


def test_accepted_as_kafka_does(wire: Wire) -> None:
    # what librdkafka's 0081 sets: a per-broker SASL setting, thread counts within 2x
    assert alter(wire, BROKER, "0", {"sasl.kerberos.min.time.before.relogin": "58000"})[0] == NONE
    assert incremental(wire, BROKER, "0", [("background.threads", SET, "9")])[0] == NONE
    _, configs = describe(wire, BROKER, "0")
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert configs["background.threads"].value == "9"
    # validate_only changes nothing
    assert alter(wire, BROKER, "", {"log.retention.ms": "1"}, validate_only=True)[0] == NONE
    assert describe(wire, BROKER, "")[1] == {}


def test_incremental_list_operations(wire: Wire) -> None:
    t = topic_name("inc")
    create(wire, t)
    assert incremental(wire, BROKER, "0", [("log.cleanup.policy", APPEND, "compact")])[0] == NONE
    _, configs = describe(wire, BROKER, "0")
    assert configs["log.cleanup.policy"].value == "delete,compact"
    _, topic = describe(wire, TOPIC, t)
    assert topic["cleanup.policy"].value == "delete,compact"
    assert incremental(wire, BROKER, "0", [("log.cleanup.policy", SUBTRACT, "compact")])[0] == NONE
    _, configs = describe(wire, BROKER, "0")
    assert (
        configs["log.cleanup.policy"].value,
        int(configs["log.cleanup.policy"].config_source),
    ) == (
        "delete",
        DYNAMIC_BROKER,
    )
    assert incremental(wire, BROKER, "0", [("log.cleanup.policy", DELETE, None)])[0] == NONE
    _, configs = describe(wire, BROKER, "0")
    assert int(configs["log.cleanup.policy"].config_source) == DEFAULT
    code, message = incremental(wire, BROKER, "0", [("log.retention.ms", APPEND, "1")])
    assert code == INVALID_CONFIG and message and "append" in message


def test_dynamic_retention_applies_to_live_logs_without_override(wire: Wire) -> None:
    follows, overridden = topic_name("follows"), topic_name("kept")
    create(wire, follows)
    create(wire, overridden, 1, {"retention.ms": "-1"})
    produce_values(wire, follows, 3)
    produce_values(wire, overridden, 3)
    assert alter(wire, BROKER, "", {"log.retention.ms": "1"})[0] == NONE
    deadline = time.monotonic() + 20
    while earliest_latest(wire, follows) != (3, 3):
        assert time.monotonic() < deadline, "retention did not follow the dynamic default"
        time.sleep(0.05)
    assert earliest_latest(wire, overridden) == (0, 3)


def test_configs_and_log_start_survive_restarts(fresh_broker: BrokerProcess) -> None:
    t = topic_name("persist")
    g = topic_name("grp")
    with Wire(fresh_broker.bootstrap_servers) as wire:
        create(wire, t)
        produce_values(wire, t, 6)
        assert alter(wire, BROKER, "0", {"log.retention.ms": "7200000"})[0] == NONE
        assert alter(wire, BROKER, "", {"message.max.bytes": "2000000"})[0] == NONE
        assert incremental(wire, GROUP, g, [("consumer.heartbeat.interval.ms", SET, "6000")])[
            0
        ] == (NONE)
        assert delete_records(wire, t, {0: 2}) == {0: (NONE, 2)}
    fresh_broker.restart()
    with Wire(fresh_broker.bootstrap_servers) as wire:
        _, configs = describe(wire, BROKER, "0")
        assert (
            configs["log.retention.ms"].value,
            int(configs["log.retention.ms"].config_source),
        ) == (
            "7200000",
            DYNAMIC_BROKER,
        )
        assert (
            configs["message.max.bytes"].value,
            int(configs["message.max.bytes"].config_source),
        ) == ("2000000", DYNAMIC_DEFAULT)
        _, topic = describe(wire, TOPIC, t)
        assert topic["max.message.bytes"].value == "2000000"
        _, group = describe(wire, GROUP, g)
        entry = group["consumer.heartbeat.interval.ms"]
        assert (entry.value, int(entry.config_source)) == ("6000", GROUP_CONFIG)
        assert earliest_latest(wire, t) == (2, 6)
        assert delete_records(wire, t, {0: 5}) == {0: (NONE, 5)}
    fresh_broker.restart(kill=True)  # no clean shutdown: the checkpoint was written already
    with Wire(fresh_broker.bootstrap_servers) as wire:
        assert earliest_latest(wire, t) == (5, 6)
        _, configs = describe(wire, BROKER, "0")
        assert configs["log.retention.ms"].value == "7200000"


def test_dynamic_message_max_bytes_applies_at_once(wire: Wire) -> None:
    t = topic_name("mmb")
    create(wire, t)
    big = build_batch([(None, b"x" * 3000, (), int(time.time() * 1000))])

    def produce_code() -> int:
        r = wire.call(produce_request(t, 0, big, acks=1, version=9))
        return int(r.responses[0].partition_responses[0].error_code)

    assert produce_code() == NONE
    assert alter(wire, BROKER, "", {"message.max.bytes": "1000"})[0] == NONE
    assert produce_code() == MESSAGE_TOO_LARGE
    assert alter(wire, BROKER, "", {})[0] == NONE
    assert produce_code() == NONE
