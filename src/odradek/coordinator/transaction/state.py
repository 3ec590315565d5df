"""Transaction states and a transactional id's metadata (Kafka's ``TransactionState`` and
``TransactionMetadata``), as data + a table.

Transaction states, their actions and transitions (KIP-98, restated from Kafka's
``TransactionState``; ``id`` is the int8 ``TransactionStatus`` of ``__transaction_state``)::

  Empty (0)              a producer id and epoch, no transaction. Also the state after
                         InitProducerId.
      actions:  InitProducerId            -> Empty (epoch + 1; a new producer id when the
                                             epoch is exhausted)
                AddPartitionsToTxn /
                AddOffsetsToTxn           -> Ongoing (transaction start time = now)
                EndTxn                    -> INVALID_TXN_STATE
                transactional.id.expiration.ms without an update -> Dead (tombstone)
  Ongoing (1)            a transaction is open; its partitions are listed.
      actions:  AddPartitionsToTxn        -> Ongoing (partitions added; no record when all
                                             are already in)
                EndTxn(commit)            -> PrepareCommit;  EndTxn(abort) -> PrepareAbort
                InitProducerId (a new instance: the zombie must be fenced)
                                          -> PrepareEpochFence (live only) -> PrepareAbort
                                             with epoch + 1; the caller gets
                                             CONCURRENT_TRANSACTIONS and retries
                transaction.timeout.ms passed -> PrepareEpochFence -> PrepareAbort (epoch + 1,
                                             the timed-out producer is fenced)
  PrepareCommit (2)      the decision is durable; COMMIT markers are being written.
      actions:  EndTxn(commit) retry      -> CONCURRENT_TRANSACTIONS; EndTxn(abort) -> INVALID_TXN_STATE
                InitProducerId / AddPartitionsToTxn -> CONCURRENT_TRANSACTIONS
                every marker written      -> CompleteCommit
  PrepareAbort (3)       the same for ABORT markers.
                every marker written      -> CompleteAbort
  CompleteCommit (4)     done; partitions cleared.
      actions:  EndTxn(commit) retry      -> NONE (idempotent); EndTxn(abort) -> INVALID_TXN_STATE
                InitProducerId            -> Empty (epoch + 1)
                AddPartitionsToTxn        -> Ongoing (a new transaction)
                expiration                -> Dead
  CompleteAbort (5)      the same after an abort (EndTxn(abort) retry -> NONE).
  Dead (6)               the transactional id expired: written as a tombstone (null value);
                         replay removes it. Never a live state.
  PrepareEpochFence (7)  live only, never written: the coordinator bumps the epoch of an
                         Ongoing transaction to abort it.

``VALID_PREVIOUS_STATES`` is the same table the other way round (Kafka's
``validPreviousStates``): the states a transaction may move *from* into each state.
``TransactionMetadata.check_transition`` refuses anything else.

Persisted vs. live: everything in ``TransactionLogValue`` changes only by replaying records of
``__transaction_state`` (which is also how start-up loads them). ``pending_state`` (a record is
being appended: other requests get CONCURRENT_TRANSACTIONS) and ``last_producer_epoch`` (for
KIP-360 retries of an epoch bump; not in the record format, -1 after a reload as in Kafka) are
live.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "VALID_PREVIOUS_STATES",
    "Errors",
    "IllegalStateTransition",
    "TransactionConfig",
    "TransactionMetadata",
    "TransactionResult",
    "TransactionState",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps one epoch in reserve for fencing: ``epoch >= Short.MAX_VALUE - 1``."""
    return epoch >= SHORT_MAX - 1


class Errors(enum.IntEnum):
    """The Kafka error codes the transaction coordinator answers with (Kafka's numbers)."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    OPERATION_NOT_ATTEMPTED = 55
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105


class TransactionResult(enum.IntEnum):
    """A transaction's outcome; the numbers are the ControlRecordType of its markers."""

    ABORT = 0
    COMMIT = 1


class TransactionState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        """The int8 ``TransactionStatus`` written to ``__transaction_state``."""
        return self.value[0]

    @property
    def state_name(self) -> str:
        """Kafka's name (DescribeTransactions / ListTransactions answers and filters)."""
        return self.value[1]

    @classmethod
    def from_id(cls, status: int) -> TransactionState:
        for s in cls:
            if s.id == status:
                return s
        raise ValueError(f"unknown TransactionStatus {status}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for s in cls:
            if s.state_name == name:
                return s
        return None

    def __str__(self) -> str:
        return self.state_name


_S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

COMPLETE_OR_EMPTY = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PREPARE = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Transaction coordinator settings (broker config keys and Kafka's defaults)."""

    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    transaction_state_log_num_partitions: int = 50  # transaction.state.log.num.partitions
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions (AddOffsetsToTxn)
    value_version: int = 0  # TransactionLogValue version written (1: flexible, KIP-890 fields)


@dataclass(slots=True, eq=True)
class TransactionMetadata:
    """One transactional id: the persisted fields of its last record plus live state."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[tuple[str, int]] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID  # Kafka's lastProducerId
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    # live only
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_state: TransactionState | None = field(default=None, compare=False)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def check_transition(self, target: TransactionState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"transaction {self.transactional_id!r}: {self.state} -> {target} is not allowed"
            )
