"""MM2's internal-topic records against bytes written here from Kafka's struct layouts
(OffsetSync, Checkpoint, Heartbeat in connect/mirror-client; KIP-382): big-endian, STRING =
int16 length + UTF-8, a version int16 (0) first in Checkpoint and Heartbeat values."""

from __future__ import annotations

import pytest

from odradek.mirror.records import Checkpoint, Heartbeat, OffsetSync, RecordFormatError


def test_offset_sync_layout() -> None:
    key = b"\x00\x06orders" + b"\x00\x00\x00\x03"
    value = (1234).to_bytes(8, "big") + (567).to_bytes(8, "big")
    sync = OffsetSync("orders", 3, 1234, 567)
    assert sync.key() == key and sync.value() == value
    assert OffsetSync.decode(key, value) == sync


def test_checkpoint_layout() -> None:
    key = b"\x00\x03app" + b"\x00\x08A.orders" + b"\x00\x00\x00\x00"
    value = b"\x00\x00" + (100).to_bytes(8, "big") + (90).to_bytes(8, "big") + b"\x00\x02md"
    cp = Checkpoint("app", "A.orders", 0, 100, 90, "md")
    assert cp.key() == key and cp.value() == value
    assert Checkpoint.decode(key, value) == cp


def test_heartbeat_layout() -> None:
    key = b"\x00\x01A" + b"\x00\x01B"
    value = b"\x00\x00" + (1_700_000_000_000).to_bytes(8, "big")
    hb = Heartbeat("A", "B", 1_700_000_000_000)
    assert hb.key() == key and hb.value() == value
    assert Heartbeat.decode(key, value) == hb


def test_utf8_strings_count_bytes() -> None:
    assert OffsetSync("é", 0, 0, 0).key()[:2] == b"\x00\x02"


@pytest.mark.parametrize(
    ("decoder", "key", "value"),
    [
        (OffsetSync.decode, b"\x00\x05ab", b"\x00" * 16),
        (OffsetSync.decode, None, b"\x00" * 16),
        (Checkpoint.decode, b"\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x01" + b"\x00" * 18),
        (Heartbeat.decode, b"\x00\x01A\x00\x01B", b"\x00\x00\x00"),
    ],
)
def test_bad_bytes_raise(decoder: object, key: bytes | None, value: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decoder(key, value)  # type: ignore[operator]
