"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets inside
its transaction (KIP-98; v3 carries the group's generation and member, KIP-447).

The producer must be the transactional id's current one with the group's
``__consumer_offsets`` partition in its ongoing transaction (AddOffsetsToTxn): the
transaction coordinator says so (a local call; PRODUCER_FENCED — INVALID_PRODUCER_EPOCH
before v3 —, INVALID_PRODUCER_ID_MAPPING or INVALID_TXN_STATE otherwise). The group
coordinator checks member and generation like OffsetCommit, appends the offsets as a
transactional batch of the producer, and keeps them pending: OffsetFetch sees them only once
the COMMIT marker reaches that partition; an ABORT drops them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard, cast

from odradek.broker.api import ApiSpec, RequestContext
from odradek.broker.apis import _authz
from odradek.broker.apis._groups import code, commit_entries, coordinator
from odradek.broker.apis._util import NO_THROTTLE, make, response_types
from odradek.coordinator.transaction.manager import OFFSETS_TOPIC, fenced_error
from odradek.coordinator.transaction.records import partition_for
from odradek.coordinator.transaction.state import Errors

if TYPE_CHECKING:
    from odradek.protocol.api_types import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestV3,
        TxnOffsetCommitResponse,
    )

__all__ = ["API", "handle"]

_REFUSED = frozenset(
    {Errors.PRODUCER_FENCED, Errors.INVALID_PRODUCER_ID_MAPPING, Errors.INVALID_TXN_STATE}
)


def _refusal(ctx: RequestContext, request: TxnOffsetCommitRequest) -> list[int] | None:
    """With an authorizer: every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE
    on the transactional id, GROUP_AUTHORIZATION_FAILED without READ on the group."""
    n = sum(len(t.partitions) for t in request.topics)
    if not _authz.allowed(
        ctx,
        _authz.AclOperation.WRITE,
        _authz.ResourceType.TRANSACTIONAL_ID,
        request.transactional_id,
    ):
        return [53] * n
    if not _authz.allowed(
        ctx, _authz.AclOperation.READ, _authz.ResourceType.GROUP, request.group_id
    ):
        return [30] * n
    return None


def _names_member(request: TxnOffsetCommitRequest) -> TypeGuard[TxnOffsetCommitRequestV3]:
    """v3+ names the group member (generation, member id, instance id: KIP-447)."""
    return request.__version__ >= 3


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    services = ctx.services
    version = int(request.__version__)
    pid, epoch = int(request.producer_id), int(request.producer_epoch)
    txn = services.txn_coordinator.manager
    offsets_partition = partition_for(
        request.group_id, services.config.offsets_topic_num_partitions
    )
    verdict = txn.verify_partitions(
        request.transactional_id, pid, epoch, [(OFFSETS_TOPIC, offsets_partition)]
    )
    error = verdict[(OFFSETS_TOPIC, offsets_partition)]
    entries = commit_entries(request)
    refused = _refusal(ctx, request)
    # with an authorizer: the topics the principal may not READ are refused (29,
    # TOPIC_AUTHORIZATION_FAILED), the others committed, as Kafka does
    names = (t.name for t in request.topics)
    denied = (
        frozenset()
        if refused is not None
        else _authz.denied(ctx, _authz.AclOperation.READ, _authz.ResourceType.TOPIC, names)
    )
    errors: list[int]
    if refused is not None:
        errors = refused
    elif error in _REFUSED:
        errors = [int(fenced_error(error, 28, version))] * len(entries)
    else:
        group_errors = iter(
            await coordinator(ctx).txn_commit_offsets(
                request.group_id,
                pid,
                epoch,
                int(request.generation_id) if _names_member(request) else -1,
                request.member_id if _names_member(request) else "",
                request.group_instance_id if _names_member(request) else None,
                [e for e in entries if e.topic not in denied],
            )
        )
        errors = [29 if e.topic in denied else int(next(group_errors)) for e in entries]
    types = response_types(request)
    it = iter(errors)
    topics = tuple(
        make(
            types.TxnOffsetCommitResponseTopic,
            name=topic.name,
            partitions=tuple(
                make(
                    types.TxnOffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=code(e),
                )
                for p in topic.partitions
                for e in (next(it),)
            ),
        )
        for topic in request.topics
    )
    return cast(
        "TxnOffsetCommitResponse",
        make(types.TxnOffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics),
    )


API = ApiSpec(key=28, name="TxnOffsetCommit", min_version=0, max_version=4, handler=handle)
