"""Offset helpers shared by the consumer and the admin client: ListOffsets, OffsetFetch and
OffsetCommit (a module of its own so that neither imports the other).

ListOffsets "timestamps": -2 earliest, -1 latest, -3 max timestamp, else a timestamp in ms.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .. import _protocol as proto
from .._cluster import Cluster
from ..errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from ..types import OffsetAndMetadata, TopicPartition

__all__ = ["commit_group_offsets", "fetch_group_offsets", "list_offsets"]

_SPEC = {"earliest": -2, "latest": -1, "max_timestamp": -3}
_RETRIABLE_LEADER = {3, 5, 6, 7, 74, 75, 13}
_COORDINATOR_ERRORS = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE / NOT_COORDINATOR


def _timestamp(v: Any) -> int:
    if isinstance(v, str):
        return _SPEC[v]
    return int(v)


def _ms(v: Any) -> int:
    if v is None:
        return -1
    if isinstance(v, int):
        return v
    return int(v.timestamp() * 1000)


async def list_offsets(
    cluster: Cluster, query: dict[TopicPartition, Any], *, read_committed: bool = False, timeout: float = 30.0
) -> dict[TopicPartition, tuple[int, int]]:
    """{tp: spec} -> {tp: (offset, timestamp)}; (-1, -1) where no offset matches a timestamp.

    Each partition is asked of its leader. A leader gone (its connection closed or refused, its
    broker id no longer in the metadata) or a leader error (NOT_LEADER_OR_FOLLOWER,
    LEADER_NOT_AVAILABLE, ...) refreshes the metadata of the partitions' topics and asks the
    new leader, every ``retry.backoff.ms``, until ``timeout`` seconds have passed."""
    todo = {TopicPartition(*tp): _timestamp(v) for tp, v in query.items()}
    out: dict[TopicPartition, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout
    while todo:
        await cluster.wait_for_topics({tp.topic for tp in todo}, max(0.1, deadline - time.monotonic()))
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            leader = cluster.leader_for(tp)
            if leader < 0:
                parts = cluster.partitions_for(tp.topic)
                if parts is not None and tp.partition >= len(parts):
                    raise KafkaError(f"unknown partition {tp}", 3)
            by_node.setdefault(leader, []).append(tp)
        retry = False
        for node, tps in by_node.items():
            if node < 0:
                retry = True
                continue
            try:
                conn = await cluster.connection(node)
                version = conn.version(2)
                mod = proto.request_module(2, version)
                topics: dict[str, list[Any]] = {}
                for tp in tps:
                    ts = todo[tp]
                    topics.setdefault(tp.topic, []).append(
                        proto.nested(mod, "ListOffsetsPartition", partition_index=tp.partition, timestamp=ts,
                                     current_leader_epoch=-1, max_num_offsets=1)
                    )
                resp = await conn.request(
                    proto.build(
                        mod.ListOffsetsRequest,
                        replica_id=-1,
                        isolation_level=1 if read_committed else 0,
                        topics=[proto.nested(mod, "ListOffsetsTopic", name=t, partitions=ps) for t, ps in topics.items()],
                    )
                )
            except KafkaConnectionError:
                retry = True
                continue
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(str(t.name), int(p.partition_index))
                    err = int(p.error_code)
                    if err in _RETRIABLE_LEADER:
                        retry = True
                        continue
                    if err:
                        raise KafkaError(f"ListOffsets for {tp} failed", err)
                    offset = int(getattr(p, "offset", -1))
                    if offset == -1 and getattr(p, "old_style_offsets", None):
                        offset = int(p.old_style_offsets[0])
                    out[tp] = (offset, int(getattr(p, "timestamp", -1)))
                    todo.pop(tp, None)
        if todo:
            if not retry or time.monotonic() > deadline:
                raise KafkaError(f"ListOffsets got no answer for {sorted(todo)}", 7)
            await asyncio.sleep(cluster.config["retry.backoff.ms"] / 1000)
            try:
                # the topics themselves: a cache filled by an all-topics refresh does not
                # name them among the wanted ones
                await cluster.refresh({tp.topic for tp in todo})
            except KafkaConnectionError:
                pass  # asked again on the next round
    return out


async def _coordinator_request(cluster: Cluster, group_id: str, api_key: int, make: Any, timeout: float = 30.0) -> Any:
    """Send ``make(module, version)`` to the group coordinator, retrying coordinator errors.

    The coordinator is found again (FindCoordinator) after NOT_COORDINATOR,
    COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or a lost coordinator (connection
    closed or refused, broker id no longer in the metadata), until ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    refresh = False
    while True:
        try:
            node = await cluster.coordinator(group_id, refresh=refresh, timeout=max(0.1, deadline - time.monotonic()))
            conn = await cluster.connection(node)
            version = conn.version(api_key)
            resp = await conn.request(make(proto.request_module(api_key, version), version))
        except KafkaConnectionError:
            if time.monotonic() > deadline:
                raise
            refresh = True
            await asyncio.sleep(0.1)
            continue
        err = int(getattr(resp, "error_code", 0) or 0)
        if err in _COORDINATOR_ERRORS and time.monotonic() < deadline:
            refresh = True
            await asyncio.sleep(0.1)
            continue
        return resp


async def fetch_group_offsets(
    cluster: Cluster, group_id: str, partitions: list[TopicPartition] | None, *, require_stable: bool = False,
    timeout: float = 120.0,
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """OffsetFetch: committed offsets of ``group_id`` (all partitions when ``partitions`` is None).

    ``require_stable`` (KIP-447): while a transaction that commits offsets of the group is open,
    the broker answers UNSTABLE_OFFSET_COMMIT; asked again every 100 ms until it has ended
    (KafkaTimeoutError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await _fetch_group_offsets(cluster, group_id, partitions, require_stable)
        except KafkaError as exc:
            if not require_stable or exc.code != _UNSTABLE_OFFSET_COMMIT:
                raise
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"group {group_id!r}: offsets still pending in a transaction after {timeout:g} s") from None
            await asyncio.sleep(0.1)


_UNSTABLE_OFFSET_COMMIT = 88


async def _fetch_group_offsets(
    cluster: Cluster, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool
) -> dict[TopicPartition, OffsetAndMetadata | None]:

    def make(mod: Any, version: int) -> Any:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [proto.nested(mod, "OffsetFetchRequestTopic", name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        return proto.build(mod.OffsetFetchRequest, group_id=group_id, topics=topics, require_stable=require_stable)

    resp = await _coordinator_request(cluster, group_id, 9, make)
    err = int(getattr(resp, "error_code", 0) or 0)
    if err:
        raise KafkaError(f"OffsetFetch for group {group_id!r} failed", err)
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(str(t.name), int(p.partition_index))
            perr = int(p.error_code)
            if perr and perr != 3:
                raise KafkaError(f"OffsetFetch for {tp} failed", perr)
            off = int(p.committed_offset)
            out[tp] = None if off < 0 else OffsetAndMetadata(off, p.metadata or "", int(getattr(p, "committed_leader_epoch", -1)))
    if partitions is not None:
        for tp in partitions:
            out.setdefault(tp, None)
    return out


async def commit_group_offsets(
    cluster: Cluster,
    group_id: str,
    offsets: dict[TopicPartition, OffsetAndMetadata],
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> None:
    def make(mod: Any, version: int) -> Any:
        by_topic: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                proto.nested(mod, "OffsetCommitRequestPartition", partition_index=tp.partition,
                             committed_offset=om.offset, committed_leader_epoch=om.leader_epoch,
                             committed_metadata=om.metadata, commit_timestamp=-1)
            )
        return proto.build(
            mod.OffsetCommitRequest, group_id=group_id, generation_id=generation_id,
            generation_id_or_member_epoch=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, retention_time_ms=-1,
            topics=[proto.nested(mod, "OffsetCommitRequestTopic", name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    resp = await _coordinator_request(cluster, group_id, 8, make)
    for t in resp.topics:
        for p in t.partitions:
            err = int(p.error_code)
            if err:
                raise KafkaError(f"OffsetCommit for {t.name}-{p.partition_index} failed", err)
