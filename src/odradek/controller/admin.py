"""The controller's admin APIs between kio's messages and the decisions (answered by the broker
that hosts the active controller; others answer NOT_CONTROLLER, as Kafka's ZooKeeper mode does):
ElectLeaders (43, v1-v2), AlterPartitionReassignments (45, v0) and ListPartitionReassignments
(46, v0). A null topic list means every partition (ElectLeaders) or every reassignment (List).
"""

from __future__ import annotations

import datetime
import importlib
from typing import Any

from odradek.cluster.znodes import TopicPartition
from odradek.controller.context import ControllerContext
from odradek.controller.decisions import Decision, ElectionType
from odradek.protocol.errors import ErrorCode

__all__ = [
    "alter_partition_reassignments_response",
    "elect_leaders_request_partitions",
    "elect_leaders_response",
    "list_partition_reassignments_response",
    "reassignment_targets",
]

_NO_TIME = datetime.timedelta(0)


def _response_module(request: Any) -> Any:
    """kio's response module of the same API and version as ``request``."""
    return importlib.import_module(type(request).__module__.rsplit(".", 1)[0] + ".response")


def elect_leaders_request_partitions(
    ctx: ControllerContext, request: Any
) -> tuple[ElectionType, list[TopicPartition]]:
    election_type = ElectionType(int(getattr(request, "election_type", 0)))
    if request.topic_partitions is None:
        return election_type, list(ctx.all_partitions())
    return election_type, [(tp.topic, int(p)) for tp in request.topic_partitions for p in tp.partitions]


def elect_leaders_response(request: Any, partitions: list[TopicPartition], decision: Decision) -> Any:
    m = _response_module(request)
    by_topic: dict[str, list[Any]] = {}
    for tp in partitions:
        code = decision.elect_leaders.get(tp, decision.error_code or ErrorCode.unknown_topic_or_partition.value)
        by_topic.setdefault(tp[0], []).append(
            m.PartitionResult(partition_id=tp[1], error_code=ErrorCode(code), error_message=None)
        )
    results = tuple(m.ReplicaElectionResult(topic=t, partition_result=tuple(r)) for t, r in by_topic.items())
    return m.ElectLeadersResponse(throttle_time=_NO_TIME, error_code=ErrorCode(decision.error_code),
                                  replica_election_results=results)


def reassignment_targets(request: Any) -> dict[TopicPartition, tuple[int, ...] | None]:
    """AlterPartitionReassignments: tp -> target replicas, None to cancel."""
    return {
        (t.name, int(p.partition_index)): (tuple(int(r) for r in p.replicas) if p.replicas is not None else None)
        for t in request.topics for p in t.partitions
    }


def alter_partition_reassignments_response(request: Any, decision: Decision) -> Any:
    m = _response_module(request)
    responses = tuple(
        m.ReassignableTopicResponse(name=t.name, partitions=tuple(
            m.ReassignablePartitionResponse(
                partition_index=p.partition_index,
                error_code=ErrorCode(decision.reassign.get((t.name, int(p.partition_index)), decision.error_code)),
                error_message=None,
            ) for p in t.partitions))
        for t in request.topics
    )
    return m.AlterPartitionReassignmentsResponse(throttle_time=_NO_TIME, error_code=ErrorCode(decision.error_code),
                                                 error_message=None, responses=responses)


def list_partition_reassignments_response(ctx: ControllerContext | None, request: Any) -> Any:
    m = _response_module(request)
    if ctx is None:
        return m.ListPartitionReassignmentsResponse(throttle_time=_NO_TIME, error_code=ErrorCode.not_controller,
                                                    error_message=None, topics=())
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        wanted = {(t.name, int(p)) for t in request.topics for p in t.partition_indexes}
    by_topic: dict[str, list[Any]] = {}
    for tp in sorted(ctx.reassignments):
        if wanted is not None and tp not in wanted:
            continue
        a = ctx.assignments[tp[0]]
        by_topic.setdefault(tp[0], []).append(m.OngoingPartitionReassignment(
            partition_index=tp[1], replicas=ctx.replicas(tp),
            adding_replicas=tuple(a.adding_replicas.get(tp[1], ())),
            removing_replicas=tuple(a.removing_replicas.get(tp[1], ())),
        ))
    topics = tuple(m.OngoingTopicReassignment(name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return m.ListPartitionReassignmentsResponse(throttle_time=_NO_TIME, error_code=ErrorCode.none,
                                                error_message=None, topics=topics)
