"""``read_range_arrow``: a partition's offsets [start, end) as Arrow record batches.

Fetches run on a shared private event loop (one per config, cached for the process: Spark
reuses Python workers), with the next Fetch sent as soon as the previous answer arrives, while
the caller's thread decodes the previous answer into Arrow (``columnar.records_to_arrow``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from . import _protocol as proto
from . import _records
from ._cluster import Cluster
from ._config import CONSUMER, parse_config
from ._sync import _LoopThread
from .columnar import next_offset_after, records_to_arrow
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from .types import TopicPartition

__all__ = ["read_range_arrow"]

_CLIENTS: dict[tuple[tuple[str, str], ...], tuple[_LoopThread, Cluster]] = {}
_LOCK = threading.Lock()
_DONE = object()


def _client(config: dict[str, Any]) -> tuple[_LoopThread, Cluster]:
    key = tuple(sorted((str(k), str(v)) for k, v in config.items()))
    with _LOCK:
        entry = _CLIENTS.get(key)
        if entry is None or not entry[0].thread.is_alive():
            parsed = parse_config(config, CONSUMER, "consumer")
            lt = _LoopThread("odradek-range-reader")
            cluster = lt.call(Cluster, parsed)
            entry = _CLIENTS[key] = (lt, cluster)
        return entry


async def _fetch(cluster: Cluster, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int) -> tuple[bytes, int, int, list[tuple[int, int]] | None]:
    """One Fetch for one partition: (records bytes, error code, high watermark, aborted
    transactions or None under read_uncommitted).

    With ``isolation.level=read_committed`` (the cluster's config) the broker answers up to the
    last stable offset, and the records bytes come back without control batches and aborted
    transactions' batches (``_records.committed_batches``); the high watermark is then the LSO."""
    read_committed = cluster.config.get("isolation.level") == "read_committed"
    if cluster.leader_for(tp) < 0:
        await cluster.wait_for_topics([tp.topic], 10.0)
    conn = await cluster.connection(cluster.leader_for(tp))
    mod = proto.request_module(1, conn.version(1))
    req = proto.build(
        mod.FetchRequest,
        replica_id=-1,
        max_wait=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=1 if read_committed else 0,
        session_id=0,
        session_epoch=-1,
        topics=[proto.nested(mod, "FetchTopic", topic=tp.topic, partitions=[
            proto.nested(mod, "FetchPartition", partition=tp.partition, fetch_offset=offset,
                         partition_max_bytes=max_bytes, log_start_offset=-1, current_leader_epoch=-1)])],
        forgotten_topics_data=[],
        rack_id="",
    )
    resp = await conn.request(req, timeout=30 + max_wait_ms / 1000)
    for t in resp.responses:
        for p in t.partitions:
            if read_committed:
                aborted = [(int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())]
                lso = int(getattr(p, "last_stable_offset", -1))
                return (p.records or b"", int(p.error_code), lso if lso >= 0 else int(p.high_watermark), aborted)
            return (p.records or b"", int(p.error_code), int(p.high_watermark), None)
    return b"", 0, -1, None


async def _pump(cluster: Cluster, tp: TopicPartition, start: int, end: int, out: queue.Queue[Any],
                room: asyncio.Semaphore, max_bytes: int, stop: threading.Event) -> None:
    offset = start
    retries = 0
    try:
        while offset < end and not stop.is_set():
            try:
                data, err, _hw, aborted = await _fetch(cluster, tp, offset, max_bytes, 500)
            except (KafkaConnectionError, KafkaTimeoutError):
                retries += 1
                if retries > 10:
                    raise
                await asyncio.sleep(0.1 * retries)
                await cluster.refresh([tp.topic])
                continue
            if err in (3, 5, 6, 74, 75):
                retries += 1
                if retries > 20:
                    raise KafkaError(f"fetch {tp} failed", err)
                await asyncio.sleep(0.1)
                await cluster.refresh([tp.topic])
                continue
            if err:
                raise KafkaError(f"fetch {tp} at offset {offset} failed", err)
            retries = 0
            nxt = next_offset_after(data, offset)
            if nxt <= offset:
                if data and len(data) >= max_bytes:
                    max_bytes *= 2  # a single batch larger than the fetch size
                continue  # nothing new yet: the broker long-polls (max_wait)
            await room.acquire()
            out.put((data if aborted is None else _records.committed_batches(data, aborted), offset))
            offset = nxt
    except BaseException as exc:  # hand every failure to the reader
        out.put(exc)
        return
    out.put(_DONE)


def read_range_arrow(
    config: dict[str, Any],
    topic: str,
    partition: int,
    start_offset: int,
    end_offset: int,
    *,
    include_headers: bool = False,
    max_rows_per_batch: int = 100_000,
    fetch_max_bytes: int = 16 * 1024 * 1024,
) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches (``columnar.SCHEMA``) holding the records of
    ``topic``/``partition`` with start_offset <= offset < end_offset, in offset order, each at
    most ``max_rows_per_batch`` rows. Blocks until ``end_offset`` is reached (offsets of
    control records and compacted-away records simply do not appear).

    ``config["isolation.level"] = "read_committed"``: only committed records (transactional
    batches of aborted transactions are skipped; reads go up to the last stable offset, so an
    ``end_offset`` past it waits until the transactions before it complete)."""
    if end_offset <= start_offset:
        return
    lt, cluster = _client(config)
    tp = TopicPartition(topic, partition)
    out: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    room_holder: list[asyncio.Semaphore] = []

    async def start() -> None:
        room = asyncio.Semaphore(2)  # at most 2 undecoded answers ahead of the caller
        room_holder.append(room)
        task = asyncio.ensure_future(_pump(cluster, tp, start_offset, end_offset, out, room, fetch_max_bytes, stop))
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)

    lt.run(start())
    room = room_holder[0]
    try:
        while True:
            item = out.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            data, offset = item
            lt.loop.call_soon_threadsafe(room.release)
            rb = records_to_arrow(topic, partition, data, include_headers=include_headers, start_offset=offset, end_offset=end_offset)
            for i in range(0, rb.num_rows, max_rows_per_batch):
                yield rb.slice(i, max_rows_per_batch)
    finally:
        stop.set()
        lt.loop.call_soon_threadsafe(room.release)


_TASKS: set[asyncio.Task[Any]] = set()
