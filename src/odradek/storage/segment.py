"""LogSegment: one ``.log`` file of whole record batches plus its two sparse indexes."""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.records import RecordBatch
from odradek.storage.config import LogConfig
from odradek.storage.errors import KafkaStorageError
from odradek.storage.index import CorruptIndexError, OffsetIndex, TimeIndex

__all__ = ["LogSegment", "log_file_name"]

logger = logging.getLogger("odradek.storage")

HEADER_SIZE = 61
LOG_OVERHEAD = 12
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_SCAN_CHUNK = 8 * 1024
_RECOVER_CHUNK = 4 * 1024 * 1024
# baseOffset @0, batchLength @8, lastOffsetDelta @23, maxTimestamp @35
_SCAN = struct.Struct(">qi11xi8xq")
_SCAN_SIZE = _SCAN.size  # 43
# ... plus partitionLeaderEpoch @12, magic @16 and crc @17 for recovery
_RECOVER = struct.Struct(">qiibIxxi8xq")
_INT32_MAX = 2**31 - 1


def log_file_name(base_offset: int, suffix: str = ".log") -> str:
    """Kafka's file name: the base offset as 20 zero-padded digits plus the suffix."""
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """One segment of a partition log: ``<baseOffset:020>.log``, ``.index``, ``.timeindex``.

    ``.log`` format: record batches (RecordBatch v2, magic 2) back to back, exactly as the
    producer sent them apart from the stamped baseOffset and partitionLeaderEpoch; no file header,
    no padding. Every batch's offsets lie in ``[base_offset, base_offset + 2**31 - 1]``, and the
    offsets grow strictly from batch to batch. The file holds whole batches only: a torn tail
    left by a crash is cut off by ``recover()`` before anything is served.

    ``.index`` / ``.timeindex``: see ``OffsetIndex`` and ``TimeIndex``. An index entry is added
    for the first batch that starts more than ``index.interval.bytes`` after the last entry.

    The ``.log`` file stays open for the segment's life (reads hand out ``(fd, position,
    length)`` regions); it is opened with ``O_APPEND`` and every append is one ``os.write`` of
    the whole request buffer, so a killed process leaves either the whole write or a torn tail.
    """

    __slots__ = (
        "_bytes_since_index",
        "_first_batch_timestamp",
        "base_offset",
        "closed",
        "created_ms",
        "directory",
        "epoch_starts",
        "fd",
        "index",
        "index_interval_bytes",
        "log_path",
        "max_timestamp",
        "next_offset",
        "offset_of_max_timestamp",
        "size",
        "time_index",
        "truncated_bytes",
    )

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        created_ms: int,
        *,
        suffix: str = "",
    ):
        """``suffix`` (e.g. ``".cleaned"``) is appended to the three file names: the log
        cleaner writes its output segments under such names (see ``change_suffix``)."""
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / log_file_name(base_offset, ".log" + suffix)
        self.index = OffsetIndex(
            directory / log_file_name(base_offset, ".index" + suffix),
            base_offset,
            config.max_index_entries,
        )
        self.time_index = TimeIndex(
            directory / log_file_name(base_offset, ".timeindex" + suffix),
            base_offset,
            config.segment_index_bytes // TimeIndex.ENTRY_SIZE,
        )
        self.index_interval_bytes = config.index_interval_bytes
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # lastOffset of the batch with max_timestamp
        self.created_ms = created_ms
        self._first_batch_timestamp: int | None = None
        self._bytes_since_index = 0
        self.truncated_bytes = 0  # cut off by the last recover()
        # (partitionLeaderEpoch, base offset) of each batch whose epoch exceeds every earlier
        # one in this segment; filled by recover() only (rebuilds the leader-epoch-checkpoint)
        self.epoch_starts: list[tuple[int, int]] = []
        self.closed = False

    # --- opening --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        created_ms: int,
        *,
        recover: bool,
    ) -> LogSegment:
        """Open an existing (or new) segment.

        With ``recover`` the whole file is scanned (``recover()``); otherwise the indexes are
        loaded and sanity-checked, and rebuilt by a scan if they are missing or damaged.
        """
        segment = cls(directory, base_offset, config, created_ms)
        if recover:
            segment.recover()
            return segment
        try:
            segment.index.open_existing()  # entries load lazily on the first lookup
            segment.time_index.open_existing()
            last_offset, last_position = segment.index.last_entry()
            if segment.index and last_position >= segment.size:
                raise CorruptIndexError(f"{segment.index.path}: entry past the end of the log")
            segment._load_tail_state()
            if segment.index and last_offset >= segment.next_offset:
                raise CorruptIndexError(f"{segment.index.path}: offset past the end of the log")
            if segment.time_index and segment.time_index.last_entry()[1] >= segment.next_offset:
                raise CorruptIndexError(
                    f"{segment.time_index.path}: offset past the end of the log"
                )
        except (CorruptIndexError, struct.error) as exc:
            if segment.size:
                logger.warning("rebuilding indexes of %s: %s", segment.log_path, exc)
            segment.recover()
        return segment

    def _load_tail_state(self) -> None:
        """Derive next offset, max timestamp and index spacing from the last index entries and a
        scan of the batches after the last offset-index entry (at most about one interval)."""
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = (ts, ts_offset) if ts >= 0 else (-1, -1)
        _, position = self.index.last_entry()
        self.next_offset = self.base_offset
        for _, _, _, last, max_ts in self.scan(position):
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
            self.next_offset = last + 1
        if position and self.next_offset == self.base_offset:
            raise CorruptIndexError(f"{self.index.path}: no batch at indexed position {position}")
        self._bytes_since_index = self.size - position
        self._first_batch_timestamp = None

    # --- writing --------------------------------------------------------------------------

    def append(self, buf: bytearray | memoryview, infos: list[tuple[int, int, int, int]]) -> None:
        """Write ``buf`` (whole, stamped batches described by ``infos``) with one write call."""
        start = self.size
        try:
            written = os.write(self.fd, buf)
            if written != len(buf):  # a short write to a regular file: disk full or a signal
                view = memoryview(buf)
                while written < len(buf):
                    written += os.write(self.fd, view[written:])
        except OSError as exc:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            raise KafkaStorageError(exc.errno, f"append to {self.log_path} failed: {exc}") from exc
        if start == 0:
            self._first_batch_timestamp = infos[0][3]
        interval = self.index_interval_bytes
        since = self._bytes_since_index
        for position, size, last, max_ts in infos:
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
                self.offset_of_max_timestamp = last
            if since > interval:
                self.index.append(last, start + position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                since = 0
            since += size
        self._bytes_since_index = since
        self.size = start + len(buf)
        self.next_offset = infos[-1][2] + 1

    def flush(self) -> None:
        """fsync the log file and write + fsync both indexes."""
        os.fsync(self.fd)
        self.index.flush(fsync=True)
        self.time_index.flush(fsync=True)

    def on_become_inactive(self) -> None:
        """Called on roll (Kafka's onBecomeInactiveSegment): record the segment's max timestamp
        in the time index and write pending index entries (without fsync)."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush(fsync=False)
        self.time_index.flush(fsync=False)

    # --- reading --------------------------------------------------------------------------

    def scan(
        self, position: int, end: int | None = None
    ) -> Iterator[tuple[int, int, int, int, int]]:
        """Yield ``(position, base_offset, size, last_offset, max_timestamp)`` of each batch that
        starts at or after ``position`` (which must be a batch boundary) and before ``end``."""
        end = self.size if end is None else min(end, self.size)
        fd = self.fd
        unpack = _SCAN.unpack_from
        chunk = b""
        chunk_start = position
        while position + _SCAN_SIZE <= end:
            rel = position - chunk_start
            if rel + _SCAN_SIZE > len(chunk):
                chunk = os.pread(fd, min(_SCAN_CHUNK, end - position), position)
                chunk_start, rel = position, 0
                if len(chunk) < _SCAN_SIZE:
                    return
            base, batch_length, lod, max_ts = unpack(chunk, rel)
            size = batch_length + LOG_OVERHEAD
            yield position, base, size, base + lod, max_ts
            position += size

    def translate_offset(self, offset: int) -> tuple[int, int, int, int] | None:
        """``(position, base_offset, size, last_offset)`` of the first batch whose last offset is
        >= ``offset`` (the batch holding ``offset``, or the next one), or None.

        The hot path of every read: one index bisect, then usually one ``pread`` of the batch
        headers after the index entry (written out rather than via ``scan``: it is ~20% faster).
        """
        index = self.index
        if not index._loaded:
            self.ensure_indexes_loaded()
        i = bisect_right(index._keys, offset - self.base_offset) - 1
        position = index._values[i] if i >= 0 else 0
        end = self.size
        fd = self.fd
        unpack = _SCAN.unpack_from
        while position + _SCAN_SIZE <= end:
            chunk = os.pread(fd, min(_SCAN_CHUNK, end - position), position)
            n = len(chunk)
            rel = 0
            while rel + _SCAN_SIZE <= n:
                base, batch_length, lod, _ = unpack(chunk, rel)
                last = base + lod
                if last >= offset:
                    return position + rel, base, batch_length + LOG_OVERHEAD, last
                rel += batch_length + LOG_OVERHEAD
            if n < _SCAN_SIZE:
                return None
            position += rel
        return None

    def ensure_indexes_loaded(self) -> None:
        """Load both indexes (lazily opened); rebuild them by a recovery scan if damaged."""
        try:
            if not self.index._loaded:
                self.index._load()
            if not self.time_index._loaded:
                self.time_index._load()
        except (CorruptIndexError, OSError) as exc:
            logger.warning("rebuilding indexes of %s: %s", self.log_path, exc)
            self.recover()

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool = True
    ) -> tuple[int, int] | None:
        """``(position, length)`` of whole batches from the batch holding ``offset``: at most
        ``max_bytes`` (but at least one batch when ``min_one_batch``), none starting at or after
        ``max_position``. None when the segment has no batch at or after ``offset``."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, _, size, _ = found
        limit = min(max_position, self.size)
        if position >= limit:
            return position, 0
        budget_end = position + max_bytes
        if budget_end >= limit:
            return position, limit - position
        if position + size > budget_end:
            return (position, size) if min_one_batch else (position, 0)
        scan_from = max(position, self.index.lookup_position(budget_end))
        end = scan_from
        for pos, _, sz, _, _ in self.scan(scan_from, limit):
            if pos + sz > budget_end:
                break
            end = pos + sz
        return position, end - position

    def read_bytes(self, position: int, length: int) -> bytes:
        data = os.pread(self.fd, length, position)
        while len(data) < length:
            more = os.pread(self.fd, length - len(data), position + len(data))
            if not more:
                break
            data += more
        return data

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``starting_offset`` whose timestamp
        is >= ``timestamp``, or None. Uses the time index, then scans batch headers, then the
        records of the one matching batch."""
        self.ensure_indexes_loaded()
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(ts_offset, starting_offset))
        for pos, base, size, last, max_ts in self.scan(position):
            if max_ts >= timestamp and last >= starting_offset:
                return self._first_record_at_or_after(
                    pos, size, timestamp, starting_offset, base, max_ts
                )
        return None

    def _first_record_at_or_after(
        self, pos: int, size: int, timestamp: int, starting_offset: int, base: int, max_ts: int
    ) -> tuple[int, int]:
        try:
            for record in RecordBatch(self.read_bytes(pos, size)).records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        except ValueError:
            pass
        return max(base, starting_offset), max_ts

    def record_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the segment's largest timestamp."""
        if self.max_timestamp < 0:
            return None
        found = self.translate_offset(self.offset_of_max_timestamp)
        if found is None:
            return None
        pos, base, size, _ = found
        return self._first_record_at_or_after(
            pos, size, self.max_timestamp, base, base, self.max_timestamp
        )

    def first_batch_timestamp(self) -> int:
        """maxTimestamp of the first batch (time-based rolling), -1 if empty."""
        if self._first_batch_timestamp is None:
            if self.size < _SCAN_SIZE:
                return -1
            self._first_batch_timestamp = _SCAN.unpack_from(os.pread(self.fd, _SCAN_SIZE, 0))[3]
        return self._first_batch_timestamp

    def largest_timestamp(self) -> int:
        """Kafka's segment.largestTimestamp: the max timestamp, else the file's mtime (ms)."""
        if self.max_timestamp > 0:
            return self.max_timestamp
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # --- truncation and recovery -------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after; returns bytes removed."""
        self.ensure_indexes_loaded()
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self._load_tail_state()
        return removed

    def recover(self) -> int:
        """Scan every batch, check length bounds, magic, offsets and CRC, rebuild both indexes,
        and cut the file at the first bad byte (logged as a warning naming file and position).
        Returns the number of bytes truncated."""
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self._first_batch_timestamp = None
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        infos: list[tuple[int, int, int, int]] = []
        epoch_starts: list[tuple[int, int]] = []
        latest_epoch = -1
        file_size = os.fstat(self.fd).st_size
        self.size = file_size
        position = 0
        bad: str | None = None
        chunk = b""
        chunk_start = 0
        while position < file_size:
            if file_size - position < HEADER_SIZE:
                bad = f"{file_size - position} trailing bytes are not a whole batch header"
                break
            rel = position - chunk_start
            if rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(self.fd, min(_RECOVER_CHUNK, file_size - position), position)
                chunk_start, rel = position, 0
            base, batch_length, epoch, magic, crc, lod, max_ts = _RECOVER.unpack_from(chunk, rel)
            size = batch_length + LOG_OVERHEAD
            if batch_length < _MIN_BATCH_LENGTH:
                bad = f"batch length {batch_length} is below the minimum"
                break
            if position + size > file_size:
                bad = f"batch of {size} bytes extends past the end of the file ({file_size})"
                break
            if magic != 2:
                bad = f"magic byte is {magic}"
                break
            if base < self.next_offset or lod < 0 or base + lod - self.base_offset > _INT32_MAX:
                bad = f"batch offsets {base}..{base + lod} out of order or out of range"
                break
            if rel + size > len(chunk):
                chunk = os.pread(
                    self.fd, max(size, min(_RECOVER_CHUNK, file_size - position)), position
                )
                chunk_start, rel = position, 0
            if crc32c(memoryview(chunk)[rel + 21 : rel + size]) != crc:
                bad = "CRC mismatch"
                break
            infos.append((position, size, base + lod, max_ts))
            if epoch > latest_epoch:
                epoch_starts.append((epoch, base))
                latest_epoch = epoch
            self.next_offset = base + lod + 1
            position += size
        if bad is not None:
            logger.warning(
                "recovery of %s: truncating at byte position %d of %d: %s",
                self.log_path,
                position,
                file_size,
                bad,
            )
            os.ftruncate(self.fd, position)
        self.size = position
        # rebuild indexes exactly as append() would have
        since = 0
        interval = self.index_interval_bytes
        for pos, size, last, max_ts in infos:
            if max_ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = max_ts, last
            if since > interval:
                self.index.append(last, pos)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                since = 0
            since += size
        self._bytes_since_index = since
        self.index.flush(fsync=False)
        self.time_index.flush(fsync=False)
        self.truncated_bytes = file_size - position
        self.epoch_starts = epoch_starts
        return self.truncated_bytes

    def index_full(self) -> bool:
        """The offset or time index has no room for another entry (then the log rolls)."""
        index, time_index = self.index, self.time_index
        return index._count >= index.max_entries or time_index._count >= time_index.max_entries

    # --- life cycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Write pending index entries and close the file (no fsync; see flush)."""
        if self.closed:
            return
        try:
            self.index.flush(fsync=False)
            self.time_index.flush(fsync=False)
        finally:
            self.closed = True
            os.close(self.fd)

    def delete_files(self) -> None:
        """Unlink the three files. The ``.log`` fd stays open (regions handed out earlier stay
        readable) until ``close_fd()``."""
        for path in (self.log_path, self.index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the three files from ``<name><old>`` to ``<name><new>`` (Kafka's
        changeFileSuffixes), the indexes first and the ``.log`` last: the log cleaner's swap
        protocol and start-up recovery key on the ``.log`` file's name alone (see
        ``FileLog``). Open fds stay valid. A missing index file is skipped."""
        for index in (self.index, self.time_index):
            path = index.path
            target = path.with_name(path.name.removesuffix(old) + new)
            try:
                path.rename(target)
            except FileNotFoundError:
                pass
            index.path = target
        target = self.log_path.with_name(self.log_path.name.removesuffix(old) + new)
        self.log_path.rename(target)
        self.log_path = target

    def close_fd(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
