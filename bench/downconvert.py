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

``--broker`` measures the broker instead: one ``odradek broker`` process (file
storage, default settings), ``--records`` records produced to a 1-partition topic with
Produce v9 (``--batch`` records per v2 batch, ``--codec``), then read from offset 0 to the end
by raw-socket consumers that alternate in the same run: Fetch v12 (v2 batches passed through)
and Fetch v3 (down-converted to magic 1), each with max.partition.fetch.bytes 1 MiB, one
request at a time. Broker CPU (utime+stime from /proc) per million records fetched, median
over ``--runs`` passes of each::

    .venv/bin/python bench/downconvert.py --broker                 # 1,000,000 records, 3 runs
    .venv/bin/python bench/downconvert.py --broker --codec lz4
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
    parser.add_argument(
        "--broker", action="store_true", help="broker CPU: Fetch v3 vs Fetch v12 consumers"
    )
    parser.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4"])
    args = parser.parse_args()
    if args.broker:
        _broker_bench(args)
        return
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


# ---------------------------------------------------------------------------------------------
# --broker: broker CPU per million records fetched, Fetch v3 against Fetch v12


def _broker_bench(args: argparse.Namespace) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import OdradekBroker, RawWire

    codec = Compression[args.codec.upper()]
    broker = OdradekBroker({"num.partitions": "1"}).start()
    try:
        wire = RawWire(broker.bootstrap_servers)
        call, call_raw = wire.call, wire.call_raw
        topic = "downconvert"
        _produce_all(call, topic, args.records, args.batch, args.value_size, codec)

        def fetch_v12(offset: int) -> int:
            response: object = call(_fetch_v12(topic, offset))
            part = response.responses[0].partitions[0]  # type: ignore[attr-defined]
            assert part.error_code.value == 0, part.error_code
            return _next_offset_v2(part.records, offset)

        def fetch_v3(offset: int) -> int:
            frame = call_raw(_fetch_v3_frame(topic, offset, wire.next_correlation()))
            return _next_offset_v3(frame, offset)

        results: dict[str, list[float]] = {
            "Fetch v12 (v2 pass-through)": [],
            "Fetch v3 (magic 1)": [],
        }
        requests: dict[str, int] = dict.fromkeys(results, 0)
        for _ in range(args.runs):
            for name, fetch in zip(results, (fetch_v12, fetch_v3), strict=True):
                offset, count = 0, 0
                cpu0 = broker.cpu()
                while offset < args.records and count < 10 * args.records:
                    offset = fetch(offset)
                    count += 1
                cpu1 = broker.cpu()
                results[name].append((cpu1 - cpu0) / args.records * 1e6)
                requests[name] = count
        wire.close()
    finally:
        broker.stop()
    print(
        f"broker: {args.records:,} records of {args.value_size} bytes, {args.batch} per batch, "
        f"{codec.name.lower()}, 1 MiB per partition per Fetch; median of {args.runs}"
    )
    print(f"{'consumer':32} {'broker CPU s / M records':>26} {'runs':>24} {'requests':>9}")
    medians = {}
    for name, samples in results.items():
        medians[name] = statistics.median(samples)
        runs = " ".join(f"{x:.2f}" for x in samples)
        print(f"{name:32} {medians[name]:26.2f} {runs:>24} {requests[name]:>9}")
    v12, v3 = medians.values()
    print(f"ratio Fetch v3 / Fetch v12: {v3 / v12:.1f}x" if v12 else "ratio: n/a")


def _produce_all(
    call: Callable[[object], object],
    topic: str,
    records: int,
    batch: int,
    value_size: int,
    codec: Compression,
) -> None:
    import datetime

    from kio.index import load_request_schema

    value = (b"0123456789abcdef" * (value_size // 16 + 1))[:value_size]
    schema = load_request_schema(0, 9)
    module = __import__(schema.__module__, fromlist=["x"])
    written = 0
    while written < records:
        batches = []
        for _ in range(20):  # 20 batches per request
            n = min(batch, records - written)
            if n <= 0:
                break
            rows = [(None, value, None, 1_700_000_000_000 + written + i) for i in range(n)]
            batches.append(build_batch(rows, compression=codec))
            written += n
        partition = module.PartitionProduceData(index=0, records=b"".join(batches))
        request = schema(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(module.TopicProduceData(name=topic, partition_data=(partition,)),),
        )
        response: object = call(request)
        code = response.responses[0].partition_responses[0].error_code  # type: ignore[attr-defined]
        assert code.value == 0, code


def _fetch_v12(topic: str, offset: int) -> object:
    import datetime

    from kio.index import load_request_schema

    schema = load_request_schema(1, 12)
    module = __import__(schema.__module__, fromlist=["x"])
    partition = module.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=SLICE,
    )
    return schema(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(module.FetchTopic(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


def _next_offset_v2(records: bytes | None, offset: int) -> int:
    """The offset after the last whole v2 batch of ``records``."""
    import struct

    pos, end, nxt = 0, len(records or b""), offset
    data = records or b""
    while pos + 61 <= end:
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > end:
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        nxt = base + last_delta + 1
        pos += 12 + length
    return nxt


def _fetch_v3_frame(topic: str, offset: int, correlation_id: int) -> bytes:
    """A Fetch v3 request, laid out by hand (request header v1)."""
    import struct

    name = topic.encode()
    body = (
        struct.pack(">iiii", -1, 500, 1, 50 << 20)  # replica, max wait, min bytes, max bytes
        + struct.pack(">i", 1)
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">i", 1)
        + struct.pack(">iqi", 0, offset, SLICE)
    )
    header = struct.pack(">hhih", 1, 3, correlation_id, 1) + b"b"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _next_offset_v3(frame: bytes, offset: int) -> int:
    """The offset after the last whole message (set entry) of a Fetch v3 response frame."""
    import struct

    pos = 4 + 4 + 4  # correlation id, throttle time, topic count
    (n,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + n + 4  # topic name, partition count
    _index, error, _hw, size = struct.unpack_from(">ihqi", frame, pos)
    assert error == 0, error
    pos += 18
    end = pos + max(size, 0)
    nxt = offset
    while pos + 12 <= end:
        entry_offset, entry_size = struct.unpack_from(">qi", frame, pos)
        if entry_offset < 0 or pos + 12 + entry_size > end:
            break  # the overflow entry or a partial message
        nxt = entry_offset + 1  # a wrapper's offset is its last inner message's
        pos += 12 + entry_size
    return nxt


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
