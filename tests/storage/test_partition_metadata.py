"""``partition.metadata``: Kafka's format, written once, and a reopened log keeps its file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import FileLog, LogConfig
from odradek.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    assign_topic_id,
    decode_partition_metadata,
    encode_partition_metadata,
    read_partition_metadata,
)

from .conftest import T0, make_batch

# The file for the topic id whose Kafka text form (Uuid.toString) is "b4yJ8KXKQRuxYRQyCTPKYw"
KAFKA_FILE = "version: 0\ntopic_id: b4yJ8KXKQRuxYRQyCTPKYw"
KAFKA_ID = uuid.UUID("6f8c89f0-a5ca-411b-b161-14320933ca63")


def test_kafka_format_both_ways() -> None:
    assert encode_partition_metadata(KAFKA_ID).decode() == KAFKA_FILE
    assert decode_partition_metadata(KAFKA_FILE) == KAFKA_ID
    assert (
        decode_partition_metadata("version:  0 \ntopic_id:\tb4yJ8KXKQRuxYRQyCTPKYw\n") == KAFKA_ID
    )


@pytest.mark.parametrize(
    "text", ["", "version: 0", "version: 1\ntopic_id: b4yJ8KXKQRuxYRQyCTPKYw", "v: 0\nt: x"]
)
def test_bad_files_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        decode_partition_metadata(text)


def test_first_id_sticks_and_survives_reopening(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    config = LogConfig()
    log = FileLog(tmp_path / "t-0", config, clock)
    first, second = uuid.uuid4(), uuid.uuid4()
    assert read_partition_metadata(log.directory) is None
    assert assign_topic_id(log, first) == first
    assert (log.directory / PARTITION_METADATA_FILE).read_text() == encode_partition_metadata(
        first
    ).decode()
    assert assign_topic_id(log, second) == first  # another topic's id: refused, not written
    log.append(make_batch(3), 0)
    log.close()
    again = FileLog(tmp_path / "t-0", config, clock, recovery_point=log.recovery_point)
    assert again.log_end_offset == 3
    assert assign_topic_id(again, second) == first
    again.close()
