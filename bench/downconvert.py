"""CPU cost of the old message formats, per million records, in one process.

    .venv/bin/python bench/downconvert.py            # 1,000,000 records, median of 3 runs
    .venv/bin/python bench/downconvert.py --records 200000 --runs 1

The log holds v2 batches of ``--batch`` records (no key, ``--value-size``-byte values, two
batches kinds: uncompressed and lz4). Measured with time.process_time():

* v2 pass-through: what a Fetch v4+ response costs per partition — the hand-written v4
  encoder with the records object passed through (no record is touched), one response per
  1 MiB of log, as the broker answers a consumer with max.partition.fetch.bytes 1 MiB;
* down-convert to magic 1 (Fetch v2-v3) and magic 0 (Fetch v0-v1): the same 1 MiB slices
  through LazyDownConversion (all chunks produced);
* up-convert (Produce v0-v2): magic 1 message sets of ``--batch`` records to one v2 batch each.

Prints CPU seconds per million records and records/s for each line. For down-conversion the
records are those an old consumer receives whole: a response declares the v2 size (or the
first converted batch), and uncompressed magic 0/1 messages are larger than v2 records, so
the tail of a converted slice is cut (the consumer fetches it next time, as from Kafka).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response
from odradek.protocol.legacy_records import (
    LazyDownConversion,
    down_convert,
    iter_messages,
    message_set_to_batch,
)
from odradek.protocol.records import Compression, build_batch

SLICE = 1 << 20


def make_log(records: int, batch: int, value_size: int, codec: Compression) -> list[bytes]:
    """1 MiB slices of whole v2 batches holding ``records`` records in all."""
    value = (b"0123456789abcdef" * (value_size // 16 + 1))[:value_size]
    batches = []
    offset = 0
    while offset < records:
        n = min(batch, records - offset)
        rows = [(None, value, None, 1_700_000_000_000 + offset + i) for i in range(n)]
        batches.append(build_batch(rows, base_offset=offset, compression=codec))
        offset += n
    slices: list[bytes] = []
    current: list[bytes] = []
    size = 0
    for b in batches:
        if size + len(b) > SLICE and current:
            slices.append(b"".join(current))
            current, size = [], 0
        current.append(b)
        size += len(b)
    if current:
        slices.append(b"".join(current))
    return slices


def pass_through(slices: list[bytes]) -> None:
    for data in slices:
        parts, _size = encode_fetch_response(
            4, [("topic", [FetchPartitionResponse(0, 0, 1, 1, records=data)])]
        )
        for _part in parts:
            pass


def lazy(to_magic: int) -> Callable[[list[bytes]], None]:
    def run(slices: list[bytes]) -> None:
        for data in slices:
            conversion = LazyDownConversion(data, len(data), to_magic, 0)
            for _chunk in conversion.chunks():
                pass

    return run


def delivered(to_magic: int, slices: list[bytes]) -> int:
    """Whole messages an old consumer gets from the slices (the declared size cuts the
    converted data when it grows: the consumer fetches the rest next time)."""
    total = 0
    for data in slices:
        conversion = LazyDownConversion(data, len(data), to_magic, 0)
        out = b"".join(conversion.chunks())
        total += sum(1 for m in iter_messages(out, partial_ok=True) if m.offset >= 0)
    return total


def timed(fn: Callable[[list[bytes]], None], slices: list[bytes], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.process_time()
        fn(slices)
        samples.append(time.process_time() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{args.records:,} records, {args.batch} per batch, {args.value_size}-byte values, "
        f"median of {args.runs}"
    )
    print(f"{'case':44} {'CPU s / M records':>18} {'records/s':>12} {'records':>10}")
    for codec in (Compression.NONE, Compression.LZ4):
        slices = make_log(args.records, args.batch, args.value_size, codec)
        cases: list[tuple[str, Callable[[list[bytes]], None], list[bytes], int]] = [
            ("v2 pass-through (Fetch v4+ encoder)", pass_through, slices, args.records),
            ("down-convert to magic 1 (Fetch v2-v3)", lazy(1), slices, delivered(1, slices)),
            ("down-convert to magic 0 (Fetch v0-v1)", lazy(0), slices, delivered(0, slices)),
        ]
        # Produce v0-v2: magic 1 sets of one batch each, converted back to v2
        sets = [down_convert(data, 1) for data in slices]
        per_batch = [s for data in sets for s in _split_wrappers(data, codec, args.batch)]
        cases.append(
            ("up-convert magic 1 -> v2 (Produce v2)", _up_convert, per_batch, args.records),
        )
        for name, fn, data, count in cases:
            seconds = timed(fn, data, args.runs)
            rate = count / seconds if seconds else float("inf")
            label = f"{name} [{codec.name.lower()}]"
            print(f"{label:44} {seconds * 1e6 / count:18.3f} {rate:12,.0f} {count:>10,}")


def _up_convert(sets: list[bytes]) -> None:
    for data in sets:
        message_set_to_batch(data)


def _split_wrappers(data: bytes, codec: Compression, batch: int) -> list[bytes]:
    """A converted slice as one message set per producer request (``batch`` messages)."""
    import struct

    entries = []
    pos = 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        entries.append(data[pos : pos + 12 + size])
        pos += 12 + size
    if codec != Compression.NONE:
        return entries  # one wrapper per v2 batch already
    return [b"".join(entries[i : i + batch]) for i in range(0, len(entries), batch)]


if __name__ == "__main__":
    main()
