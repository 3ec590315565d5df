"""AsyncAdmin: topics, partitions, configs, groups and offsets.

The offset helpers it shares with the consumer (ListOffsets, OffsetFetch, OffsetCommit) live
in ``_offsets``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

from .. import _protocol as proto
from .._cluster import Cluster
from .._config import ADMIN, parse_config
from ..errors import KafkaError, UnsupportedVersionError
from ..types import OffsetAndMetadata, PartitionInfo, TopicDescription, TopicPartition
from ._group import decode_assignment
from ._offsets import (
    _coordinator_request,
    commit_group_offsets,
    fetch_group_offsets,
    list_offsets,
)
from ._txn import TxnRequests

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AsyncAdmin",
    "ConfigEntry",
    "GroupDescription",
    "MemberDescription",
    "NewTopic",
]



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


class AclBinding(NamedTuple):
    """One ACL, in Kafka's wire codes: ``resource_type`` (2 TOPIC, 3 GROUP, 4 CLUSTER,
    5 TRANSACTIONAL_ID), ``pattern_type`` (3 LITERAL, 4 PREFIXED), ``operation`` (2 ALL, 3 READ,
    4 WRITE, 5 CREATE, 6 DELETE, 7 ALTER, 8 DESCRIBE, 9 CLUSTER_ACTION, 10 DESCRIBE_CONFIGS,
    11 ALTER_CONFIGS, 12 IDEMPOTENT_WRITE), ``permission_type`` (2 DENY, 3 ALLOW); ``principal``
    as ``User:alice``, ``host`` ``*`` or an address."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclBindingFilter(NamedTuple):
    """Selects ACLs as Kafka's DescribeAcls/DeleteAcls filters do: None matches any value, and
    so do the codes ANY (1) of resource type, pattern type, operation and permission type;
    pattern type MATCH (2) selects every pattern that applies to ``resource_name``."""

    resource_type: int = 1
    resource_name: str | None = None
    pattern_type: int = 1
    principal: str | None = None
    host: str | None = None
    operation: int = 1
    permission_type: int = 1


_NOT_CONTROLLER = 41


class AsyncAdmin:
    """Asyncio admin client. ``config`` uses the Java admin client's keys."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = parse_config(config, ADMIN, "admin")
        self._cluster = Cluster(self.config)
        self._timeout_ms: int = self.config["request.timeout.ms"]
        self._retry_backoff: float = self.config["retry.backoff.ms"] / 1000

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
        deadline = time.monotonic() + self._timeout_ms / 1000
        while True:
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
            # NOT_CONTROLLER: the broker asked is not (or not yet) the one to decide; like
            # Kafka's admin client, find the controller again and retry within the timeout
            if not any(int(r.error_code) == _NOT_CONTROLLER for r in resp.topics) or time.monotonic() > deadline:
                break
            await asyncio.sleep(self._retry_backoff)
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

    async def list_client_metrics_resources(self) -> list[str]:
        """The names of the client-metrics resources (KIP-714; ListClientMetricsResources,
        kio's ListConfigResources v0), sorted."""
        conn = await self._cluster.any_connection()
        mod = proto.request_module(74, conn.version(74))
        resp = await conn.request(proto.build(mod.ListConfigResourcesRequest))
        if int(resp.error_code):
            raise KafkaError("ListClientMetricsResources failed", int(resp.error_code))
        return sorted(str(r.resource_name) for r in resp.config_resources)

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

    async def remove_group_members(self, group_id: str, member_ids: Iterable[str]) -> dict[str, int]:
        """LeaveGroup v3+ on behalf of members of ``group_id`` (Kafka's Admin
        ``removeMembersFromConsumerGroup``, here by member id): member id -> error code
        (0 removed, 25 UNKNOWN_MEMBER_ID: not, or no longer, a member). A top-level error raises."""
        ids = list(member_ids)
        if not ids:
            return {}

        def make(mod: Any, version: int) -> Any:
            if version < 3:
                raise UnsupportedVersionError(f"removing members of group {group_id!r} needs LeaveGroup v3+")
            return proto.build(mod.LeaveGroupRequest, group_id=group_id, members=[
                proto.nested(mod, "MemberIdentity", member_id=m, group_instance_id=None, reason=None) for m in ids])

        resp = await _coordinator_request(self._cluster, group_id, 13, make)
        if int(resp.error_code):
            raise KafkaError(f"LeaveGroup for group {group_id!r} failed", int(resp.error_code))
        return {str(m.member_id): int(m.error_code) for m in resp.members}

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

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *, require_stable: bool = False
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets; ``require_stable``: wait until no open transaction still commits
        offsets of the group (KIP-447)."""
        return await fetch_group_offsets(self._cluster, group_id, None if partitions is None else [TopicPartition(*tp) for tp in partitions],
                                         require_stable=require_stable)

    list_consumer_group_offsets = list_group_offsets

    async def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int | OffsetAndMetadata]) -> None:
        """Commit offsets for a group with no active members (like kafka-consumer-groups --reset-offsets)."""
        md = {TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))) for tp, o in offsets.items()}
        await commit_group_offsets(self._cluster, group_id, md)

    alter_consumer_group_offsets = alter_group_offsets

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool, timeout: float = 30.0
    ) -> None:
        """Commit (or abort) the ongoing transaction of ``transactional_id`` under
        (``producer_id``, ``producer_epoch``) — EndTxn on behalf of the producer that wrote it,
        which may be gone (two-phase commit: the Spark sink's driver completes its tasks'
        transactions; Flink's Kafka sink does the same). Idempotent: a transaction already
        completed the same way answers success. ProducerFencedError if the id was initialised
        again since (or the transaction timed out and was aborted); KafkaError
        INVALID_TXN_STATE if it was completed the other way; KafkaTimeoutError after ``timeout``."""
        requests = TxnRequests(self._cluster, transactional_id, self.config["retry.backoff.ms"] / 1000)
        await requests.end_txn(producer_id, producer_epoch, committed, time.monotonic() + timeout)

    # -- ACLs (DescribeAcls, CreateAcls, DeleteAcls v1+, sent to any broker: all share them) --
    async def describe_acls(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs ``flt`` selects (all without one). KafkaError SECURITY_DISABLED (54) from a
        cluster without an authorizer."""
        f = flt or AclBindingFilter()
        conn = await self._cluster.any_connection()
        mod = proto.request_module(29, conn.version(29))
        resp = await conn.request(
            proto.build(
                mod.DescribeAclsRequest,
                resource_type_filter=f.resource_type,
                resource_name_filter=f.resource_name,
                pattern_type_filter=f.pattern_type,
                principal_filter=f.principal,
                host_filter=f.host,
                operation=f.operation,
                permission_type=f.permission_type,
            )
        )
        if int(resp.error_code):
            raise KafkaError(f"DescribeAcls: {resp.error_message or ''}", int(resp.error_code))
        return [
            AclBinding(int(r.resource_type), str(r.resource_name), int(r.pattern_type), str(a.principal),
                       str(a.host), int(a.operation), int(a.permission_type))
            for r in resp.resources
            for a in r.acls
        ]

    async def create_acls(self, bindings: Iterable[AclBinding]) -> list[tuple[int, str | None]]:
        """Create ``bindings`` (one request); returns (error code, message) per binding, in
        order (0: created or already there). Nothing is raised for a refused binding."""
        bindings = list(bindings)
        if not bindings:
            return []
        conn = await self._cluster.any_connection()
        mod = proto.request_module(30, conn.version(30))
        resp = await conn.request(
            proto.build(
                mod.CreateAclsRequest,
                creations=[
                    proto.nested(mod, "AclCreation", resource_type=b.resource_type, resource_name=b.resource_name,
                                 resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                 operation=b.operation, permission_type=b.permission_type)
                    for b in bindings
                ],
            )
        )
        return [(int(r.error_code), r.error_message) for r in resp.results]

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Delete every ACL any of ``filters`` selects; returns those deleted. KafkaError on a
        filter the broker refuses."""
        filters = list(filters)
        if not filters:
            return []
        conn = await self._cluster.any_connection()
        mod = proto.request_module(31, conn.version(31))
        resp = await conn.request(
            proto.build(
                mod.DeleteAclsRequest,
                filters=[
                    proto.nested(mod, "DeleteAclsFilter", resource_type_filter=f.resource_type,
                                 resource_name_filter=f.resource_name, pattern_type_filter=f.pattern_type,
                                 principal_filter=f.principal, host_filter=f.host, operation=f.operation,
                                 permission_type=f.permission_type)
                    for f in filters
                ],
            )
        )
        out = []
        for r in resp.filter_results:
            if int(r.error_code):
                raise KafkaError(f"DeleteAcls: {r.error_message or ''}", int(r.error_code))
            out += [
                AclBinding(int(m.resource_type), str(m.resource_name), int(m.pattern_type), str(m.principal),
                           str(m.host), int(m.operation), int(m.permission_type))
                for m in r.matching_acls
            ]
        return out

    async def describe_cluster(self) -> dict[str, Any]:
        await self._cluster.refresh([])
        return {"cluster_id": self._cluster.cluster_id, "controller": self._cluster.controller_id, "brokers": dict(self._cluster.brokers)}


def _tid(v: Any) -> str | None:
    return None if v is None or int(getattr(v, "int", 0)) == 0 else str(v)


__all__ += ["PartitionInfo"]
