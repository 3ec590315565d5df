"""Protocol micro-benchmarks (not a test): `.venv/bin/python tests/protocol/bench_protocol.py`.

Prints: Produce request decode (µs), Fetch response encode with 6 partitions (µs, ours vs
kio), Produce response encode (µs), record iteration and batch building (records/s, 100-byte
values), FrameDecoder split of a buffer of pipelined small frames (frames/s).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch_v12
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.static.primitive import i16, i32, i32Timedelta, i64

from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response
from odradek.protocol.framing import FrameDecoder, frame
from odradek.protocol.messages import decode_request, encode_body, encode_request
from odradek.protocol.produce_response import ProducePartitionResponse, encode_produce_response
from odradek.protocol.records import Compression, RecordBatch, build_batch


def per_call(fn: Callable[[], object], seconds: float = 0.5) -> float:
    """Best-of-5 seconds per call."""
    best = float("inf")
    for _ in range(5):
        n = 0
        start = time.perf_counter()
        while True:
            for _ in range(100):
                fn()
            n += 100
            elapsed = time.perf_counter() - start
            if elapsed > seconds / 5:
                break
        best = min(best, elapsed / n)
    return best


def main() -> None:
    now = 1_700_000_000_000
    records = [(None, bytes(100), (), now + i) for i in range(1000)]
    batch = build_batch(records)

    # Produce request decode (v9, one partition, a batch of 100 records of 100 B)
    small = build_batch(records[:100])
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name="topic", partition_data=(PartitionProduceData(index=i32(0), records=small),)
            ),
        ),
    )
    produce_frame = encode_request(request, correlation_id=1, client_id="bench")[4:]
    t = per_call(lambda: decode_request(produce_frame))
    print(f"decode_request Produce v9 (1 partition, {len(small)} B batch): {t * 1e6:.2f} µs")

    # Fetch response encode, 6 partitions of 64 KiB each
    region = bytes(65536)
    for version in (11, 12):
        parts = [FetchPartitionResponse(p, 0, 1000, 1000, 0, region) for p in range(6)]
        t = per_call(lambda v=version, ps=parts: encode_fetch_response(v, [("topic", ps)]))
        print(f"encode_fetch_response v{version}, 6 partitions: {t * 1e6:.2f} µs")
    kio_response = fetch_v12.FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(
            fetch_v12.FetchableTopicResponse(
                topic="topic",
                partitions=tuple(
                    fetch_v12.PartitionData(
                        partition_index=i32(p),
                        error_code=ErrorCode.none,
                        high_watermark=i64(1000),
                        last_stable_offset=i64(1000),
                        log_start_offset=i64(0),
                        aborted_transactions=None,
                        records=region,
                    )
                    for p in range(6)
                ),
            ),
        ),
    )
    t = per_call(lambda: encode_body(kio_response))
    print(f"kio encode FetchResponse v12, 6 partitions (copies records): {t * 1e6:.2f} µs")

    produce_parts = [("topic", [ProducePartitionResponse(0, 0, 12345, -1, 0)])]
    for version in (7, 9):
        t = per_call(lambda v=version: encode_produce_response(v, produce_parts))
        print(f"encode_produce_response v{version}, 1 partition: {t * 1e6:.2f} µs")

    # Record iteration
    for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
        data = build_batch(records, compression=codec)
        view = RecordBatch(data)
        t = per_call(lambda v=view: sum(1 for _ in v.records()))
        print(f"record iteration, 100 B values, {codec.name}: {1000 / t / 1e6:.2f} M records/s")
    keyed = build_batch([(b"key-%06d" % i, bytes(100), (), now) for i in range(1000)])
    t = per_call(lambda: sum(1 for _ in RecordBatch(keyed).records()))
    print(f"record iteration, 10 B keys + 100 B values: {1000 / t / 1e6:.2f} M records/s")
    t = per_call(lambda: build_batch(records), seconds=1)
    print(f"build_batch, 100 B values: {1000 / t / 1e6:.2f} M records/s")
    view = RecordBatch(batch)
    t = per_call(view.validate)
    print(f"RecordBatch.validate ({len(batch)} B): {t * 1e6:.2f} µs")

    # Framing: 1000 pipelined 60-byte frames in one buffer
    buffer = b"".join(frame(bytes(60)) for _ in range(1000))
    t = per_call(lambda: FrameDecoder().feed(buffer))
    print(f"FrameDecoder.feed, 1000 frames of 60 B in one buffer: {1000 / t / 1e6:.2f} M frames/s")


if __name__ == "__main__":
    main()
