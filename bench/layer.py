"""Broker CPU per million records on the request path alone: Produce and Fetch frames fed to a
``KafkaConnection`` of an in-process broker through a transport that only counts bytes (no
socket, no client), so the broker layer's own cost is measured without the noise of a client
sharing the machine. Works against any tree whose ``odradek.broker.server`` exports ``Broker``
and ``KafkaConnection`` (run the old tree with PYTHONPATH=<old tree>/src).

    .venv/bin/python bench/layer.py [--records 2000000] [--batch 1000] [--repeat 5]

Per phase: records of 100 bytes in batches of ``--batch`` (one batch per request, one
partition, acks=1, file storage in a temporary dir); consume: Fetch v12 requests of 1 MiB from
offset 0 to the end. Prints process CPU seconds per million records (median of ``--repeat``
rounds, each on a fresh broker).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "broker"))

from wire import fetch_request, produce_request

from odradek.broker.config import BrokerConfig
from odradek.broker.server import Broker, KafkaConnection
from odradek.protocol.messages import encode_request
from odradek.protocol.records import build_batch

ENGINE = "file"


class _Transport:
    """Just enough of an asyncio transport: counts what is written."""

    def __init__(self) -> None:
        self.written = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def writelines(self, parts: list[Any]) -> None:
        self.written += sum(len(p) for p in parts)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        raise RuntimeError("the broker closed the connection")

    def close(self) -> None:
        pass


async def _round(records: int, batch: int, data_dir: Path) -> tuple[float, float]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data_dir),
            "storage.engine": ENGINE,
        }
    )
    async with Broker(config) as broker:
        broker.create_topic("bench", 1)
        conn = KafkaConnection(broker)
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        payload = build_batch([(None, b"x" * 100, (), None)] * batch)
        frame = encode_request(
            produce_request("bench", 0, payload), correlation_id=1, client_id="bench"
        )
        requests = records // batch
        t0 = time.process_time()
        for _ in range(requests):
            conn.data_received(frame)
        produce = time.process_time() - t0
        plog = broker.partition("bench", 0).log  # type: ignore[union-attr]
        end = plog.log_end_offset
        assert end == requests * batch, end
        t0 = time.process_time()
        offset = 0
        reads = 0
        while offset < end and reads < 10 * requests:
            before = transport.written
            conn.data_received(
                encode_request(
                    fetch_request("bench", {0: offset}), correlation_id=2, client_id="bench"
                )
            )
            got = transport.written - before
            reads += 1
            offset += max(1, (got - 200) // (len(payload) // batch))  # about the records read
        consume = time.process_time() - t0
        conn.connection_lost(None)
    return produce / records * 1e6, consume / records * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--engine", default="file", choices=("file", "memory"))
    args = ap.parse_args()
    global ENGINE
    ENGINE = args.engine
    produce, consume = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-layer-") as tmp:
            p, c = asyncio.run(_round(args.records, args.batch, Path(tmp)))
        produce.append(p)
        consume.append(c)
    print(
        f"produce {statistics.median(produce):.4f} s/M  consume {statistics.median(consume):.4f} s/M"
        f"  (produce {[round(x, 4) for x in produce]}, consume {[round(x, 4) for x in consume]})"
    )


if __name__ == "__main__":
    main()
