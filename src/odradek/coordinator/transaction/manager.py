"""The transaction coordinator's handlers: (state, request, now) -> (records, response, markers).

``TransactionStateManager`` holds every transactional id of the ``__transaction_state``
partitions this coordinator leads (Kafka's ``TransactionStateManager`` + the decisions of its
``TransactionCoordinator``). Each handler returns an ``Outcome``: the records to append to
``__transaction_state``, the response, and possibly a ``MarkerWrite``. The caller must

1. append ``outcome.records`` to the transactional id's partition (``partition_for``);
2. ``replay`` each record (only then does the state change), or ``append_failed`` on error;
3. send ``outcome.response``;
4. if ``outcome.markers`` is set: write its markers (WriteTxnMarkers to every partition's
   leader); once all are written, call ``complete_markers`` and do 1-2 with its records.

Start-up loading of a partition is ``begin_loading``, ``replay(record, loading=True)`` for every
record of the log, then ``finish_loading`` (which returns the marker writes of transactions
found in PrepareCommit/PrepareAbort). ``tick(now)`` aborts transactions older than their
timeout; ``expire_transactional_ids(now)`` writes tombstones for ids idle longer than
``transactional.id.expiration.ms``.

While a record is being appended the id's ``pending_state`` is set, and other requests for it
get CONCURRENT_TRANSACTIONS, as in Kafka. Producer ids come from an injected allocator (the
broker's producer-id blocks). No I/O and no clock here: ``now_ms`` is an argument everywhere.
Errors are Kafka's newest: the API layer maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for
old request versions (``fenced_error``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from odradek.coordinator.transaction.records import (
    TransactionLogRecord,
    TransactionLogValue,
    partition_for,
)
from odradek.coordinator.transaction.state import (
    COMPLETE_OR_EMPTY,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARE,
    SHORT_MAX,
    Errors,
    TransactionConfig,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
    is_epoch_exhausted,
)

__all__ = [
    "OFFSETS_TOPIC",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "MarkerWrite",
    "Outcome",
    "TransactionDescription",
    "TransactionListing",
    "TransactionStateManager",
    "TxnMarker",
    "fenced_error",
]

T = TypeVar("T")
S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"

# Request versions from which the client understands PRODUCER_FENCED (KIP-588); older versions
# get INVALID_PRODUCER_EPOCH. Keys are Kafka's API keys.
_PRODUCER_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


def fenced_error(error: Errors, api_key: int, version: int) -> Errors:
    """PRODUCER_FENCED as the request's version spells it (Kafka's KafkaApis mapping)."""
    since = _PRODUCER_FENCED_SINCE.get(api_key)
    if error is Errors.PRODUCER_FENCED and since is not None and version < since:
        return Errors.INVALID_PRODUCER_EPOCH
    return error


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One control batch to write: a WriteTxnMarkers entry for one partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class MarkerWrite:
    """The pending "write markers" step of a transaction in PrepareCommit / PrepareAbort."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]

    def markers(self) -> list[TxnMarker]:
        return [
            TxnMarker(
                t, p, self.producer_id, self.producer_epoch, self.result, self.coordinator_epoch
            )
            for t, p in self.partitions
        ]


@dataclass(slots=True)
class Outcome(Generic[T]):
    records: list[TransactionLogRecord] = field(default_factory=list)
    response: T | None = None
    markers: MarkerWrite | None = None


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    error: Errors
    state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    error: Errors
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[TransactionListing, ...] = ()


def _value(m: TransactionMetadata, **changes: object) -> TransactionLogValue:
    """The record value of ``m`` with ``changes`` (TransactionMetadata field names) applied."""
    n = replace(m, **changes)  # type: ignore[arg-type]
    return TransactionLogValue(
        n.producer_id,
        n.producer_epoch,
        n.txn_timeout_ms,
        n.state,
        tuple(sorted(n.topic_partitions)),
        n.txn_last_update_timestamp_ms,
        n.txn_start_timestamp_ms,
        n.previous_producer_id,
        n.next_producer_id,
        n.client_transaction_version,
    )


class TransactionStateManager:
    """Every transactional id of this coordinator and the handlers that act on them."""

    def __init__(
        self, config: TransactionConfig | None, allocate_producer_id: Callable[[], int]
    ) -> None:
        self.config = config or TransactionConfig()
        self.transactions: dict[str, TransactionMetadata] = {}
        self.coordinator_epochs: dict[int, int] = {}  # led partition -> coordinator epoch
        self.loading: set[int] = set()
        self._allocate = allocate_producer_id
        # ids whose first record is being appended (live; Kafka's putTransactionStateIfNotExists)
        self._creating: set[str] = set()

    # -- partitions ------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This coordinator now leads ``partition`` (with that leader epoch); load it."""
        self.coordinator_epochs[partition] = coordinator_epoch
        self.loading.add(partition)

    def finish_loading(self, partition: int) -> list[MarkerWrite]:
        """Loading done: the markers of transactions left in PrepareCommit/PrepareAbort."""
        self.loading.discard(partition)
        epoch = self.coordinator_epochs[partition]
        return [
            self._marker_write(m, epoch)
            for m in self.transactions.values()
            if m.state in PREPARE and self.partition_for(m.transactional_id) == partition
        ]

    def load_partition(
        self, partition: int, coordinator_epoch: int, records: Iterable[TransactionLogRecord]
    ) -> list[MarkerWrite]:
        self.begin_loading(partition, coordinator_epoch)
        for record in records:
            self.replay(record, loading=True)
        return self.finish_loading(partition)

    def unload_partition(self, partition: int) -> None:
        """No longer the leader of ``partition``: forget its transactional ids."""
        self.coordinator_epochs.pop(partition, None)
        self.loading.discard(partition)
        for txn_id in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[txn_id]
        self._creating = {t for t in self._creating if self.partition_for(t) != partition}

    def _coordinator_error(self, transactional_id: str) -> Errors | None:
        partition = self.partition_for(transactional_id)
        if partition not in self.coordinator_epochs:
            return Errors.NOT_COORDINATOR
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def _coordinator_epoch(self, transactional_id: str) -> int:
        return self.coordinator_epochs[self.partition_for(transactional_id)]

    def _marker_write(self, m: TransactionMetadata, coordinator_epoch: int) -> MarkerWrite:
        result = (
            TransactionResult.COMMIT
            if m.state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
            else TransactionResult.ABORT
        )
        return MarkerWrite(
            m.transactional_id,
            m.producer_id,
            m.producer_epoch,
            result,
            coordinator_epoch,
            tuple(sorted(m.topic_partitions)),
        )

    # -- replay ----------------------------------------------------------------------------

    def replay(self, record: TransactionLogRecord, loading: bool = False) -> None:
        """Apply a record of ``__transaction_state``: the only way persisted state changes.

        Live, the transition is checked against ``VALID_PREVIOUS_STATES``; while loading the
        log is trusted (a later record simply replaces an earlier one, as Kafka's loader does).
        """
        txn_id = record.transactional_id
        self._creating.discard(txn_id)
        current = self.transactions.get(txn_id)
        v = record.value
        if v is None:
            if current is not None and not loading:
                current.check_transition(S.DEAD)
            self.transactions.pop(txn_id, None)
            return
        if current is not None and not loading:
            current.check_transition(v.state)
        self.transactions[txn_id] = TransactionMetadata(
            txn_id,
            v.producer_id,
            v.producer_epoch,
            v.transaction_timeout_ms,
            v.state,
            set(v.partitions),
            v.start_timestamp_ms,
            v.last_update_timestamp_ms,
            v.previous_producer_id,
            v.next_producer_id,
            v.client_transaction_version,
            NO_PRODUCER_EPOCH if loading else record.last_producer_epoch,
        )

    def append_failed(self, records: Sequence[TransactionLogRecord]) -> None:
        """The records could not be appended: clear the pending transitions they carried."""
        for record in records:
            self._creating.discard(record.transactional_id)
            m = self.transactions.get(record.transactional_id)
            if m is not None:
                m.pending_state = None

    def _emit(
        self,
        m: TransactionMetadata,
        pending: TransactionState,
        value: TransactionLogValue,
        last_producer_epoch: int | None = None,
    ) -> TransactionLogRecord:
        m.pending_state = pending
        lpe = m.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
        return TransactionLogRecord(m.transactional_id, value, lpe)

    # -- InitProducerId --------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        now_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> Outcome[InitProducerIdResult]:
        """InitProducerId (22). With a (producer id, epoch) (v3+, KIP-360) the producer asks to
        bump its own epoch; another instance of the same transactional id fences it."""
        if transactional_id is None:
            return Outcome(response=InitProducerIdResult(Errors.NONE, self._allocate(), 0))
        if not transactional_id:
            return Outcome(response=InitProducerIdResult(Errors.INVALID_REQUEST))
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return Outcome(response=InitProducerIdResult(Errors.INVALID_REQUEST))
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return Outcome(response=InitProducerIdResult(Errors.INVALID_TRANSACTION_TIMEOUT))
        error = self._coordinator_error(transactional_id)
        if error is not None:
            return Outcome(response=InitProducerIdResult(error))
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        m = self.transactions.get(transactional_id)
        if m is None:
            if transactional_id in self._creating:
                return Outcome(response=InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS))
            # a fresh id: its first record is Empty with epoch 0
            self._creating.add(transactional_id)
            pid = self._allocate()
            value = TransactionLogValue(pid, 0, transaction_timeout_ms, S.EMPTY, (), now_ms, -1)
            record = TransactionLogRecord(transactional_id, value)
            return Outcome([record], InitProducerIdResult(Errors.NONE, pid, 0))
        if m.pending_transition_in_progress:
            return Outcome(response=InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS))
        if expected is not None and not self._is_valid_producer_id(m, *expected):
            return Outcome(response=InitProducerIdResult(Errors.PRODUCER_FENCED))
        if m.state in PREPARE:
            return Outcome(response=InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS))
        if m.state is S.ONGOING:
            # fence the current producer: abort its transaction with epoch + 1; the caller
            # retries (CONCURRENT_TRANSACTIONS) and then gets epoch + 2 (or a new producer id)
            return self._fence_and_abort(
                m, now_ms, InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)
            )
        # Empty, CompleteCommit, CompleteAbort
        if m.is_producer_epoch_exhausted and (expected is None or expected[1] == m.producer_epoch):
            new_pid = self._allocate()
            value = _value(
                m,
                producer_id=new_pid,
                producer_epoch=0,
                previous_producer_id=m.producer_id,
                txn_timeout_ms=transaction_timeout_ms,
                state=S.EMPTY,
                topic_partitions=set(),
                txn_start_timestamp_ms=-1,
                txn_last_update_timestamp_ms=now_ms,
            )
            last = m.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            record = self._emit(m, S.EMPTY, value, last)
            return Outcome([record], InitProducerIdResult(Errors.NONE, new_pid, 0))
        bumped = m.producer_epoch + 1
        if expected is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif m.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == m.producer_epoch:
            epoch, last = bumped, m.producer_epoch
        elif expected[1] == m.last_producer_epoch:
            epoch, last = m.producer_epoch, m.last_producer_epoch  # a retried bump
        else:
            return Outcome(response=InitProducerIdResult(Errors.PRODUCER_FENCED))
        value = _value(
            m,
            producer_epoch=epoch,
            txn_timeout_ms=transaction_timeout_ms,
            state=S.EMPTY,
            topic_partitions=set(),
            txn_start_timestamp_ms=-1,
            txn_last_update_timestamp_ms=now_ms,
        )
        record = self._emit(m, S.EMPTY, value, last)
        return Outcome([record], InitProducerIdResult(Errors.NONE, m.producer_id, epoch))

    @staticmethod
    def _is_valid_producer_id(m: TransactionMetadata, pid: int, epoch: int) -> bool:
        """Kafka's isValidProducerId: the request's producer id is the current one, the id was
        just created, or it is the previous id and its epoch was exhausted (a retried
        rotation)."""
        return (
            m.producer_epoch == NO_PRODUCER_EPOCH
            or pid == m.producer_id
            or (pid == m.previous_producer_id and is_epoch_exhausted(epoch))
        )

    def _fence_and_abort(self, m: TransactionMetadata, now_ms: int, response: T) -> Outcome[T]:
        """Ongoing -> PrepareEpochFence -> PrepareAbort with the epoch bumped (not past
        Short.MAX_VALUE: an exhausted epoch aborts without a bump)."""
        # Kafka passes through the live PrepareEpochFence; its pending state ends as PrepareAbort
        epoch = m.producer_epoch if m.producer_epoch >= SHORT_MAX else m.producer_epoch + 1
        value = _value(
            m, producer_epoch=epoch, state=S.PREPARE_ABORT, txn_last_update_timestamp_ms=now_ms
        )
        record = self._emit(m, S.PREPARE_ABORT, value, NO_PRODUCER_EPOCH)
        markers = MarkerWrite(
            m.transactional_id,
            m.producer_id,
            epoch,
            TransactionResult.ABORT,
            self._coordinator_epoch(m.transactional_id),
            tuple(sorted(m.topic_partitions)),
        )
        return Outcome([record], response, markers)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[Errors, TransactionMetadata | None]:
        if not transactional_id:
            return Errors.INVALID_REQUEST, None
        error = self._coordinator_error(transactional_id)
        if error is not None:
            return error, None
        m = self.transactions.get(transactional_id)
        if m is None or m.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING, None
        if m.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED, None
        return Errors.NONE, m

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        now_ms: int,
    ) -> Outcome[Errors]:
        """AddPartitionsToTxn (24) for one transaction: one error for all its partitions (the
        API layer answers UNKNOWN_TOPIC_OR_PARTITION for unknown ones and OPERATION_NOT_ATTEMPTED
        for the rest before calling)."""
        wanted = set(partitions)
        error, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if m is None:
            return Outcome(response=error)
        if m.pending_transition_in_progress or m.state in PREPARE:
            return Outcome(response=Errors.CONCURRENT_TRANSACTIONS)
        if m.state is S.ONGOING and wanted <= m.topic_partitions:
            return Outcome(response=Errors.NONE)
        start = now_ms if m.state in COMPLETE_OR_EMPTY else m.txn_start_timestamp_ms
        value = _value(
            m,
            state=S.ONGOING,
            topic_partitions=m.topic_partitions | wanted,
            txn_start_timestamp_ms=start,
            txn_last_update_timestamp_ms=now_ms,
        )
        return Outcome([self._emit(m, S.ONGOING, value)], Errors.NONE)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], Errors]:
        """AddPartitionsToTxn v4+ with verify_only (KIP-890 part 1: a partition leader asks
        before appending a transactional batch): NONE for partitions in the ongoing
        transaction, INVALID_TXN_STATE for the others. Writes nothing."""
        wanted = list(partitions)
        error, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if m is not None and m.state in PREPARE:
            error, m = Errors.CONCURRENT_TRANSACTIONS, None
        if m is None:
            return dict.fromkeys(wanted, error)
        return {
            tp: Errors.NONE
            if m.state is S.ONGOING and tp in m.topic_partitions
            else Errors.INVALID_TXN_STATE
            for tp in wanted
        }

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
    ) -> Outcome[Errors]:
        """AddOffsetsToTxn (25): adds the group's ``__consumer_offsets`` partition."""
        partition = partition_for(group_id, self.config.offsets_topic_num_partitions)
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, partition)], now_ms
        )

    # -- EndTxn ----------------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
    ) -> Outcome[Errors]:
        """EndTxn (26): PrepareCommit/PrepareAbort, answered once that record is appended; the
        outcome's ``markers`` are then written and ``complete_markers`` finishes."""
        error, m = self._check_producer(transactional_id, producer_id, producer_epoch)
        if m is None:
            return Outcome(response=error)
        if m.pending_transition_in_progress:
            return Outcome(response=Errors.CONCURRENT_TRANSACTIONS)
        want = TransactionResult.COMMIT if committed else TransactionResult.ABORT
        if m.state is S.ONGOING:
            target = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            value = _value(m, state=target, txn_last_update_timestamp_ms=now_ms)
            record = self._emit(m, target, value)
            markers = MarkerWrite(
                transactional_id,
                m.producer_id,
                m.producer_epoch,
                want,
                self._coordinator_epoch(transactional_id),
                tuple(sorted(m.topic_partitions)),
            )
            return Outcome([record], Errors.NONE, markers)
        done = {
            S.COMPLETE_COMMIT: TransactionResult.COMMIT,
            S.COMPLETE_ABORT: TransactionResult.ABORT,
        }
        preparing = {
            S.PREPARE_COMMIT: TransactionResult.COMMIT,
            S.PREPARE_ABORT: TransactionResult.ABORT,
        }
        if done.get(m.state) is want:
            return Outcome(response=Errors.NONE)  # a retry of a finished EndTxn
        if preparing.get(m.state) is want:
            return Outcome(response=Errors.CONCURRENT_TRANSACTIONS)
        return Outcome(response=Errors.INVALID_TXN_STATE)

    def complete_markers(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        now_ms: int,
    ) -> Outcome[Errors]:
        """Every marker of the transaction is written: CompleteCommit / CompleteAbort (the
        partitions are cleared). NOT_COORDINATOR if this coordinator lost the partition or a
        newer coordinator epoch owns it; INVALID_TXN_STATE if the transaction moved on."""
        error = self._coordinator_error(transactional_id)
        if error is None and self._coordinator_epoch(transactional_id) != coordinator_epoch:
            error = Errors.NOT_COORDINATOR
        if error is not None:
            return Outcome(response=error)
        m = self.transactions.get(transactional_id)
        if (
            m is None
            or m.state not in PREPARE
            or m.producer_id != producer_id
            or m.producer_epoch != producer_epoch
        ):
            return Outcome(response=Errors.INVALID_TXN_STATE)
        if m.pending_transition_in_progress:
            return Outcome(response=Errors.CONCURRENT_TRANSACTIONS)
        target = S.COMPLETE_COMMIT if m.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        value = _value(m, state=target, topic_partitions=set(), txn_last_update_timestamp_ms=now_ms)
        return Outcome([self._emit(m, target, value)], Errors.NONE)

    # -- timers ----------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Outcome[None]]:
        """Abort (and fence: epoch + 1) every Ongoing transaction whose start is more than its
        ``transaction.timeout.ms`` ago (Kafka's abortTimedOutTransactions)."""
        out: list[Outcome[None]] = []
        for m in list(self.transactions.values()):
            if (
                m.state is S.ONGOING
                and not m.pending_transition_in_progress
                and self._coordinator_error(m.transactional_id) is None
                and m.txn_start_timestamp_ms + m.txn_timeout_ms < now_ms
            ):
                out.append(self._fence_and_abort(m, now_ms, None))
        return out

    def expire_transactional_ids(self, now_ms: int) -> list[TransactionLogRecord]:
        """Tombstones for ids in Empty/CompleteCommit/CompleteAbort whose last update is at
        least ``transactional.id.expiration.ms`` old."""
        out = []
        for m in list(self.transactions.values()):
            if (
                m.state in COMPLETE_OR_EMPTY
                and not m.pending_transition_in_progress
                and self._coordinator_error(m.transactional_id) is None
                and m.txn_last_update_timestamp_ms + self.config.transactional_id_expiration_ms
                <= now_ms
            ):
                m.pending_state = S.DEAD
                out.append(TransactionLogRecord(m.transactional_id, None))
        return out

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` next has something to abort (None: nothing ongoing)."""
        return min(
            (
                m.txn_start_timestamp_ms + m.txn_timeout_ms + 1
                for m in self.transactions.values()
                if m.state is S.ONGOING
            ),
            default=None,
        )

    # -- DescribeTransactions / ListTransactions -------------------------------------------

    def describe_transactions(self, ids: Iterable[str]) -> list[TransactionDescription]:
        out = []
        for txn_id in ids:
            error = self._coordinator_error(txn_id) if txn_id else Errors.TRANSACTIONAL_ID_NOT_FOUND
            m = self.transactions.get(txn_id) if error is None else None
            if m is None:
                out.append(
                    TransactionDescription(txn_id, error or Errors.TRANSACTIONAL_ID_NOT_FOUND)
                )
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(m.topic_partitions):
                by_topic.setdefault(topic, []).append(p)
            out.append(
                TransactionDescription(
                    txn_id,
                    Errors.NONE,
                    m.state.state_name,
                    m.txn_timeout_ms,
                    m.txn_start_timestamp_ms,
                    m.producer_id,
                    m.producer_epoch,
                    tuple((t, tuple(ps)) for t, ps in by_topic.items()),
                )
            )
        return out

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        now_ms: int = 0,
        duration_filter_ms: int = -1,
    ) -> ListTransactionsResult:
        """ListTransactions (66): ids matching every given filter (empty filter = all); unknown
        state names are echoed back; ``duration_filter_ms`` (v1) keeps transactions running
        longer than that."""
        if self.loading:
            return ListTransactionsResult(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        names = list(state_filters)
        states = {s for s in (TransactionState.from_name(n) for n in names) if s is not None}
        unknown = tuple(n for n in names if TransactionState.from_name(n) is None)
        pids = set(producer_id_filters)
        listed = []
        for m in sorted(self.transactions.values(), key=lambda m: m.transactional_id):
            if names and m.state not in states:
                continue
            if pids and m.producer_id not in pids:
                continue
            if duration_filter_ms >= 0 and (
                m.state is not S.ONGOING or now_ms - m.txn_start_timestamp_ms <= duration_filter_ms
            ):
                continue
            listed.append(TransactionListing(m.transactional_id, m.producer_id, m.state.state_name))
        return ListTransactionsResult(Errors.NONE, unknown, tuple(listed))
