"""Builders for controller decision tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from odradek.cluster.znodes import BrokerInfo, TopicAssignment
from odradek.controller.context import ControllerConfig, ControllerContext
from odradek.controller.decisions import Decision, on_topic_change
from odradek.protocol.inter_broker import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)


def broker(i: int, epoch: int | None = None) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9090 + i, epoch=100 + i if epoch is None else epoch)


def context(brokers: Sequence[int], *, unclean: bool = False, epoch: int = 5) -> ControllerContext:
    return ControllerContext(
        controller_id=brokers[0] if brokers else 0,
        epoch=epoch,
        epoch_zk_version=epoch,
        config=ControllerConfig(unclean_leader_election_enable=unclean),
        live_brokers={b: broker(b) for b in brokers},
    )


def with_topic(
    ctx: ControllerContext, topic: str, assignment: Mapping[int, Sequence[int]], config: Mapping[str, str] | None = None
) -> ControllerContext:
    a = TopicAssignment({p: tuple(r) for p, r in assignment.items()})
    ctx, _ = on_topic_change(ctx, {topic: a}, {topic: dict(config or {})})
    return ctx


def leader_and_isr_to(d: Decision) -> dict[int, LeaderAndIsrRequest]:
    return {b: r for b, r in d.requests if isinstance(r, LeaderAndIsrRequest)}


def update_metadata_to(d: Decision) -> dict[int, UpdateMetadataRequest]:
    return {b: r for b, r in d.requests if isinstance(r, UpdateMetadataRequest)}


def stop_replica_to(d: Decision) -> dict[int, StopReplicaRequest]:
    return {b: r for b, r in d.requests if isinstance(r, StopReplicaRequest)}
