"""__consumer_offsets under the log cleaner, on a real in-process broker: continuous commits of
one group keep the partition's size on disk bounded, and a restart loads the compacted log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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


async def _cleaner_caught_up(cleaner: Any, log: Any, timeout: float = 30.0) -> None:
    """Wait (on the loop, which the cleaner's snapshots and swaps need) until the log has
    nothing the cleaner would clean: dirty below min.cleanable.dirty.ratio."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cleaner.wakeup()
    while loop.time() < deadline:
        todo = cleaner.manager.log_to_clean(log, cleaner.clock.now_ms())
        if todo.dirty_bytes == 0 or todo.cleanable_ratio < log.config.min_cleanable_dirty_ratio:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the cleaner did not catch up: {todo}")


def _disk_size(directory: Path) -> int:
    """Bytes in the directory's segment files; one deleted by the cleaner between the listing
    and its stat counts as 0 bytes."""
    size = 0
    for path in directory.iterdir():
        if path.suffix == ".log":
            try:
                size += path.stat().st_size
            except FileNotFoundError:
                pass
    return size


async def test_consumer_offsets_stays_bounded_and_reloads(tmp_path: Path) -> None:
    broker = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, thread=False)
    await broker.astart()
    log_dir = next(tmp_path.rglob(f"{OFFSETS_TOPIC}-0"), None)
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        broker.broker.create_topic("orders", 4)
        cleaner = broker.broker.log_cleaner
        sizes = []
        for i in range(20_000):
            errors = await coord.commit_offsets(
                "g", -1, "", None, [OffsetCommitEntry("orders", i % 4, i, -1, "")]
            )
            assert errors == [Errors.NONE]
            if i % 2000 == 1999:
                handle = broker.broker.partition(OFFSETS_TOPIC, 0)
                assert handle is not None
                await _cleaner_caught_up(cleaner, handle.log)
                log_dir = log_dir or next(tmp_path.rglob(f"{OFFSETS_TOPIC}-0"), None)
                assert log_dir is not None
                sizes.append(_disk_size(log_dir))
        assert cleaner.cleanings > 0
        # bounded: once the cleaner has caught up, a few segments of 16 KiB whatever the number
        # of commits (20,000 commits write ~1.4 MB)
        assert max(sizes) < 4 * SEGMENT, sizes
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


@pytest.mark.parametrize("version", [8, 9, 10])
def test_produce_lists_keyless_records_kip467(version: int) -> None:
    """A keyless record on a compacted topic: INVALID_RECORD (87), the offending record listed
    in record_errors by its index in the batch, nothing of the batch written."""
    from odradek.protocol.records import build_batch

    from .wire import Wire, create, produce_request

    broker = EmbeddedBroker({}, storage="memory")
    broker.start()
    try:
        with Wire(broker.bootstrap_servers) as wire:
            create(wire, "c", 1, configs={"cleanup.policy": "compact"})
            batch = build_batch([(b"a", b"1", (), 0), (None, b"2", (), 0), (b"c", b"3", (), 0)])
            r = wire.call(produce_request("c", 0, batch, version=version))
            p = r.responses[0].partition_responses[0]
            assert p.error_code == 87
            assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
                (1, "Compacted topic cannot accept message without key.")
            ]
            r = wire.call(produce_request("c", 0, build_batch([(b"a", b"1", (), 0)])))
            assert r.responses[0].partition_responses[0].base_offset == 0  # nothing was written
    finally:
        broker.stop()
