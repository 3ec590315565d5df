"""A follower append that raises an I/O error: the fetcher stops fetching the partition and
tells the broker (``ReplicaFetcherManager.on_storage_error``, set by ``LogDirs``, which takes
the partition's log dir offline), as Kafka's fetcher marks the partition failed and its
LogDirFailureChannel takes the dir offline."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

from odradek.broker.replica_fetcher import FetcherConfig
from odradek.broker.replica_fetcher_manager import ReplicaFetcherManager
from odradek.broker.replica_manager import ReplicationConfig
from odradek.clock import SystemClock
from odradek.protocol.records import build_batch
from odradek.storage.errors import KafkaStorageError


class _Log:
    log_end_offset = 0
    log_start_offset = 0
    high_watermark = 0


class _FailingPartition:
    topic = "t"
    partition = 0
    leader_epoch = 3

    def __init__(self) -> None:
        self.log = _Log()

    def append_as_follower(self, records: Any) -> None:
        raise KafkaStorageError(28, "No space left on device")


def test_a_failed_follower_append_stops_the_fetch_and_reports_the_partition() -> None:
    async def run() -> list[tuple[str, int, str]]:
        failed: list[tuple[str, int, str]] = []
        config = FetcherConfig.from_replication(ReplicationConfig())
        manager = ReplicaFetcherManager(1, config, 1, SystemClock())
        manager.on_storage_error = lambda t, p, why: failed.append((t, p, why))
        partition: Any = _FailingPartition()
        fetcher = manager.add_fetcher_for_partition(2, "127.0.0.1", 1, partition)
        state = fetcher._states[("t", 0)]
        pd = SimpleNamespace(
            error_code=ErrorCode.none,
            diverging_epoch=SimpleNamespace(epoch=-1, end_offset=-1),
            records=build_batch([(None, b"v", (), None)]),
            high_watermark=1,
            log_start_offset=0,
        )
        fetcher._apply(state, pd)
        assert fetcher.partition_count() == 0  # no more fetching for it
        manager.close_all()
        await asyncio.sleep(0)
        return failed

    failed = asyncio.run(run())
    assert [(t, p) for t, p, _ in failed] == [("t", 0)]
    assert "No space left" in failed[0][2]
