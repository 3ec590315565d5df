"""MemoryLog: the PartitionLog contract held in memory (tests, ``odradek.testing``, the
``storage.engine=memory`` broker)."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

from odradek.clock import Clock, SystemClock
from odradek.protocol.records import RecordBatch
from odradek.storage.config import LogConfig
from odradek.storage.log import LogBase

__all__ = ["MemoryLog", "MemorySegment"]


class MemorySegment:
    """A segment in memory: the stamped batches back to back in one ``bytearray`` plus a full
    index (every batch's position, end and last offset), so reads use the same
    position/length arithmetic as ``LogSegment`` and return the same bytes."""

    def __init__(self, base_offset: int, created_ms: int, clock: Clock) -> None:
        self.clock = clock
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.data = bytearray()
        self._positions = array("q")
        self._ends = array("q")
        self._lasts = array("q")
        self._max_timestamps = array("q")
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.created_ms = created_ms
        self.last_modified_ms = created_ms

    @property
    def size(self) -> int:
        return len(self.data)

    def append(self, buf: bytearray | memoryview, infos: list[tuple[int, int, int, int]]) -> None:
        start = len(self.data)
        self.data += buf
        for position, size, last, max_ts in infos:
            self._positions.append(start + position)
            self._ends.append(start + position + size)
            self._lasts.append(last)
            self._max_timestamps.append(max_ts)
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
        self.next_offset = infos[-1][2] + 1
        self.last_modified_ms = self.clock.now_ms()

    def translate_offset(self, offset: int) -> tuple[int, int, int, int] | None:
        i = bisect_left(self._lasts, offset)
        if i == len(self._lasts):
            return None
        pos, end = self._positions[i], self._ends[i]
        base = self._lasts[i - 1] + 1 if i else self.base_offset
        return pos, base, end - pos, self._lasts[i]

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool = True
    ) -> tuple[int, int] | None:
        i = bisect_left(self._lasts, offset)
        if i == len(self._lasts):
            return None
        position, first_end = self._positions[i], self._ends[i]
        limit = min(max_position, len(self.data))
        if position >= limit:
            return position, 0
        budget_end = position + max_bytes
        if budget_end >= limit:
            return position, limit - position
        if first_end > budget_end:
            return (position, first_end - position) if min_one_batch else (position, 0)
        j = bisect_right(self._ends, budget_end) - 1
        return position, self._ends[j] - position

    def _batch_index(self, offset: int) -> int:
        return bisect_left(self._lasts, offset)

    def _first_record_at_or_after(
        self, i: int, timestamp: int, starting_offset: int
    ) -> tuple[int, int]:
        view = memoryview(self.data)[self._positions[i] : self._ends[i]]
        try:
            for record in RecordBatch(view).records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        except ValueError:
            pass
        finally:
            view.release()
        base = self._lasts[i - 1] + 1 if i else self.base_offset
        return max(base, starting_offset), self._max_timestamps[i]

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        for i in range(self._batch_index(starting_offset), len(self._lasts)):
            if self._max_timestamps[i] >= timestamp:
                return self._first_record_at_or_after(i, timestamp, starting_offset)
        return None

    def record_of_max_timestamp(self) -> tuple[int, int] | None:
        if self.max_timestamp < 0:
            return None
        i = self._batch_index(self.offset_of_max_timestamp)
        return self._first_record_at_or_after(i, self.max_timestamp, 0)

    def first_batch_timestamp(self) -> int:
        return self._max_timestamps[0] if self._max_timestamps else -1

    def largest_timestamp(self) -> int:
        return self.max_timestamp if self.max_timestamp > 0 else self.last_modified_ms

    def truncate_to(self, offset: int) -> int:
        i = bisect_left(self._lasts, offset)
        if i == len(self._lasts):
            return 0
        position = self._positions[i]
        removed = len(self.data) - position
        del self.data[position:]
        for column in (self._positions, self._ends, self._lasts, self._max_timestamps):
            del column[i:]
        self.next_offset = self._lasts[-1] + 1 if self._lasts else self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = -1
        for ts, last in zip(self._max_timestamps, self._lasts, strict=True):
            if ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = ts, last
        return removed

    def index_full(self) -> bool:
        return False  # no index limits in memory

    def on_become_inactive(self) -> None:
        pass

    def flush(self) -> None:
        pass


class _BytesReader:
    """A SegmentReader over a memory segment's buffer (a retention or cleaner swap replaces a
    segment's buffer rather than emptying it, so the reader keeps seeing the old bytes)."""

    def __init__(self, data: bytearray) -> None:
        self._data = data

    def read(self, position: int, length: int) -> bytes:
        return bytes(self._data[position : position + length])

    def close(self) -> None:
        pass


class MemoryLog(LogBase):
    """A partition log in memory with exactly FileLog's semantics (rolling by segment.bytes and
    segment.ms, retention by whole segments, truncation, leader epochs), minus durability:
    ``flush()`` only moves the recovery point. ``read()`` returns ``bytes``."""

    def __init__(
        self,
        topic: str = "test",
        partition: int = 0,
        config: LogConfig | None = None,
        clock: Clock | None = None,
        *,
        log_start_offset: int = 0,
    ) -> None:
        super().__init__(topic, partition, config or LogConfig(), clock or SystemClock())
        self.segments = [MemorySegment(log_start_offset, self.clock.now_ms(), self.clock)]
        self._bases = [log_start_offset]
        self.log_start_offset = self.log_end_offset = self.high_watermark = log_start_offset
        self.recovery_point = log_start_offset

    def _new_segment(self, base_offset: int, now_ms: int) -> MemorySegment:
        return MemorySegment(base_offset, now_ms, self.clock)

    def _region(self, segment: MemorySegment, position: int, length: int) -> bytes:
        with memoryview(segment.data) as view:  # one copy, and no export left behind
            return view[position : position + length].tobytes()

    def _remove_segment(self, segment: MemorySegment) -> None:
        segment.data = bytearray()

    # --- log cleaner hooks (see LogBase) ---------------------------------------------------

    def segment_reader(self, segment: MemorySegment) -> _BytesReader:
        return _BytesReader(segment.data)

    def new_cleaned_segment(self, base_offset: int, created_ms: int) -> MemorySegment:
        return MemorySegment(base_offset, created_ms, self.clock)

    def close(self) -> None:
        self.closed = True

    def delete(self) -> None:
        self.closed = True
        for segment in self.segments:
            segment.data = bytearray()
