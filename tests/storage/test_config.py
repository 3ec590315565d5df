from __future__ import annotations

import pytest

from odradek.storage import InvalidConfigError, LogConfig
from odradek.storage.config import LONG_MAX


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.max_message_bytes == 1048588
    assert c.flush_interval_messages == c.flush_interval_ms == LONG_MAX
    assert c.cleanup_policy == "delete" and c.delete_enabled
    assert c.message_timestamp_type == "CreateTime" and not c.log_append_time


def test_topic_config_merges_over_defaults() -> None:
    defaults = LogConfig(retention_ms=1000, segment_bytes=4096)
    c = LogConfig.from_topic_config(
        {
            "retention.bytes": "2048",
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",
        },
        defaults,
    )
    assert (c.retention_ms, c.segment_bytes, c.retention_bytes) == (1000, 4096, 2048)
    assert c.log_append_time
    assert LogConfig.from_topic_config(c.to_topic_config()) == c


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.ms", "0"),
        ("retention.ms", "-2"),
        ("flush.messages", "0"),
        ("cleanup.policy", "shred"),
        ("message.timestamp.type", "WallTime"),
        ("max.message.bytes", "many"),
        ("no.such.key", "1"),
    ],
)
def test_bad_topic_config_names_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_topic_config({key: value})
    assert info.value.key == key
    assert key in str(info.value)


def test_broker_keys() -> None:
    c = LogConfig.from_broker_config(
        {
            "log.retention.hours": "1",
            "log.roll.ms": None,
            "log.roll.hours": 2,
            "message.max.bytes": 100,
            "log.cleanup.policy": "compact,delete",
            "listeners": "PLAINTEXT://:9092",
        }
    )
    assert c.retention_ms == 3_600_000
    assert c.segment_ms == 7_200_000
    assert c.max_message_bytes == 100
    assert c.delete_enabled
    assert LogConfig.from_broker_config({"log.retention.ms": -1}).retention_ms == -1
    assert (
        LogConfig.from_broker_config(
            {"log.retention.minutes": 2, "log.retention.hours": 5}
        ).retention_ms
        == 120_000
    )
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_broker_config({"log.roll.ms": "0"})
    assert info.value.key == "log.roll.ms"
