"""AlterPartition (API 56, kio's v2/v3 schemas) to and from the controller's decision.

v2+ names topics by id: ids the controller does not know are answered UNKNOWN_TOPIC_ID (100).
v3 carries each new ISR member's broker epoch (KIP-903); a stale one makes the partition
INELIGIBLE_REPLICA.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.alter_partition.v2 import response as v2
from kio.schema.alter_partition.v3 import response as v3

from odradek.controller.context import ControllerContext
from odradek.controller.decisions import AlterPartitionItem, Decision, topic_uuid
from odradek.protocol.errors import ErrorCode

__all__ = ["alter_partition_items", "alter_partition_response", "topic_ids", "topic_names"]


def topic_ids(ctx: ControllerContext) -> dict[str, uuid.UUID]:
    return {t: topic_uuid(a.topic_id) for t, a in ctx.assignments.items() if a.topic_id}


def topic_names(ctx: ControllerContext) -> dict[uuid.UUID, str]:
    return {v: k for k, v in topic_ids(ctx).items()}


def alter_partition_items(ctx: ControllerContext, request: Any) -> list[AlterPartitionItem]:
    """The partitions of a kio AlterPartitionRequest (v2 or v3) whose topic id is known."""
    names = topic_names(ctx)
    items = []
    for topic in request.topics:
        name = names.get(topic.topic_id)
        if name is None:
            continue
        for p in topic.partitions:
            if hasattr(p, "new_isr_with_epochs"):  # v3
                isr = tuple(int(b.broker_id) for b in p.new_isr_with_epochs)
                epochs = tuple(int(b.broker_epoch) for b in p.new_isr_with_epochs)
            else:
                isr, epochs = tuple(int(b) for b in p.new_isr), ()
            items.append(AlterPartitionItem(name, int(p.partition_index), int(p.leader_epoch), isr,
                                            int(p.partition_epoch), int(p.leader_recovery_state), epochs))
    return items


def alter_partition_response(ctx: ControllerContext, request: Any, decision: Decision) -> Any:
    """The kio AlterPartitionResponse (same version as ``request``) for ``decision``."""
    module: Any = v3 if int(request.__version__) >= 3 else v2
    names = topic_names(ctx)
    topics = []
    for topic in request.topics:
        name = names.get(topic.topic_id)
        parts = []
        for p in topic.partitions:
            code: int
            isr: tuple[int, ...]
            if name is None:
                code, leader, epoch, isr, pe = ErrorCode.unknown_topic_id.value, -1, -1, (), -1
            else:
                r = decision.alter_partition.get((name, int(p.partition_index)))
                if r is None:
                    code, leader, epoch, isr, pe = ErrorCode.unknown_topic_or_partition.value, -1, -1, (), -1
                else:
                    code, leader, epoch, isr, pe = r.error_code, r.leader, r.leader_epoch, r.isr, r.partition_epoch
            parts.append(module.PartitionData(
                partition_index=p.partition_index, error_code=ErrorCode(code), leader_id=leader,
                leader_epoch=epoch, isr=tuple(isr), partition_epoch=pe,
            ))
        topics.append(module.TopicData(topic_id=topic.topic_id, partitions=tuple(parts)))
    return module.AlterPartitionResponse(throttle_time=datetime.timedelta(0), error_code=ErrorCode(decision.error_code), topics=tuple(topics))
