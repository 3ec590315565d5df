"""AsyncAdmin: topics, partitions, configs, groups and offsets.

Also holds the offset helpers the consumer shares (ListOffsets, OffsetFetch, OffsetCommit).
ListOffsets "timestamps": -2 earliest, -1 latest, -3 max timestamp, else a timestamp in ms.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from .. import _protocol as proto
from .._cluster import Cluster
from .._config import ADMIN, parse_config
from ..errors import KafkaConnectionError, KafkaError
from ..types import OffsetAndMetadata, PartitionInfo, TopicDescription, TopicPartition

__all__ = ["AsyncAdmin", "ConfigEntry", "GroupDescription", "MemberDescription", "NewTopic"]

_SPEC = {"earliest": -2, "latest": -1, "max_timestamp": -3}
_RETRIABLE_LEADER = {3, 5, 6, 7, 74, 75, 13}
_COORDINATOR_ERRORS = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS / NOT_AVAILABLE / NOT_COORDINATOR


class NewTopic(NamedTuple):
    name: str
    num_partitions: int = 1
    replication_factor: int = 1
    config: dict[str, str] | None = None


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    source: int = -1


class MemberDescription(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    assignment: list[TopicPartition]


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error_code: int = 0


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
    """{tp: spec} -> {tp: (offset, timestamp)}; (-1, -1) where no offset matches a timestamp."""
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
            await asyncio.sleep(0.1)
            await cluster.refresh()
    return out


async def _coordinator_request(cluster: Cluster, group_id: str, api_key: int, make: Any, timeout: float = 30.0) -> Any:
    """Send ``make(module, version)`` to the group coordinator, retrying coordinator errors."""
    deadline = time.monotonic() + timeout
    refresh = False
    while True:
        try:
            node = await cluster.coordinator(group_id, refresh=refresh)
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
    cluster: Cluster, group_id: str, partitions: list[TopicPartition] | None
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """OffsetFetch: committed offsets of ``group_id`` (all partitions when ``partitions`` is None)."""

    def make(mod: Any, version: int) -> Any:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [proto.nested(mod, "OffsetFetchRequestTopic", name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        return proto.build(mod.OffsetFetchRequest, group_id=group_id, topics=topics, require_stable=False)

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


class AsyncAdmin:
    """Asyncio admin client. ``config`` uses the Java admin client's keys."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = parse_config(config, ADMIN, "admin")
        self._cluster = Cluster(self.config)
        self._timeout_ms: int = self.config["request.timeout.ms"]

    async def start(self) -> None:
        await self._cluster.refresh([])

    async def close(self) -> None:
        await self._cluster.close()

    async def __aenter__(self) -> AsyncAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _controller(self) -> Any:
        await self._cluster.refresh([])
        node = self._cluster.controller_id
        if node < 0 or node not in self._cluster.brokers:
            return await self._cluster.any_connection()
        return await self._cluster.connection(node)

    # -- topics -----------------------------------------------------------------------------
    async def create_topics(
        self, topics: Iterable[NewTopic | str], *, validate_only: bool = False, raise_on_exists: bool = True
    ) -> dict[str, int]:
        """Create topics; returns {name: error code} (0 = created). Raises on the first error
        unless it is TOPIC_ALREADY_EXISTS and ``raise_on_exists`` is False."""
        new = [t if isinstance(t, NewTopic) else NewTopic(t) for t in topics]
        conn = await self._controller()
        mod = proto.request_module(19, conn.version(19))
        req = proto.build(
            mod.CreateTopicsRequest,
            topics=[
                proto.nested(mod, "CreatableTopic", name=t.name, num_partitions=t.num_partitions,
                             replication_factor=t.replication_factor, assignments=[],
                             configs=[proto.nested(mod, "CreatableTopicConfig", name=k, value=str(v)) for k, v in (t.config or {}).items()])
                for t in new
            ],
            timeout=self._timeout_ms,
            validate_only=validate_only,
        )
        resp = await conn.request(req)
        out = {}
        for r in resp.topics:
            err = int(r.error_code)
            out[str(r.name)] = err
            if err and (raise_on_exists or err != 36):
                raise KafkaError(f"CreateTopics {r.name!r}: {getattr(r, 'error_message', '') or ''}", err)
        await self._wait_topics_visible([t.name for t in new] if not validate_only else [])
        return out

    async def _wait_topics_visible(self, names: list[str], timeout: float = 10.0) -> None:
        if names:
            try:
                await self._cluster.wait_for_topics(names, timeout)
            except KafkaError:
                pass

    async def delete_topics(self, names: Iterable[str]) -> dict[str, int]:
        names = list(names)
        conn = await self._controller()
        mod = proto.request_module(20, conn.version(20))
        resp = await conn.request(proto.build(mod.DeleteTopicsRequest, topic_names=names, timeout=self._timeout_ms))
        out = {}
        for r in resp.responses:
            err = int(r.error_code)
            out[str(r.name)] = err
            if err:
                raise KafkaError(f"DeleteTopics {r.name!r}", err)
        for n in names:
            self._cluster.topics.pop(n, None)
        return out

    async def list_topics(self, *, include_internal: bool = False) -> dict[str, TopicDescription]:
        await self._cluster.refresh(all_topics=True)
        return {
            name: TopicDescription(name, parts, name in self._cluster.internal_topics, _tid(self._cluster.topic_ids.get(name)))
            for name, parts in sorted(self._cluster.topics.items())
            if include_internal or name not in self._cluster.internal_topics
        }

    async def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        names = list(names)
        await self._cluster.refresh(names)
        out = {}
        for n in names:
            parts = self._cluster.topics.get(n)
            if parts is None:
                raise KafkaError(f"unknown topic {n!r}", self._cluster.topic_errors.get(n, 3))
            out[n] = TopicDescription(n, parts, n in self._cluster.internal_topics, _tid(self._cluster.topic_ids.get(n)))
        return out

    async def create_partitions(self, new_counts: dict[str, int], *, validate_only: bool = False) -> None:
        """Grow topics to the given total partition counts."""
        conn = await self._controller()
        mod = proto.request_module(37, conn.version(37))
        req = proto.build(
            mod.CreatePartitionsRequest,
            topics=[proto.nested(mod, "CreatePartitionsTopic", name=t, count=n, assignments=None) for t, n in new_counts.items()],
            timeout=self._timeout_ms,
            validate_only=validate_only,
        )
        resp = await conn.request(req)
        for r in resp.results:
            if int(r.error_code):
                raise KafkaError(f"CreatePartitions {r.name!r}: {r.error_message or ''}", int(r.error_code))
        await self._cluster.refresh(list(new_counts))

    # -- configs ----------------------------------------------------------------------------
    async def describe_configs(self, topics: Iterable[str], keys: list[str] | None = None) -> dict[str, dict[str, ConfigEntry]]:
        """Topic configs: {topic: {key: ConfigEntry}}. (Resource type 2 = topic.)"""
        topics = list(topics)
        conn = await self._controller()
        version = conn.version(32)
        mod = proto.request_module(32, version)
        resp = await conn.request(
            proto.build(
                mod.DescribeConfigsRequest,
                resources=[proto.nested(mod, "DescribeConfigsResource", resource_type=2, resource_name=t, configuration_keys=keys) for t in topics],
                include_synonyms=False,
                include_documentation=False,
            )
        )
        out: dict[str, dict[str, ConfigEntry]] = {}
        for r in resp.results:
            if int(r.error_code):
                raise KafkaError(f"DescribeConfigs {r.resource_name!r}: {r.error_message or ''}", int(r.error_code))
            entries = {}
            for c in r.configs:
                source = int(getattr(c, "config_source", -1))
                is_default = bool(getattr(c, "is_default", source == 5))
                entries[str(c.name)] = ConfigEntry(str(c.name), c.value, bool(c.read_only), is_default, bool(c.is_sensitive), source)
            out[str(r.resource_name)] = entries
        return out

    async def alter_configs(self, changes: dict[str, dict[str, str | None]]) -> None:
        """Incrementally alter topic configs: {topic: {key: value}}; value None deletes (reverts
        to the default). Uses IncrementalAlterConfigs (op 0 SET, 1 DELETE)."""
        conn = await self._controller()
        mod = proto.request_module(44, conn.version(44))
        resp = await conn.request(
            proto.build(
                mod.IncrementalAlterConfigsRequest,
                resources=[
                    proto.nested(mod, "AlterConfigsResource", resource_type=2, resource_name=t,
                                 configs=[proto.nested(mod, "AlterableConfig", name=k, config_operation=0 if v is not None else 1,
                                                       value=None if v is None else str(v)) for k, v in cfg.items()])
                    for t, cfg in changes.items()
                ],
                validate_only=False,
            )
        )
        for r in resp.responses:
            if int(r.error_code):
                raise KafkaError(f"IncrementalAlterConfigs {r.resource_name!r}: {r.error_message or ''}", int(r.error_code))

    incremental_alter_configs = alter_configs

    # -- offsets ----------------------------------------------------------------------------
    async def list_offsets(self, query: dict[TopicPartition | tuple[str, int], Any], *, read_committed: bool = False) -> dict[TopicPartition, tuple[int, int]]:
        """{(topic, partition): "earliest" | "latest" | "max_timestamp" | timestamp_ms}
        -> {(topic, partition): (offset, timestamp)}."""
        return await list_offsets(self._cluster, {TopicPartition(*tp): v for tp, v in query.items()}, read_committed=read_committed)

    # -- groups -----------------------------------------------------------------------------
    async def list_groups(self) -> list[tuple[str, str, str]]:
        """[(group_id, protocol_type, state)] from every broker."""
        await self._cluster.refresh([])
        out: dict[str, tuple[str, str, str]] = {}
        for node in list(self._cluster.brokers):
            conn = await self._cluster.connection(node)
            mod = proto.request_module(16, conn.version(16))
            resp = await conn.request(proto.build(mod.ListGroupsRequest, states_filter=[], types_filter=[]))
            if int(resp.error_code):
                raise KafkaError("ListGroups failed", int(resp.error_code))
            for g in resp.groups:
                out[str(g.group_id)] = (str(g.group_id), str(g.protocol_type), str(getattr(g, "group_state", "") or ""))
        return sorted(out.values())

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        from ._group import decode_assignment

        out = {}
        for gid in group_ids:
            def make(mod: Any, version: int, gid: str = gid) -> Any:
                return proto.build(mod.DescribeGroupsRequest, groups=[gid], include_authorized_operations=False)

            resp = await _coordinator_request(self._cluster, gid, 15, make)
            for g in resp.groups:
                members = []
                for m in g.members:
                    try:
                        assignment = decode_assignment(bytes(m.member_assignment)) if g.protocol_type == "consumer" and m.member_assignment else []
                    except Exception:
                        assignment = []
                    members.append(MemberDescription(str(m.member_id), str(m.client_id), str(m.client_host), getattr(m, "group_instance_id", None), assignment))
                out[str(g.group_id)] = GroupDescription(str(g.group_id), str(g.group_state), str(g.protocol_type), str(g.protocol_data), members, int(g.error_code))
        return out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        out = {}
        for gid in group_ids:
            def make(mod: Any, version: int, gid: str = gid) -> Any:
                return proto.build(mod.DeleteGroupsRequest, groups_names=[gid])

            resp = await _coordinator_request(self._cluster, gid, 42, make)
            for r in resp.results:
                err = int(r.error_code)
                out[str(r.group_id)] = err
                if err:
                    raise KafkaError(f"DeleteGroups {r.group_id!r}", err)
        return out

    async def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await fetch_group_offsets(self._cluster, group_id, None if partitions is None else [TopicPartition(*tp) for tp in partitions])

    list_consumer_group_offsets = list_group_offsets

    async def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int | OffsetAndMetadata]) -> None:
        """Commit offsets for a group with no active members (like kafka-consumer-groups --reset-offsets)."""
        md = {TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))) for tp, o in offsets.items()}
        await commit_group_offsets(self._cluster, group_id, md)

    alter_consumer_group_offsets = alter_group_offsets

    async def describe_cluster(self) -> dict[str, Any]:
        await self._cluster.refresh([])
        return {"cluster_id": self._cluster.cluster_id, "controller": self._cluster.controller_id, "brokers": dict(self._cluster.brokers)}


def _tid(v: Any) -> str | None:
    return None if v is None or int(getattr(v, "int", 0)) == 0 else str(v)


__all__ += ["PartitionInfo"]
