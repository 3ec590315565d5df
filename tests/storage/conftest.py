"""Fixtures for the storage tests: batches, a manual clock, and both log engines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.records import build_batch
from odradek.storage import FileLog, LogConfig, MemoryLog, PartitionLog

T0 = 1_700_000_000_000


def make_batch(
    count: int = 1, *, ts: int = T0, value_size: int = 10, key: bytes | None = b"k"
) -> bytes:
    """A v2 batch of ``count`` records with timestamps ts, ts+1, ..."""
    return build_batch([(key, bytes([65 + i % 26]) * value_size, (), ts + i) for i in range(count)])


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


LogFactory = Callable[..., PartitionLog]


@pytest.fixture(params=["file", "memory"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_log(engine: str, tmp_path: Path, clock: ManualClock) -> Iterator[LogFactory]:
    """Factory for a log of the parametrized engine: ``make_log(config=None)``."""
    logs: list[PartitionLog] = []

    def factory(config: LogConfig | None = None) -> PartitionLog:
        config = config or LogConfig()
        log: PartitionLog
        if engine == "file":
            log = FileLog(tmp_path / f"topic-{len(logs)}", config, clock)
        else:
            log = MemoryLog("topic", len(logs), config, clock)
        logs.append(log)
        return log

    yield factory
    for log in logs:
        log.close()


def read_bytes(records: object) -> bytes:
    """The bytes of a ReadResult.records (FileRegion or bytes)."""
    if isinstance(records, (bytes, bytearray)):
        return bytes(records)
    return records.read()  # type: ignore[attr-defined]
