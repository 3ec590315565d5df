"""__consumer_offsets under the log cleaner with transactional offset commits (what every
exactly-once producer writes: TxnOffsetCommit, then the transaction's marker), on a real
in-process broker: 20,000 transactions, one in ten aborted, keep the partition's size bounded
once markers are past delete.retention.ms, and a restart loads the right offsets."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from odradek.coordinator import OFFSETS_TOPIC, GroupCoordinator, OffsetCommitEntry
from odradek.coordinator.state import Errors
from odradek.coordinator.transaction.manager import TxnMarker
from odradek.coordinator.transaction.state import TransactionResult
from odradek.protocol.records import iter_batches
from odradek.storage import FileLog
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

SEGMENT = 16384
RETENTION_MS = 200  # delete.retention.ms: markers and their horizon, in real time
SETTINGS = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.segment.bytes": SEGMENT,
    "log.cleaner.backoff.ms": 20,
    "log.cleaner.delete.retention.ms": RETENTION_MS,
    "group.initial.rebalance.delay.ms": 0,
}
TXNS = 20_000
PID = 4242


async def _cleaner_caught_up(cleaner: Any, log: Any, timeout: float = 30.0) -> None:
    """Wait until the log has nothing the cleaner would clean (dirty below the ratio)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cleaner.wakeup()
    while loop.time() < deadline:
        todo = cleaner.manager.log_to_clean(log, cleaner.clock.now_ms())
        if todo.dirty_bytes == 0 or todo.cleanable_ratio < log.config.min_cleanable_dirty_ratio:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the cleaner did not catch up: {todo}")


def _batches(log: Any) -> list[Any]:
    out: list[Any] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = log.read(offset, 1 << 20).records
        data = bytes(records) if isinstance(records, (bytes, bytearray)) else records.read()
        got = list(iter_batches(data))
        assert got
        out.extend(got)
        offset = got[-1].last_offset + 1
    return out


def _disk_size(directory: Path) -> int:
    size = 0
    for path in directory.iterdir():
        if path.suffix in (".log", ".txnindex"):
            try:
                size += path.stat().st_size
            except FileNotFoundError:
                pass
    return size


async def test_transactional_offset_commits_stay_bounded(tmp_path: Path) -> None:
    broker = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, thread=False)
    await broker.astart()
    started = time.monotonic()
    try:
        server = broker.broker
        coord: GroupCoordinator = server.group_coordinator
        await coord.wait_loaded()
        server.create_topic("orders", 4)
        cleaner = server.log_cleaner
        p = coord.partition_for("g")
        assert p == 0
        sizes = []
        committed: dict[int, int] = {}
        for i in range(TXNS):
            entry = OffsetCommitEntry("orders", i % 4, i, -1, "")
            errors = await coord.txn_commit_offsets("g", PID, 0, -1, "", None, [entry])
            assert errors == [Errors.NONE]
            aborted = i % 10 == 9
            marker = TxnMarker(
                OFFSETS_TOPIC,
                p,
                PID,
                0,
                TransactionResult.ABORT if aborted else TransactionResult.COMMIT,
                0,
            )
            assert server.txn_markers.append_marker(marker) is ErrorCode.none
            if not aborted:
                committed[i % 4] = i
            if i % 2000 == 1999:
                handle = server.partition(OFFSETS_TOPIC, p)
                assert handle is not None
                await _cleaner_caught_up(cleaner, handle.log)
                assert isinstance(handle.log, FileLog)
                sizes.append(_disk_size(handle.log.directory))
        handle = server.partition(OFFSETS_TOPIC, p)
        assert handle is not None
        plog = handle.log
        assert plog.log_end_offset >= 2 * TXNS
        # 40,000 batches were written (~3 MB). A marker goes at the third cleaning that reads
        # it (the first drops its transaction's records, the second sets its delete horizon,
        # a later one past the horizon drops it: Kafka's passes), so what stays is about the
        # markers of the last two cleanings' transactions: bounded, not growing with commits
        assert max(sizes) < 32 * SEGMENT, sizes
        assert sizes[-1] < 2 * sizes[1], sizes
        # the read_committed view of the log: no aborted transaction listed whose marker is
        # gone (the client would skip the producer's later commits)
        markers = {b.base_offset for b in _batches(plog) if b.is_control and b.record_count}
        listed = handle.producer_state().aborted_transactions(0, plog.log_end_offset)
        assert listed and all(t.last_offset in markers for t in listed)
        assert len(listed) < TXNS // 10 // 4, len(listed)
        assert time.monotonic() - started < 100
    finally:
        await broker.astop()
    again = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, thread=False)
    await again.astart()
    try:
        coord = again.broker.group_coordinator
        await coord.wait_loaded()
        got = coord.fetch_offsets("g", [("orders", [0, 1, 2, 3])])
        offsets = {p: om.offset if om else None for p, om in got[1][0][1]}
        assert offsets == committed, got
    finally:
        await again.astop()
