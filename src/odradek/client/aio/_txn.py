"""The transactional producer's side of Kafka transactions (KIP-98, KIP-447).

``TransactionManager`` is the producer's transaction state machine, pure (no I/O): which calls
are allowed in which state, which partitions the coordinator already knows are in the current
transaction, and which errors are fatal or abortable. ``TxnRequests`` sends the requests to
the transaction coordinator (FindCoordinator key type 1) and the group coordinator, retrying
what Kafka says is retriable.

States (Java's ``TransactionManager.State``)::

    UNINITIALIZED --init_transactions--> INITIALIZING --> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING_TRANSACTION --> READY
    IN_TRANSACTION | ABORTABLE_ERROR --abort_transaction--> ABORTING_TRANSACTION --> READY
    IN_TRANSACTION | COMMITTING_TRANSACTION --a failed send or request--> ABORTABLE_ERROR
    any --fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) or an unexpected error--> FATAL_ERROR

Fatal errors leave the producer unusable (close it; a new instance's ``init_transactions()``
takes over the transactional id). An abortable error only dooms the current transaction:
``abort_transaction()``, then begin a new one. A ``commit_transaction()`` or
``abort_transaction()`` that timed out may be called again: it resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _protocol as proto
from .._cluster import Cluster
from ..errors import (
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionStateError,
)
from ..types import OffsetAndMetadata, TopicPartition

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TxnRequests", "TxnState", "group_metadata", "offsets_map"]

# Kafka error codes met by the transactional producer
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
REBALANCE_IN_PROGRESS = 27
FENCED_INSTANCE_ID = 82
PRODUCER_FENCED = 90
REQUEST_TIMED_OUT = 7

COORDINATOR_ERRORS = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
RETRY_ERRORS = frozenset({CONCURRENT_TRANSACTIONS, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT})
FENCED_ERRORS = frozenset({INVALID_PRODUCER_EPOCH, PRODUCER_FENCED})
GROUP_ABORTABLE_ERRORS = frozenset({UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID})


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
_ALLOWED: dict[TxnState, frozenset[TxnState]] = {
    # target: states it may be entered from
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.INITIALIZING, S.READY}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
}


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What ``send_offsets_to_transaction`` needs of the consumer (``consumer.consumer_group_metadata()``):
    the group and, for KIP-447 fencing of zombies after a rebalance, the member's generation."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    """The transaction state of one transactional producer (pure: no I/O, no clock).

    ``partitions`` are the partitions the coordinator has acknowledged as part of the current
    transaction (AddPartitionsToTxn answered); ``pending`` those the sender found batches for
    and that still have to be added before those batches may be sent."""

    def __init__(self, transactional_id: str, timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.state = S.UNINITIALIZED
        self.partitions: set[TopicPartition] = set()
        self.pending: set[TopicPartition] = set()
        self.offsets_added = False  # AddOffsetsToTxn done in this transaction
        self.error: KafkaError | None = None
        self.epoch_bump_needed = False  # sequences broke: a new epoch after the abort

    # -- transitions ----------------------------------------------------------------------
    def transition(self, target: TxnState) -> None:
        if self.state is S.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in _ALLOWED[target]:
            if self.state is S.ABORTABLE_ERROR and self.error is not None:
                raise TransactionAbortableError(
                    f"cannot {_VERB[target]}: the transaction failed ({self.error}); call abort_transaction()"
                )
            raise TransactionStateError(f"cannot {_VERB[target]} in state {self.state.value}")
        self.state = target
        if target in (S.READY, S.INITIALIZING):
            self.partitions.clear()
            self.pending.clear()
            self.offsets_added = False
            self.error = None

    def fail_fatal(self, error: KafkaError) -> KafkaError:
        if self.state is not S.FATAL_ERROR:
            self.state = S.FATAL_ERROR
            self.error = error
        assert self.error is not None
        return self.error

    def fail_abortable(self, error: KafkaError, *, bump_epoch: bool = False) -> None:
        """A send or a request of the current transaction failed: it can only be aborted."""
        if bump_epoch:
            self.epoch_bump_needed = True
        if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
            self.state = S.ABORTABLE_ERROR
            self.error = error

    # -- questions ------------------------------------------------------------------------
    def check_send(self) -> None:
        """Raise unless records may be sent now (a transaction is open and not failed)."""
        if self.state is S.IN_TRANSACTION:
            return
        if self.state is S.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state is S.ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"cannot send: the transaction failed ({self.error}); call abort_transaction()"
            )
        raise TransactionStateError(
            f"cannot send outside a transaction (state {self.state.value}): call begin_transaction() first"
        )

    def may_drain(self, tp: TopicPartition) -> bool:
        """Whether the sender may send a batch to ``tp`` now; if the partition is not yet in
        the transaction it is queued for AddPartitionsToTxn (``pending``)."""
        if self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
            return False  # failed or aborting: queued batches wait for abort_transaction()
        if tp in self.partitions:
            return True
        self.pending.add(tp)
        return False

    def partitions_added(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.pending.discard(tp)
            self.partitions.add(tp)

    @property
    def in_transaction(self) -> bool:
        return self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR)

    @property
    def anything_to_end(self) -> bool:
        """Whether the coordinator knows of this transaction (else EndTxn is not needed)."""
        return bool(self.partitions) or self.offsets_added


_VERB = {
    S.INITIALIZING: "init_transactions()",
    S.READY: "finish the transaction",
    S.IN_TRANSACTION: "begin_transaction()",
    S.COMMITTING_TRANSACTION: "commit_transaction()",
    S.ABORTING_TRANSACTION: "abort_transaction()",
    S.ABORTABLE_ERROR: "fail the transaction",
}


def error_for(code: int, what: str, transactional_id: str) -> KafkaError:
    """The exception for a failed transactional request: fenced, or the plain Kafka error."""
    if code in FENCED_ERRORS:
        return ProducerFencedError(
            f"{what}: transactional.id {transactional_id!r} was taken over by a newer producer "
            "instance (init_transactions() with the same id); this producer is fenced and must be closed",
            code,
        )
    return KafkaError(f"{what} failed for transactional.id {transactional_id!r}", code)


class TxnRequests:
    """Transactional requests to the coordinators, with Kafka's retries.

    Every method retries coordinator errors (re-finding the coordinator), CONCURRENT_TRANSACTIONS
    and other retriable errors with ``retry.backoff.ms`` until ``deadline`` (monotonic seconds),
    then raises KafkaTimeoutError; other errors raise (``error_for``)."""

    def __init__(self, cluster: Cluster, transactional_id: str, backoff_s: float) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.backoff = backoff_s

    async def _call(self, what: str, deadline: float, api_key: int, make: Any, errors_of: Any, *, group: str | None = None) -> Any:
        """Send to the transaction coordinator (or ``group``'s coordinator) what ``make(mod)``
        builds, until ``errors_of(resp)`` (list of codes) is all zero; return the response."""
        refresh = False
        backoff = min(self.backoff, 0.02)  # CONCURRENT_TRANSACTIONS resolves within milliseconds
        last = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(f"{what} for transactional.id {self.transactional_id!r} timed out (last error {last})")
            try:
                if group is None:
                    node = await self.cluster.coordinator(self.transactional_id, key_type=1, refresh=refresh, timeout=left)
                else:
                    node = await self.cluster.coordinator(group, refresh=refresh, timeout=left)
                conn = await self.cluster.connection(node)
                mod = proto.request_module(api_key, conn.version(api_key))
                resp = await conn.request(make(mod), timeout=max(0.1, left))
            except (KafkaTimeoutError, ConnectionError) as exc:
                last = getattr(exc, "code", -1)
                refresh = True
                await asyncio.sleep(min(self.backoff, max(0.0, deadline - time.monotonic())))
                continue
            codes = [c for c in errors_of(resp) if c]
            if not codes:
                return resp
            refresh = False
            fatal = [c for c in codes if c not in COORDINATOR_ERRORS and c not in RETRY_ERRORS and c != OPERATION_NOT_ATTEMPTED]
            if fatal:
                raise error_for(fatal[0], what, self.transactional_id)
            last = codes[0]
            if any(c in COORDINATOR_ERRORS for c in codes):
                refresh = True
                await asyncio.sleep(self.backoff)
            else:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.backoff)

    async def init_producer_id(self, timeout_ms: int, deadline: float) -> tuple[int, int]:
        """InitProducerId with the transactional id: the coordinator fences older instances
        (epoch + 1) and aborts their open transaction; returns (producer id, epoch)."""
        resp = await self._call(
            "InitProducerId", deadline, 22,
            lambda mod: proto.build(mod.InitProducerIdRequest, transactional_id=self.transactional_id,
                                    transaction_timeout=timeout_ms, producer_id=-1, producer_epoch=-1),
            lambda r: [int(r.error_code)],
        )
        return int(resp.producer_id), int(resp.producer_epoch)

    async def add_partitions(self, pid: int, epoch: int, tps: Iterable[TopicPartition], deadline: float) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        def make(mod: Any) -> Any:
            topics = [proto.nested(mod, "AddPartitionsToTxnTopic", name=t, partitions=sorted(ps)) for t, ps in by_topic.items()]
            return proto.build(
                mod.AddPartitionsToTxnRequest,
                transactional_id=self.transactional_id, producer_id=pid, producer_epoch=epoch, topics=topics,
                v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics,
            )

        def errors(r: Any) -> list[int]:
            results: Any = getattr(r, "results_by_topic_v3_and_below", None) or ()
            return [int(p.partition_error_code) for t in results for p in t.results_by_partition]

        await self._call("AddPartitionsToTxn", deadline, 24, make, errors)

    async def add_offsets(self, pid: int, epoch: int, group_id: str, deadline: float) -> None:
        await self._call(
            "AddOffsetsToTxn", deadline, 25,
            lambda mod: proto.build(mod.AddOffsetsToTxnRequest, transactional_id=self.transactional_id,
                                    producer_id=pid, producer_epoch=epoch, group_id=group_id),
            lambda r: [int(r.error_code)],
        )

    async def txn_offset_commit(
        self, pid: int, epoch: int, group: ConsumerGroupMetadata, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline: float
    ) -> None:
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, om))

        def make(mod: Any) -> Any:
            topics = [
                proto.nested(mod, "TxnOffsetCommitRequestTopic", name=t, partitions=[
                    proto.nested(mod, "TxnOffsetCommitRequestPartition", partition_index=p, committed_offset=om.offset,
                                 committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                                 committed_metadata=om.metadata or "")
                    for p, om in sorted(ps, key=lambda x: x[0])])
                for t, ps in by_topic.items()
            ]
            return proto.build(
                mod.TxnOffsetCommitRequest, transactional_id=self.transactional_id, group_id=group.group_id,
                producer_id=pid, producer_epoch=epoch, generation_id=group.generation_id,
                member_id=group.member_id, group_instance_id=group.group_instance_id, topics=topics,
            )

        await self._call(
            "TxnOffsetCommit", deadline, 28, make,
            lambda r: [int(p.error_code) for t in r.topics for p in t.partitions], group=group.group_id,
        )

    async def end_txn(self, pid: int, epoch: int, commit: bool, deadline: float) -> None:
        await self._call(
            "EndTxn", deadline, 26,
            lambda mod: proto.build(mod.EndTxnRequest, transactional_id=self.transactional_id,
                                    producer_id=pid, producer_epoch=epoch, committed=commit),
            lambda r: [int(r.error_code)],
        )


def group_metadata(g: Any) -> ConsumerGroupMetadata:
    """``send_offsets_to_transaction``'s group: a ConsumerGroupMetadata, a group id, or an
    object with ``group_id`` (and KIP-447's ``generation_id``, ``member_id``, ``group_instance_id``)."""
    if isinstance(g, ConsumerGroupMetadata):
        return g
    if isinstance(g, str):
        return ConsumerGroupMetadata(g)
    group_id = getattr(g, "group_id", None)
    if not isinstance(group_id, str):
        raise TypeError("group_metadata must be consumer.consumer_group_metadata() or a group id")
    return ConsumerGroupMetadata(group_id, int(getattr(g, "generation_id", -1)), str(getattr(g, "member_id", "")),
                                 getattr(g, "group_instance_id", None))


def offsets_map(offsets: Any) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit as {TopicPartition: OffsetAndMetadata}, from such a dict (values may
    be plain ints) or a list of objects with ``topic``, ``partition``, ``offset``."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    if isinstance(offsets, dict):
        for tp, o in offsets.items():
            out[TopicPartition(*tp)] = o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
        return out
    for item in offsets:
        out[TopicPartition(item.topic, item.partition)] = OffsetAndMetadata(int(item.offset), getattr(item, "metadata", None) or "")
    return out
