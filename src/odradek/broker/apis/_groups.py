"""Small helpers shared by the group API modules (kio glue, kept out of the coordinator
package, which does not import kio)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from odradek.broker.api import RequestContext
from odradek.coordinator import GroupCoordinator
from odradek.coordinator.group_manager import OffsetCommitEntry
from odradek.coordinator.state import Errors

if TYPE_CHECKING:
    from odradek.protocol.api_types import OffsetCommitRequest, TxnOffsetCommitRequest

__all__ = [
    "AUTHORIZED_OPERATIONS_NOT_REQUESTED",
    "GROUP_OPERATIONS",
    "GROUP_OPERATIONS_WITH_CONFIGS",
    "code",
    "commit_entries",
    "coordinator",
    "ms",
]

AUTHORIZED_OPERATIONS_NOT_REQUESTED = -(2**31)  # INT32_MIN (kafka-python crashes on -1)
# No ACLs: every operation Kafka defines for a group is allowed — READ (3), DELETE (6), DESCRIBE (8).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
# ... plus DESCRIBE_CONFIGS (10) and ALTER_CONFIGS (11) where groups have configs (KIP-848, as
# Kafka 4.0; here when group.coordinator.rebalance.protocols lists consumer)
GROUP_OPERATIONS_WITH_CONFIGS = GROUP_OPERATIONS | (1 << 10) | (1 << 11)

_ONE_MS = datetime.timedelta(milliseconds=1)


def ms(value: Any, default: int = -1) -> int:
    """Milliseconds of a kio i32Timedelta / i64Timedelta (or a plain int)."""
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return round(value / _ONE_MS)
    return int(value)


def code(error: Errors | int) -> ErrorCode:
    return ErrorCode(int(error))


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    """The broker's GroupCoordinator (it answers COORDINATOR_NOT_AVAILABLE once stopped)."""
    return ctx.services.group_coordinator


def commit_entries(
    request: OffsetCommitRequest | TxnOffsetCommitRequest,
) -> list[OffsetCommitEntry]:
    """The offsets an OffsetCommit or TxnOffsetCommit request commits, in request order."""
    return [
        OffsetCommitEntry(
            topic.name,
            int(p.partition_index),
            int(p.committed_offset),
            int(getattr(p, "committed_leader_epoch", -1)),
            p.committed_metadata,
        )
        for topic in request.topics
        for p in topic.partitions
    ]
