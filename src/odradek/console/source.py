"""What the console and the cluster metrics know about a cluster, read through odradek.client.

``ClusterSource(bootstrap)`` talks the Kafka protocol only (Metadata, ListOffsets, ListGroups,
DescribeGroups, OffsetFetch, Fetch, DescribeConfigs, OffsetCommit, DeleteGroups), so the same
console works on odradek's own event loop and, through ``odradek console``, against any
Kafka-compatible cluster.

``await snapshot(max_age_s)`` returns a ``ClusterSnapshot`` no older than ``max_age_s``
(concurrent callers share one refresh) and records every group partition's (time, committed,
end) in ``history`` for charts and the time-to-clear estimate.

Lag in seconds needs the timestamp of the record at the committed offset: it is read with one
bounded Fetch per lagging partition and cached by (topic, partition, offset) - a log is
immutable, so the timestamp of an offset never changes. At most ``max_timestamp_reads`` new reads
per refresh; a partition left over shows its lag in seconds as unknown until the next refresh.

``log_sizes`` (optional) returns {(topic, partition): bytes} when the source runs inside a
broker that can tell; against another cluster sizes are unknown (None).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from odradek.client import ConfigEntry, ConsumerRecord, KafkaError, TopicPartition
from odradek.client.aio import AsyncAdmin, AsyncConsumer
from odradek.metrics.cluster import (
    BrokerView,
    ClusterSnapshot,
    GroupPartitionView,
    GroupView,
    MemberView,
    PartitionView,
    TopicView,
)
from odradek.metrics.lag import LagHistory, LagSample, lag_seconds, offset_lag

__all__ = ["MAX_BROWSE", "ClusterSource"]

MAX_BROWSE = 200
"""Most records one message-browser read returns."""
CLIENT_ID = "odradek-console"


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClusterSource:
    def __init__(
        self,
        bootstrap: str,
        *,
        log_sizes: Callable[[], dict[tuple[str, int], int]] | None = None,
        history: LagHistory | None = None,
        now_ms: Callable[[], int] = _now_ms,
        max_timestamp_reads: int = 64,
        client_config: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.log_sizes = log_sizes
        self.history = history if history is not None else LagHistory()
        self.now_ms = now_ms
        self.max_timestamp_reads = max_timestamp_reads
        self._config: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": CLIENT_ID}
        self._config.update(client_config or {})
        self._admin: AsyncAdmin | None = None
        self._reader: AsyncConsumer | None = None
        self._reader_lock = asyncio.Lock()
        self._refresh_lock = asyncio.Lock()
        self._latest: ClusterSnapshot | None = None
        self._timestamps: OrderedDict[tuple[str, int, int], int] = OrderedDict()

    # -- lifecycle ------------------------------------------------------------------------------

    async def admin(self) -> AsyncAdmin:
        if self._admin is None:
            admin = AsyncAdmin(dict(self._config))
            await admin.start()
            self._admin = admin
        return self._admin

    async def _consumer(self) -> AsyncConsumer:
        if self._reader is None:
            cfg = dict(self._config)
            cfg.update(
                {
                    "enable.auto.commit": False,
                    "fetch.max.wait.ms": 100,
                    "max.partition.fetch.bytes": 65536,
                    "fetch.max.bytes": 1048576,
                    "auto.offset.reset": "earliest",
                }
            )
            reader = AsyncConsumer(cfg)
            await reader.start()
            self._reader = reader
        return self._reader

    async def close(self) -> None:
        admin, self._admin = self._admin, None
        reader, self._reader = self._reader, None
        for client in (reader, admin):
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()

    # -- snapshot -------------------------------------------------------------------------------

    @property
    def latest(self) -> ClusterSnapshot | None:
        return self._latest

    async def snapshot(self, max_age_s: float = 1.0) -> ClusterSnapshot:
        snap = self._latest
        if snap is not None and self.now_ms() - snap.taken_ms <= max_age_s * 1000:
            return snap
        started = self.now_ms()
        async with self._refresh_lock:
            snap = self._latest
            if snap is not None and snap.taken_ms >= started:
                return snap  # refreshed by another caller while this one waited
            snap = await self._refresh()
            self._latest = snap
            return snap

    async def _refresh(self) -> ClusterSnapshot:
        # stamped before the first read: a snapshot is never newer than the data in it (stamped
        # after the reads, a topic created while they ran was missing from a "fresh" snapshot)
        taken = self.now_ms()
        admin = await self.admin()
        cluster = await admin.describe_cluster()
        brokers = [BrokerView(n, h, p) for n, (h, p) in sorted(cluster["brokers"].items())]
        described = await admin.list_topics(include_internal=True)
        tps = [
            TopicPartition(t.name, p.partition)
            for t in described.values()
            for p in t.partitions
            if p.error_code == 0 and p.leader >= 0
        ]
        earliest = await admin.list_offsets(dict.fromkeys(tps, "earliest")) if tps else {}
        latest = await admin.list_offsets(dict.fromkeys(tps, "latest")) if tps else {}
        sizes = self.log_sizes() if self.log_sizes is not None else {}
        topics: dict[str, TopicView] = {}
        for name, t in sorted(described.items()):
            parts = []
            for p in sorted(t.partitions, key=lambda p: p.partition):
                tp = TopicPartition(name, p.partition)
                parts.append(
                    PartitionView(
                        name,
                        p.partition,
                        p.leader,
                        tuple(p.replicas),
                        tuple(p.isr),
                        earliest.get(tp, (0, -1))[0],
                        latest.get(tp, (0, -1))[0],
                        sizes.get((name, p.partition)) if self.log_sizes is not None else None,
                        tuple(p.offline_replicas),
                    )
                )
            topics[name] = TopicView(name, t.is_internal, parts)
        now = self.now_ms()
        groups: dict[str, GroupView] = {}
        errors: list[str] = []
        listed = await admin.list_groups()
        ids = [gid for gid, _ptype, _state in listed]
        descriptions = await admin.describe_groups(ids) if ids else {}
        reads_left = self.max_timestamp_reads
        for gid in ids:
            d = descriptions.get(gid)
            if d is None:
                continue
            try:
                offsets = await admin.list_group_offsets(gid)
            except KafkaError as exc:
                errors.append(f"OffsetFetch {gid}: {exc}")
                offsets = {}
            members = [
                MemberView(
                    m.member_id,
                    m.client_id,
                    m.client_host,
                    m.group_instance_id,
                    [(tp[0], tp[1]) for tp in m.assignment],
                )
                for m in d.members
            ]
            owners = {tp: m.member_id for m in members for tp in m.assignment}
            keys = sorted({(tp.topic, tp.partition) for tp in offsets} | set(owners))
            gparts: list[GroupPartitionView] = []
            for topic, partition in keys:
                tp = TopicPartition(topic, partition)
                om = offsets.get(tp)
                committed = om.offset if om is not None and om.offset >= 0 else None
                end = latest.get(tp, (-1, -1))[0]
                start = earliest.get(tp, (0, -1))[0]
                lag: int | None = None
                seconds: float | None = None
                if committed is not None and end >= 0:
                    lag = offset_lag(committed, end)
                    ts: int | None = None
                    if lag > 0:
                        first = max(committed, start)
                        ts = self._timestamps.get((topic, partition, first))
                        if ts is None and reads_left > 0:
                            reads_left -= 1
                            ts = await self._timestamp_at(tp, first)
                    seconds = lag_seconds(now, ts, lag)
                    self.history.record(gid, topic, partition, LagSample(now, committed, end))
                gparts.append(
                    GroupPartitionView(
                        topic,
                        partition,
                        committed,
                        end,
                        lag,
                        seconds,
                        self.history.time_to_clear(gid, topic, partition),
                        owners.get((topic, partition)),
                    )
                )
            groups[gid] = GroupView(gid, d.state, d.protocol_type, d.protocol, members, gparts)
        self.history.forget(
            {(g.group_id, p.topic, p.partition) for g in groups.values() for p in g.partitions}
        )
        return ClusterSnapshot(
            taken, cluster.get("cluster_id"), int(cluster.get("controller", -1)), brokers, topics,
            groups, errors,
        )

    async def _timestamp_at(self, tp: TopicPartition, offset: int) -> int | None:
        """Timestamp of the first record at or after ``offset`` (None if none arrives in time)."""
        records = await self.read(tp.topic, tp.partition, offset=offset, limit=1, timeout_s=1.0)
        if not records:
            return None
        ts = records[0].timestamp
        cache = self._timestamps
        cache[(tp.topic, tp.partition, offset)] = ts
        while len(cache) > 10_000:
            cache.popitem(last=False)
        return ts

    # -- reads and actions ----------------------------------------------------------------------

    async def read(
        self,
        topic: str,
        partition: int,
        *,
        offset: int | None = None,
        timestamp_ms: int | None = None,
        limit: int = 20,
        timeout_s: float = 2.0,
    ) -> list[ConsumerRecord]:
        """Up to ``limit`` (at most MAX_BROWSE) records of one partition from ``offset``, or from
        the first record with a timestamp >= ``timestamp_ms``; waits at most ``timeout_s``."""
        limit = max(1, min(limit, MAX_BROWSE))
        tp = TopicPartition(topic, partition)
        async with self._reader_lock:
            reader = await self._consumer()
            if timestamp_ms is not None:
                found = await reader.offsets_for_times({tp: timestamp_ms})
                hit = found.get(tp)
                if hit is None:
                    return []
                offset = hit.offset
            reader.assign([tp])
            if offset is None or offset < 0:
                reader.seek_to_beginning(tp)
            else:
                reader.seek(tp, offset)
            out: list[ConsumerRecord] = []
            deadline = time.monotonic() + timeout_s
            while len(out) < limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                for r in await reader.poll(timeout=left, max_records=limit - len(out)):
                    if r.topic == topic and r.partition == partition:
                        out.append(r)
            reader.assign([])
            return out[:limit]

    async def topic_configs(self, topic: str) -> dict[str, ConfigEntry]:
        admin = await self.admin()
        return (await admin.describe_configs([topic])).get(topic, {})

    async def reset_offsets(
        self, group: str, topic: str, to: str | int, partitions: list[int] | None = None
    ) -> dict[TopicPartition, int]:
        """Commit new offsets for a group without members: ``to`` is "earliest", "latest" or an
        offset (clamped into each partition's [log start, log end])."""
        admin = await self.admin()
        d = (await admin.describe_groups([group])).get(group)
        if d is not None and d.members:
            raise KafkaError(
                f"group {group} has {len(d.members)} member(s): stop its consumers first", 25
            )
        described = await admin.describe_topics([topic])
        parts = sorted(p.partition for p in described[topic].partitions)
        if partitions is not None:
            parts = [p for p in parts if p in partitions]
        tps = [TopicPartition(topic, p) for p in parts]
        earliest = await admin.list_offsets(dict.fromkeys(tps, "earliest"))
        latest = await admin.list_offsets(dict.fromkeys(tps, "latest"))
        new: dict[TopicPartition, int] = {}
        for tp in tps:
            lo, hi = earliest[tp][0], latest[tp][0]
            if to == "earliest":
                new[tp] = lo
            elif to == "latest":
                new[tp] = hi
            else:
                new[tp] = min(max(int(to), lo), hi)
        await admin.alter_group_offsets(group, dict(new))
        self._latest = None
        return new

    async def delete_group(self, group: str) -> None:
        admin = await self.admin()
        await admin.delete_groups([group])
        self._latest = None
