"""A hand-made RecordBatch with one flipped byte, sent as a raw Produce v8 request over a socket.

The batch is built with odradek.protocol.records.build_batch, then one byte inside the CRC-covered
range (byte 21 to the end) is flipped. The broker must answer CORRUPT_MESSAGE (2) for that
partition and append nothing from it (not even the good batch before it in the same partition's
records), while another partition of the same request is appended normally and the connection
stays usable. The records that did get in are read back with confluent-kafka.
"""

from __future__ import annotations

import pytest

from odradek.protocol.records import Compression, RecordBatch, build_batch
from odradek.testing.helpers import create_topic

from .conftest import Target
from .support import KafkaWire, Rec, assert_exactly, make_records, recent_ms, unique_topic
from .test_confluent_kafka import consume

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

NONE = 0
CORRUPT_MESSAGE = 2
LATEST = -1
EARLIEST = -2


def flipped(batch: bytes, where: str, needle: bytes) -> bytes:
    """`batch` with one byte inverted: in the base timestamp, inside `needle` (a value), or the
    last byte. All are covered by the CRC (bytes 21..end)."""
    pos = {"base_timestamp": 27 + 7, "value": batch.find(needle) + 2, "last": len(batch) - 1}[where]
    assert pos > 21, (where, pos)
    out = bytearray(batch)
    out[pos] ^= 0xFF
    assert RecordBatch(bytes(batch)).is_valid()
    assert not RecordBatch(bytes(out)).is_valid()
    return bytes(out)


def partition_records(n: int, tag: str, ts: int) -> list[Rec]:
    return make_records(n, tag=tag, base_timestamp=ts, with_nulls=False)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("where", ["base_timestamp", "value", "last"])
def test_flipped_byte_is_corrupt_message_and_nothing_is_appended(
    kafka: Target, codec: Compression, where: str
) -> None:
    kafka.require("crc")
    topic = unique_topic("corrupt")
    create_topic(kafka.bootstrap_servers, topic, 2)
    base = recent_ms()
    first = partition_records(10, "first", base)
    good = partition_records(4, "good", base + 10_000)
    bad = partition_records(5, "bad", base + 20_000)
    other = partition_records(6, "other", base + 30_000)
    after = partition_records(3, "after", base + 40_000)
    corrupt = build_batch(bad, compression=codec)
    if codec == Compression.NONE:
        corrupt = flipped(corrupt, where, b"bad-0000002")
    else:
        corrupt = flipped(corrupt, "last" if where == "value" else where, b"")

    with KafkaWire(kafka.bootstrap_servers) as wire:
        r = wire.produce(topic, {0: build_batch(first, compression=codec)})
        assert (int(r[0].error_code), int(r[0].base_offset)) == (NONE, 0)
        assert wire.list_offsets(topic, {0: LATEST, 1: LATEST}) == {
            0: (NONE, 10, -1),
            1: (NONE, 0, -1),
        }

        # Partition 0: a good batch followed by the corrupt one; partition 1: a good batch.
        r = wire.produce(
            topic, {0: build_batch(good, compression=codec) + corrupt, 1: build_batch(other)}
        )
        assert int(r[0].error_code) == CORRUPT_MESSAGE, r[0]
        assert (int(r[1].error_code), int(r[1].base_offset)) == (NONE, 0), r[1]
        assert wire.list_offsets(topic, {0: LATEST, 1: LATEST}) == {
            0: (NONE, 10, -1),
            1: (NONE, 6, -1),
        }
        assert wire.list_offsets(topic, {0: EARLIEST})[0] == (NONE, 0, -1)

        # The same connection still works, and partition 0 continues at offset 10.
        r = wire.produce(topic, {0: build_batch(after, compression=codec)})
        assert (int(r[0].error_code), int(r[0].base_offset)) == (NONE, 10)

    got = consume(kafka.bootstrap_servers, topic, 2, 10 + 6 + 3)
    assert_exactly(
        first + other + after,
        got,
        partitions=2,
        placement=[0] * len(first) + [1] * len(other) + [0] * len(after),
    )
    assert [c.value for c in got if c.partition == 0] == [r.value for r in first + after]
