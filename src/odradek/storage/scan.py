"""Reading a partition log from an offset to its end, batch by batch: the one copy of that
loop (producer-state replay and the group coordinator's load both use it)."""

from __future__ import annotations

from collections.abc import Iterator

from odradek.protocol.records import RecordBatch, iter_batches
from odradek.storage.api import FileRegion, PartitionLog

__all__ = ["scan_to_end"]


def scan_to_end(
    log: PartitionLog, offset: int, chunk_bytes: int = 1 << 20
) -> Iterator[list[RecordBatch]]:
    """Yield the batches of ``log`` from the one holding ``offset`` up to the log end offset,
    one list per read of about ``chunk_bytes`` (callers may yield to the event loop between
    lists). Batches that end below ``offset`` are skipped; the scan stops at the log end
    offset seen by each read, or when a read makes no progress."""
    while offset < log.log_end_offset:
        records = log.read(offset, chunk_bytes).records
        data = records.read() if isinstance(records, FileRegion) else bytes(records)
        if not data:
            return
        batches = []
        for batch in iter_batches(data):
            last = batch.last_offset
            if last < offset:
                continue
            batches.append(batch)
            offset = last + 1
        if not batches:
            return
        yield batches
