"""Print the content of segment and checkpoint files, like Kafka's ``kafka-dump-log.sh``.

    python -m odradek.storage.dump 00000000000000000000.log [--records]
    python -m odradek.storage.dump 00000000000000000000.index
    python -m odradek.storage.dump 00000000000000000000.timeindex
    python -m odradek.storage.dump leader-epoch-checkpoint

For a ``.log`` file every batch is listed with its position, offsets, sizes, timestamps and
whether its CRC is valid; a damaged or torn tail is reported where it starts. Compacted logs:
offsets the cleaner removed show as ``gap:`` lines (between batches, and between records with
``--records``), a batch holding fewer records than its offset span says so, and a record with a
null value is marked ``tombstone``. The log cleaner's ``.log.cleaned`` / ``.log.swap`` /
``.log.deleted`` files are dumped like ``.log`` files. Read-only.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

from odradek.protocol.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, RecordBatch

__all__ = ["dump_file", "main"]



def _dump_log(path: Path, records: bool) -> Iterator[str]:
    data = path.read_bytes()
    stem = path.name.split(".")[0]
    base = int(stem) if stem.isdigit() else 0
    yield f"Dumping {path} (base offset {base}, {len(data)} bytes)"
    position = 0
    expected = base
    while position < len(data):
        if len(data) - position < BATCH_HEADER_SIZE:
            yield f"position: {position} torn tail: {len(data) - position} bytes"
            return
        batch = RecordBatch(data, position)
        h = batch.header()
        base_offset, batch_length, epoch, crc = (
            h.base_offset,
            h.batch_length,
            h.partition_leader_epoch,
            h.crc,
        )
        attributes, lod, count = h.attributes, h.last_offset_delta, h.record_count
        size = batch_length + LOG_OVERHEAD
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or position + size > len(data):
            yield f"position: {position} bad batch length {batch_length} (file ends at {len(data)})"
            return
        valid = batch.compute_crc() == crc
        if base_offset > expected:
            yield f"gap: offsets {expected}..{base_offset - 1} removed by compaction"
        expected = base_offset + lod + 1
        compacted = f" (compacted: {count} of {lod + 1} offsets kept)" if count != lod + 1 else ""
        yield (
            f"baseOffset: {base_offset} lastOffset: {base_offset + lod} count: {count} "
            f"baseSequence: {h.base_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {epoch} isTransactional: {bool(attributes & 0x10)} "
            f"isControl: {bool(attributes & 0x20)} position: {position} "
            f"CreateTime: {h.max_timestamp if not attributes & 0x08 else -1} "
            f"LogAppendTime: {h.max_timestamp if attributes & 0x08 else -1} "
            f"baseTimestamp: {h.base_timestamp} "
            f"size: {size} magic: {h.magic} compresscodec: {attributes & 0x07} crc: {crc} "
            f"isvalid: {valid}{compacted}"
        )
        if records and valid:
            try:
                next_offset = base_offset
                for record in batch.records():
                    if record.offset > next_offset:
                        yield f"| gap: offsets {next_offset}..{record.offset - 1} removed"
                    next_offset = record.offset + 1
                    value = "null (tombstone)" if record.value is None else repr(record.value)
                    yield (
                        f"| offset: {record.offset} timestamp: {record.timestamp} "
                        f"key: {record.key!r} value: {value} headers: {record.headers!r}"
                    )
            except ValueError as exc:
                yield f"| records unreadable: {exc}"
        position += size


def _dump_index(path: Path, entry: struct.Struct, names: tuple[str, str]) -> Iterator[str]:
    data = path.read_bytes()
    base = int(path.stem) if path.stem.isdigit() else 0
    yield f"Dumping {path} (base offset {base}, {len(data) // entry.size} entries)"
    if len(data) % entry.size:
        yield f"size {len(data)} is not a multiple of {entry.size}: damaged"
    for a, b in entry.iter_unpack(data[: len(data) - len(data) % entry.size]):
        if names[0] == "offset":
            yield f"offset: {base + a} position: {b}"
        else:
            yield f"timestamp: {a} offset: {base + b}"


def dump_file(path: Path, *, records: bool = False) -> Iterator[str]:
    """Lines describing ``path`` (a .log, .index, .timeindex or checkpoint file)."""
    if path.suffix == ".log" or ".log." in path.name:
        return _dump_log(path, records)
    if path.suffix == ".index":
        return _dump_index(path, struct.Struct(">ii"), ("offset", "position"))
    if path.suffix == ".timeindex":
        return _dump_index(path, struct.Struct(">qi"), ("timestamp", "offset"))
    return iter(path.read_text().splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m odradek.storage.dump", description=__doc__.splitlines()[0]
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--records", action="store_true", help="also print every record")
    args = parser.parse_intermixed_args(argv)
    for path in args.files:
        for line in dump_file(path, records=args.records):
            sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
