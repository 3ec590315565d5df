"""Random appends / reads / rolls / truncations / retention / reopenings of a log, checked
against a plain list of batches."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from odradek.clock import ManualClock
from odradek.protocol.records import build_batch, iter_batches
from odradek.storage import FileLog, LogConfig, MemoryLog, PartitionLog

from .conftest import T0, read_bytes

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=64, retention_ms=-1)


@dataclasses.dataclass
class ModelBatch:
    base: int
    last: int
    data: bytes  # as stamped
    timestamps: list[int]


class LogMachine(RuleBasedStateMachine):
    engine = "file"

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self.tmp = Path(tempfile.mkdtemp(prefix="odradek-sm-", dir="/tmp"))
        self.log: PartitionLog = self._open(0)
        self.batches: list[ModelBatch] = []
        self.start = 0
        self.epoch = 0

    def _open(self, recovery_point: int, log_start: int | None = None) -> PartitionLog:
        if self.engine == "file":
            return FileLog(
                self.tmp / "sm-0",
                CONFIG,
                self.clock,
                recovery_point=recovery_point,
                log_start_offset=log_start,
            )
        return MemoryLog("sm", 0, CONFIG, self.clock)

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.start

    @initialize()
    def nothing(self) -> None:
        pass

    @rule(
        sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3),
        value_size=st.integers(0, 120),
        ts=st.integers(-5, 1000),
        bump_epoch=st.booleans(),
    )
    def append(self, sizes: list[int], value_size: int, ts: int, bump_epoch: bool) -> None:
        if bump_epoch:
            self.epoch += 1
        raw = []
        stamps = []
        for k, n in enumerate(sizes):
            times = [T0 + ts + 7 * k + i for i in range(n)]
            raw.append(build_batch([(None, b"v" * value_size, (), t) for t in times]))
            stamps.append(times)
        buf = bytearray(b"".join(raw))
        result = self.log.append(buf, self.epoch)
        assert result.base_offset == self.end
        pos = 0
        for data, times in zip(raw, stamps, strict=True):
            base = self.end
            stamped = bytes(buf[pos : pos + len(data)])
            pos += len(data)
            self.batches.append(ModelBatch(base, base + len(times) - 1, stamped, times))
        assert result.last_offset == self.end - 1

    @rule(data=st.data(), max_bytes=st.integers(1, 3000), limit=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, limit: bool) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        max_offset = data.draw(st.integers(offset, self.end)) if limit else None
        result = self.log.read(offset, max_bytes, max_offset=max_offset)
        got = list(iter_batches(read_bytes(result.records)))
        assert sum(b.size for b in got) == len(result.records)  # whole batches only
        bound = self.end if max_offset is None else max_offset
        if offset >= bound:
            assert got == []
            return
        i = next(j for j, b in enumerate(self.batches) if b.last >= offset)
        if self.batches[i].last >= bound:  # the first batch reaches past max_offset
            assert got == []
            return
        assert got, offset
        expected = self.batches[i : i + len(got)]
        assert [bytes(b.raw()) for b in got] == [b.data for b in expected]
        assert expected[-1].last < bound
        if len(got) > 1:
            assert sum(len(b.data) for b in expected) <= max_bytes

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        self.log.truncate_to(offset)
        self.batches = [b for b in self.batches if b.last < offset]

    @rule(keep=st.integers(0, 1500))
    def retention(self, keep: int) -> None:
        self.log.update_config(dataclasses.replace(CONFIG, retention_bytes=keep))
        self.log.delete_old_segments(self.clock.now_ms())
        self.log.update_config(CONFIG)
        self.start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b.last >= self.start]
        if self.batches:
            assert self.batches[0].base == self.start

    @precondition(lambda self: self.engine == "file")
    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        log = self.log
        if clean:
            log.close()
            self.log = self._open(log.recovery_point, log.log_start_offset)
        else:  # as after a kill -9: no close, recovery from the last flushed recovery point
            for segment in log.segments:  # type: ignore[attr-defined]
                segment.close_fd()
            self.log = self._open(log.recovery_point, log.log_start_offset)

    @rule(partial=st.booleans())
    def flush(self, partial: bool) -> None:
        if partial:
            self.log.maybe_flush(self.clock.now_ms())  # flushes rolled segments only
        else:
            self.log.flush()
            assert self.log.recovery_point == self.end

    @rule(data=st.data())
    def timestamp_lookup(self, data: st.DataObject) -> None:
        target = T0 + data.draw(st.integers(-10, 1100))
        expected = None
        for b in self.batches:
            for k, t in enumerate(b.timestamps):
                if t >= target:
                    expected = (b.base + k, t)
                    break
            if expected:
                break
        assert self.log.offset_for_timestamp(target) == expected

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert self.log.high_watermark == self.end
        best = None
        for b in self.batches:
            for k, t in enumerate(b.timestamps):
                if best is None or t > best[1]:
                    best = (b.base + k, t)
        assert self.log.max_timestamp() == best

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


class MemoryLogMachine(LogMachine):
    engine = "memory"


_settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(60)
def test_file_log_state_machine() -> None:
    LogMachine.TestCase.settings = _settings
    LogMachine.TestCase().runTest()


@pytest.mark.timeout(60)
def test_memory_log_state_machine() -> None:
    MemoryLogMachine.TestCase.settings = _settings
    MemoryLogMachine.TestCase().runTest()
