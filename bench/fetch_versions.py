"""Broker CPU per million records fetched: Fetch v12 (topic names) against Fetch v17 (topic ids).

    .venv/bin/python bench/fetch_versions.py                      # 1,000,000 records, 5 passes each
    .venv/bin/python bench/fetch_versions.py --records 200000 --partition-bytes 65536

One ``odradek broker`` process (file storage, default settings). ``--records`` records of
``--value-size`` bytes are produced to a 1-partition topic with Produce v9 (``--batch`` records
per v2 batch). Then raw-socket consumers read the partition from offset 0 to the end, one
request at a time, alternating in the same run:

* Fetch v12: the topic named in the request and in the response;
* Fetch v17: the topic's id (from Metadata v12) in the request and in the response, and the
  v17 fields (``replica_state``, ``replica_directory_id``) at their defaults.

Each Fetch asks for ``--partition-bytes`` (16 KiB by default, so that the per-request cost
is what is measured, not the copying of records). The figure is the broker's CPU
(utime+stime from /proc) per million records fetched, median over ``--runs`` passes of each,
and the ratio v17 / v12.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kio.index import load_request_schema

from common import OdradekBroker, RawWire
from downconvert import _next_offset_v2, _produce_all
from odradek.protocol.records import Compression


def _fetch_request(version: int, topic: str, topic_id: uuid.UUID, offset: int, size: int) -> Any:
    schema = load_request_schema(1, version)
    module = __import__(schema.__module__, fromlist=["x"])
    common: dict[str, Any] = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": size,
    }
    request: dict[str, Any] = {
        "max_wait": datetime.timedelta(milliseconds=500),
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": (),
        "rack_id": "",
    }
    if version >= 13:
        partition = module.FetchPartition(**common)
        topics = (module.FetchTopic(topic_id=topic_id, partitions=(partition,)),)
    else:
        partition = module.FetchPartition(**common)
        topics = (module.FetchTopic(topic=topic, partitions=(partition,)),)
        request["replica_id"] = -1
    return schema(topics=topics, **request)


def _topic_id(call: Callable[[Any], Any], topic: str) -> uuid.UUID:
    schema = load_request_schema(3, 12)
    module = __import__(schema.__module__, fromlist=["x"])
    response = call(
        schema(
            topics=(module.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    found: uuid.UUID = response.topics[0].topic_id
    assert found is not None and found.int != 0, response
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partition-bytes", type=int, default=16 << 10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    broker = OdradekBroker({"num.partitions": "1"}).start()
    try:
        wire = RawWire(broker.bootstrap_servers)
        call = wire.call
        topic = "fetchversions"
        _produce_all(call, topic, args.records, args.batch, args.value_size, Compression.NONE)
        topic_id = _topic_id(call, topic)

        def reader(version: int) -> Callable[[int], int]:
            def fetch(offset: int) -> int:
                response = call(
                    _fetch_request(version, topic, topic_id, offset, args.partition_bytes)
                )
                part = response.responses[0].partitions[0]
                assert part.error_code.value == 0, part.error_code
                return _next_offset_v2(part.records, offset)

            return fetch

        results: dict[str, list[float]] = {"Fetch v12 (topic name)": [], "Fetch v17 (topic id)": []}
        requests: dict[str, int] = dict.fromkeys(results, 0)
        deadline_requests = 10 * args.records
        for _ in range(args.runs):
            for name, version in zip(results, (12, 17), strict=True):
                fetch = reader(version)
                offset, count = 0, 0
                cpu0 = broker.cpu()
                while offset < args.records and count < deadline_requests:
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
        f"{args.partition_bytes} bytes per Fetch; median of {args.runs} passes each, alternating"
    )
    print(f"{'consumer':26} {'broker CPU s / M records':>26} {'runs':>36} {'requests':>9}")
    medians = {}
    for name, samples in results.items():
        medians[name] = statistics.median(samples)
        runs = " ".join(f"{x:.2f}" for x in samples)
        print(f"{name:26} {medians[name]:26.2f} {runs:>36} {requests[name]:>9}")
    v12, v17 = medians.values()
    print(f"ratio Fetch v17 / Fetch v12: {v17 / v12:.2f}" if v12 else "ratio: n/a")


if __name__ == "__main__":
    main()
