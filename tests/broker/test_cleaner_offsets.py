"""__consumer_offsets under the log cleaner, on a real in-process broker: continuous commits of
one group keep the partition's size on disk bounded, and a restart loads the compacted log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.coordinator import OFFSETS_TOPIC, GroupCoordinator, OffsetCommitEntry
from odradek.coordinator.state import Errors
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

SEGMENT = 16384
SETTINGS = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.segment.bytes": SEGMENT,
    "offsets.topic.compression.codec": 4,
    "log.cleaner.backoff.ms": 20,
    "group.initial.rebalance.delay.ms": 0,
}


def _disk_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.suffix == ".log")


async def test_consumer_offsets_stays_bounded_and_reloads(tmp_path: Path) -> None:
    broker = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, thread=False)
    await broker.astart()
    log_dir = next(tmp_path.rglob(f"{OFFSETS_TOPIC}-0"), None)
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        broker.broker.create_topic("orders", 4)
        peak = 0
        for i in range(20_000):
            errors = await coord.commit_offsets(
                "g", -1, "", None, [OffsetCommitEntry("orders", i % 4, i, -1, "")]
            )
            assert errors == [Errors.NONE]
            if i % 100 == 0:
                # a served broker's loop is never this busy: give the cleaner's snapshot and
                # swap callbacks their turn, as network I/O would
                await asyncio.sleep(0.001)
                log_dir = log_dir or next(tmp_path.rglob(f"{OFFSETS_TOPIC}-0"), None)
                if log_dir is not None:
                    peak = max(peak, _disk_size(log_dir))
        assert log_dir is not None
        cleaner = broker.broker.log_cleaner
        assert cleaner.cleanings > 0
        # bounded: a few segments, not 20,000 commits (about 1.3 MB uncompressed)
        # bounded: a handful of segments; without the cleaner 20,000 commits take ~100
        assert peak < 16 * SEGMENT, peak
        handle = broker.broker.partition(OFFSETS_TOPIC, 0)
        assert handle is not None and handle.log.log_end_offset >= 20_000
    finally:
        await broker.astop()
    again = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, thread=False)
    await again.astart()
    try:
        coord = again.broker.group_coordinator
        await coord.wait_loaded()
        got = coord.fetch_offsets("g", [("orders", [0, 1, 2, 3])])
        offsets = {p: om.offset if om else None for p, om in got[1][0][1]}
        assert offsets == {0: 19_996, 1: 19_997, 2: 19_998, 3: 19_999}, got
    finally:
        await again.astop()
