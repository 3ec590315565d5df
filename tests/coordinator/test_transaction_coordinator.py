"""TransactionStateManager: the state table, Kafka's scenarios, and replay (hypothesis)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.transaction.manager import (
    OFFSETS_TOPIC,
    InitProducerIdResult,
    MarkerWrite,
    Outcome,
    TransactionStateManager,
    TxnMarker,
    fenced_error,
)
from odradek.coordinator.transaction.records import (
    TransactionLogRecord,
    TransactionLogValue,
    decode_record,
    encode_record,
    partition_for,
)
from odradek.coordinator.transaction.state import (
    VALID_PREVIOUS_STATES,
    Errors,
    IllegalStateTransition,
    TransactionConfig,
    TransactionMetadata,
    TransactionResult,
    TransactionState,
)

S = TransactionState
T = TypeVar("T")
T0 = 1_700_000_000_000
TIMEOUT = 60_000


class Harness:
    """A coordinator leading every partition, with a log of every record it appended."""

    def __init__(self, config: TransactionConfig | None = None, *, encode: bool = True) -> None:
        self.ids = itertools.count(1000)
        self.m = TransactionStateManager(config, lambda: next(self.ids))
        for p in range(self.m.config.transaction_state_log_num_partitions):
            self.m.load_partition(p, 3, [])
        self.log: list[TransactionLogRecord] = []
        self.encode = encode

    def apply(self, outcome: Outcome[T]) -> T | None:
        """Append (through the byte format when ``encode``) and replay, then answer."""
        for record in outcome.records:
            self.log.append(record)
            self.m.replay(record)
        return outcome.response

    def write_markers(self, markers: MarkerWrite | None, now: int) -> Errors | None:
        if markers is None:
            return None
        out = self.m.complete_markers(
            markers.transactional_id,
            markers.producer_id,
            markers.producer_epoch,
            markers.coordinator_epoch,
            now,
        )
        return self.apply(out)

    def init(
        self, txn_id: str, now: int = T0, pid: int = -1, epoch: int = -1
    ) -> InitProducerIdResult:
        out = self.m.init_producer_id(txn_id, TIMEOUT, now, pid, epoch)
        result = self.apply(out)
        self.write_markers(out.markers, now)
        assert result is not None
        return result

    def add(
        self, txn_id: str, r: InitProducerIdResult, *tps: tuple[str, int], now: int = T0
    ) -> Errors | None:
        return self.apply(self.m.add_partitions(txn_id, r.producer_id, r.producer_epoch, tps, now))

    def state(self, txn_id: str) -> TransactionMetadata:
        return self.m.transactions[txn_id]


def last_value(h: Harness) -> TransactionLogValue:
    value = h.log[-1].value
    assert value is not None
    return value


def persisted(m: TransactionMetadata) -> TransactionMetadata:
    return replace(m, last_producer_epoch=-1, pending_state=None)


# -- the table -----------------------------------------------------------------------------


def test_transition_table_is_kafkas() -> None:
    table = {t: {s.state_name for s in froms} for t, froms in VALID_PREVIOUS_STATES.items()}
    assert table == {
        S.EMPTY: {"Empty", "CompleteCommit", "CompleteAbort"},
        S.ONGOING: {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
        S.PREPARE_COMMIT: {"Ongoing"},
        S.PREPARE_ABORT: {"Ongoing", "PrepareEpochFence"},
        S.COMPLETE_COMMIT: {"PrepareCommit"},
        S.COMPLETE_ABORT: {"PrepareAbort"},
        S.DEAD: {"Empty", "CompleteCommit", "CompleteAbort"},
        S.PREPARE_EPOCH_FENCE: {"Ongoing"},
    }
    assert [s.id for s in S] == list(range(8))


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_check_transition(source: TransactionState, target: TransactionState) -> None:
    m = TransactionMetadata("t", 1, 0, TIMEOUT, source)
    if source in VALID_PREVIOUS_STATES[target]:
        m.check_transition(target)
    else:
        with pytest.raises(IllegalStateTransition):
            m.check_transition(target)


def test_replay_refuses_an_illegal_transition_live_but_not_when_loading() -> None:
    h = Harness()
    r = h.init("t")
    bad = TransactionLogRecord("t", replace(last_value(h), state=S.COMPLETE_COMMIT))
    with pytest.raises(IllegalStateTransition):
        h.m.replay(bad)
    h.m.replay(bad, loading=True)
    assert h.state("t").state is S.COMPLETE_COMMIT
    assert r.error is Errors.NONE


# -- scenarios -----------------------------------------------------------------------------


def test_begin_add_partitions_commit() -> None:
    h = Harness()
    r = h.init("app-1")
    assert (r.error, r.producer_id, r.producer_epoch) == (Errors.NONE, 1000, 0)
    assert h.state("app-1").state is S.EMPTY
    assert h.add("app-1", r, ("t", 0), ("t", 1), now=T0 + 5) is Errors.NONE
    m = h.state("app-1")
    assert (m.state, m.topic_partitions, m.txn_start_timestamp_ms) == (
        S.ONGOING, {("t", 0), ("t", 1)}, T0 + 5,
    )  # fmt: skip
    before = len(h.log)
    assert h.add("app-1", r, ("t", 1), now=T0 + 6) is Errors.NONE
    assert len(h.log) == before  # already in: nothing written
    assert h.apply(h.m.add_offsets("app-1", r.producer_id, 0, "grp", T0 + 7)) is Errors.NONE
    offsets_tp = (OFFSETS_TOPIC, partition_for("grp", 50))
    assert offsets_tp in h.state("app-1").topic_partitions
    assert h.state("app-1").txn_start_timestamp_ms == T0 + 5

    out = h.m.end_txn("app-1", r.producer_id, 0, True, T0 + 10)
    assert out.markers is not None
    assert h.apply(out) is Errors.NONE
    assert h.state("app-1").state is S.PREPARE_COMMIT
    assert out.markers.markers() == [
        TxnMarker(tp[0], tp[1], 1000, 0, TransactionResult.COMMIT, 3)
        for tp in sorted({("t", 0), ("t", 1), offsets_tp})
    ]
    assert h.write_markers(out.markers, T0 + 11) is Errors.NONE
    m = h.state("app-1")
    assert (m.state, m.topic_partitions, m.producer_epoch) == (S.COMPLETE_COMMIT, set(), 0)
    # the next transaction starts from CompleteCommit with the same epoch
    assert h.add("app-1", r, ("t", 2), now=T0 + 20) is Errors.NONE
    assert h.state("app-1").txn_start_timestamp_ms == T0 + 20


def test_abort() -> None:
    h = Harness()
    r = h.init("x")
    h.add("x", r, ("t", 0))
    out = h.m.end_txn("x", r.producer_id, 0, False, T0 + 1)
    assert h.apply(out) is Errors.NONE
    assert out.markers is not None and out.markers.result is TransactionResult.ABORT
    assert h.state("x").state is S.PREPARE_ABORT
    h.write_markers(out.markers, T0 + 2)
    assert h.state("x").state is S.COMPLETE_ABORT


def test_concurrent_end_txn_retries_are_idempotent() -> None:
    h = Harness()
    r = h.init("x")
    h.add("x", r, ("t", 0))
    first = h.m.end_txn("x", r.producer_id, 0, True, T0)
    # a retry while the PrepareCommit record is still being appended
    assert h.m.end_txn("x", r.producer_id, 0, True, T0).response is Errors.CONCURRENT_TRANSACTIONS
    h.apply(first)
    # while markers are written
    retry = h.m.end_txn("x", r.producer_id, 0, True, T0)
    assert (retry.response, retry.records, retry.markers) == (
        Errors.CONCURRENT_TRANSACTIONS,
        [],
        None,
    )
    assert h.m.end_txn("x", r.producer_id, 0, False, T0).response is Errors.INVALID_TXN_STATE
    h.write_markers(first.markers, T0)
    again = h.m.end_txn("x", r.producer_id, 0, True, T0)
    assert (again.response, again.records) == (Errors.NONE, [])
    assert h.m.end_txn("x", r.producer_id, 0, False, T0).response is Errors.INVALID_TXN_STATE


def test_end_txn_on_empty_and_unknown() -> None:
    h = Harness()
    r = h.init("x")
    assert h.m.end_txn("x", r.producer_id, 0, True, T0).response is Errors.INVALID_TXN_STATE
    assert h.m.end_txn("y", 5, 0, True, T0).response is Errors.INVALID_PRODUCER_ID_MAPPING
    assert (
        h.m.end_txn("x", r.producer_id + 1, 0, True, T0).response
        is Errors.INVALID_PRODUCER_ID_MAPPING
    )
    assert h.m.end_txn("", 5, 0, True, T0).response is Errors.INVALID_REQUEST


def test_wrong_epoch_is_fenced() -> None:
    h = Harness()
    r = h.init("x")
    h.init("x")  # epoch 1
    assert h.add("x", r, ("t", 0)) is Errors.PRODUCER_FENCED
    assert h.m.end_txn("x", r.producer_id, 0, True, T0).response is Errors.PRODUCER_FENCED
    assert h.m.verify_partitions("x", r.producer_id, 0, [("t", 0)]) == {
        ("t", 0): Errors.PRODUCER_FENCED
    }
    # old request versions spell it INVALID_PRODUCER_EPOCH (KIP-588)
    assert fenced_error(Errors.PRODUCER_FENCED, 26, 1) is Errors.INVALID_PRODUCER_EPOCH
    assert fenced_error(Errors.PRODUCER_FENCED, 26, 2) is Errors.PRODUCER_FENCED
    assert fenced_error(Errors.PRODUCER_FENCED, 22, 3) is Errors.INVALID_PRODUCER_EPOCH
    assert fenced_error(Errors.CONCURRENT_TRANSACTIONS, 22, 0) is Errors.CONCURRENT_TRANSACTIONS


def test_second_instance_fences_an_ongoing_transaction() -> None:
    h = Harness()
    zombie = h.init("app")
    h.add("app", zombie, ("t", 0), ("u", 1))
    # the new instance: the ongoing transaction is aborted with epoch + 1 first
    out = h.m.init_producer_id("app", TIMEOUT, T0 + 1)
    assert out.response == InitProducerIdResult(Errors.CONCURRENT_TRANSACTIONS)
    assert h.state("app").pending_state is S.PREPARE_ABORT  # via PrepareEpochFence, as Kafka
    assert h.m.init_producer_id("app", TIMEOUT, T0 + 1).response == InitProducerIdResult(
        Errors.CONCURRENT_TRANSACTIONS
    )
    h.apply(out)
    assert (h.state("app").state, h.state("app").producer_epoch) == (S.PREPARE_ABORT, 1)
    assert out.markers is not None
    assert {(mk.topic, mk.partition, mk.producer_epoch, mk.result) for mk in out.markers.markers()} == {
        ("t", 0, 1, TransactionResult.ABORT), ("u", 1, 1, TransactionResult.ABORT),
    }  # fmt: skip
    # the zombie can neither commit nor add partitions
    assert h.m.end_txn("app", zombie.producer_id, 0, True, T0).response is Errors.PRODUCER_FENCED
    # the retry while markers are written
    assert h.m.init_producer_id("app", TIMEOUT, T0 + 2).response == InitProducerIdResult(
        Errors.CONCURRENT_TRANSACTIONS
    )
    h.write_markers(out.markers, T0 + 3)
    assert h.state("app").state is S.COMPLETE_ABORT
    r = h.init("app", T0 + 4)
    assert (r.error, r.producer_id, r.producer_epoch) == (Errors.NONE, zombie.producer_id, 2)


def test_timeout_aborts_and_fences() -> None:
    h = Harness()
    r = h.init("slow")
    h.add("slow", r, ("t", 0), now=T0)
    assert h.m.next_deadline_ms() == T0 + TIMEOUT + 1
    assert h.m.tick(T0 + TIMEOUT) == []
    [out] = h.m.tick(T0 + TIMEOUT + 1)
    h.apply(out)
    assert (h.state("slow").state, h.state("slow").producer_epoch) == (S.PREPARE_ABORT, 1)
    assert h.m.tick(T0 + 2 * TIMEOUT) == []  # not Ongoing any more
    h.write_markers(out.markers, T0 + TIMEOUT + 2)
    assert h.state("slow").state is S.COMPLETE_ABORT
    assert h.m.end_txn("slow", r.producer_id, 0, True, T0).response is Errors.PRODUCER_FENCED


def test_transaction_timeout_is_capped() -> None:
    h = Harness(TransactionConfig(transaction_max_timeout_ms=1000))
    assert h.m.init_producer_id("x", 1001, T0).response == InitProducerIdResult(
        Errors.INVALID_TRANSACTION_TIMEOUT
    )
    assert h.m.init_producer_id("x", 0, T0).response == InitProducerIdResult(
        Errors.INVALID_TRANSACTION_TIMEOUT
    )
    assert h.m.init_producer_id("x", 1000, T0).records


def test_transactional_id_expiration() -> None:
    h = Harness(TransactionConfig(transactional_id_expiration_ms=1000))
    r = h.init("idle", T0)
    h.init("busy", T0)
    h.add("busy", h.init("busy", T0), ("t", 0), now=T0)
    assert h.m.expire_transactional_ids(T0 + 999) == []
    records = h.m.expire_transactional_ids(T0 + 1000)
    assert records == [TransactionLogRecord("idle", None)]  # Ongoing ids never expire
    h.apply(Outcome(records))
    assert "idle" not in h.m.transactions
    # a fresh InitProducerId starts over with a new producer id
    assert h.init("idle", T0 + 2000).producer_id != r.producer_id


def test_kip360_epoch_bump_and_retry() -> None:
    h = Harness()
    r = h.init("x")
    out = h.m.init_producer_id("x", TIMEOUT, T0, r.producer_id, r.producer_epoch)
    assert h.apply(out) == InitProducerIdResult(Errors.NONE, r.producer_id, 1)
    # the producer never got the answer and retries with the old epoch: same answer
    retry = h.m.init_producer_id("x", TIMEOUT, T0, r.producer_id, 0)
    assert h.apply(retry) == InitProducerIdResult(Errors.NONE, r.producer_id, 1)
    # an older epoch still is fenced; another producer id too
    h.init("x", pid=r.producer_id, epoch=1)  # epoch 2, last epoch 1
    assert h.m.init_producer_id(
        "x", TIMEOUT, T0, r.producer_id, 0
    ).response == InitProducerIdResult(Errors.PRODUCER_FENCED)
    assert h.m.init_producer_id("x", TIMEOUT, T0, 77, 0).response == InitProducerIdResult(
        Errors.PRODUCER_FENCED
    )
    assert h.m.init_producer_id(
        "x", TIMEOUT, T0, r.producer_id, -1
    ).response == InitProducerIdResult(Errors.INVALID_REQUEST)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = Harness()
    r = h.init("x")
    h.m.replay(
        TransactionLogRecord("x", replace(last_value(h), producer_epoch=32766)), loading=True
    )
    r2 = h.init("x", pid=r.producer_id, epoch=32766)  # a KIP-360 bump at the last epoch
    assert (r2.error, r2.producer_epoch) == (Errors.NONE, 0)
    assert r2.producer_id != r.producer_id
    assert h.state("x").previous_producer_id == r.producer_id
    # the retry of that rotation with the old, exhausted epoch is recognised
    r3 = h.init("x", pid=r.producer_id, epoch=32766)
    assert (r3.producer_id, r3.producer_epoch) == (r2.producer_id, 0)
    # without a producer id and epoch (a new instance) an exhausted epoch rotates too
    h.m.replay(
        TransactionLogRecord("x", replace(last_value(h), producer_epoch=32766)), loading=True
    )
    r4 = h.init("x")
    assert (r4.error, r4.producer_epoch) == (Errors.NONE, 0)
    assert r4.producer_id not in (r.producer_id, r2.producer_id)


def test_verify_only() -> None:
    h = Harness()
    r = h.init("x")
    assert h.m.verify_partitions("x", r.producer_id, 0, [("t", 0)]) == {
        ("t", 0): Errors.INVALID_TXN_STATE
    }
    h.add("x", r, ("t", 0))
    assert h.m.verify_partitions("x", r.producer_id, 0, [("t", 0), ("t", 1)]) == {
        ("t", 0): Errors.NONE,
        ("t", 1): Errors.INVALID_TXN_STATE,
    }
    before = len(h.log)
    h.m.verify_partitions("x", r.producer_id, 0, [("t", 2)])
    assert len(h.log) == before


def test_not_coordinator_and_loading() -> None:
    m = TransactionStateManager(None, lambda: 1)
    p = m.partition_for("x")
    assert m.init_producer_id("x", TIMEOUT, T0).response == InitProducerIdResult(
        Errors.NOT_COORDINATOR
    )
    m.begin_loading(p, 0)
    assert m.init_producer_id("x", TIMEOUT, T0).response == InitProducerIdResult(
        Errors.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert m.finish_loading(p) == []
    assert m.init_producer_id("x", TIMEOUT, T0).response == InitProducerIdResult(Errors.NONE, 1, 0)
    assert m.init_producer_id(None, TIMEOUT, T0).response == InitProducerIdResult(Errors.NONE, 1, 0)


def test_append_failure_clears_the_pending_state() -> None:
    h = Harness()
    r = h.init("x")
    out = h.m.add_partitions("x", r.producer_id, 0, [("t", 0)], T0)
    assert h.m.end_txn("x", r.producer_id, 0, True, T0).response is Errors.CONCURRENT_TRANSACTIONS
    h.m.append_failed(out.records)
    assert h.add("x", r, ("t", 0)) is Errors.NONE


def test_loading_resumes_marker_writes_and_new_coordinator_epoch() -> None:
    h = Harness()
    r = h.init("x")
    h.add("x", r, ("t", 0))
    h.apply(h.m.end_txn("x", r.producer_id, 0, True, T0))
    p = h.m.partition_for("x")
    other = TransactionStateManager(None, lambda: 1)
    pairs = [encode_record(rec) for rec in h.log]
    [pending] = other.load_partition(p, 4, [decode_record(k, v) for k, v in pairs])  # type: ignore[misc]
    assert pending == MarkerWrite("x", r.producer_id, 0, TransactionResult.COMMIT, 4, (("t", 0),))
    # the old coordinator (epoch 3) can no longer complete it there
    stale = other.complete_markers("x", r.producer_id, 0, 3, T0)
    assert (stale.response, stale.records) == (Errors.NOT_COORDINATOR, [])
    done = other.complete_markers("x", r.producer_id, 0, 4, T0)
    assert done.records and done.records[0].value is not None
    assert done.records[0].value.state is S.COMPLETE_COMMIT
    other.unload_partition(p)
    assert other.transactions == {}


def test_describe_and_list() -> None:
    h = Harness()
    a = h.init("a")
    h.add("a", a, ("t", 1), ("t", 0), ("u", 0), now=T0 + 1)
    h.init("b")
    [da, db, dc] = h.m.describe_transactions(["a", "b", "c"])
    assert (da.error, da.state, da.producer_id, da.topics, da.transaction_start_time_ms) == (
        Errors.NONE, "Ongoing", a.producer_id, (("t", (0, 1)), ("u", (0,))), T0 + 1,
    )  # fmt: skip
    assert (db.state, db.topics) == ("Empty", ())
    assert dc.error is Errors.TRANSACTIONAL_ID_NOT_FOUND
    all_ = h.m.list_transactions()
    assert [(t.transactional_id, t.state) for t in all_.transactions] == [
        ("a", "Ongoing"),
        ("b", "Empty"),
    ]
    ongoing = h.m.list_transactions(["Ongoing", "Bogus"])
    assert [t.transactional_id for t in ongoing.transactions] == ["a"]
    assert ongoing.unknown_state_filters == ("Bogus",)
    assert [
        t.transactional_id
        for t in h.m.list_transactions(producer_id_filters=[a.producer_id]).transactions
    ] == ["a"]
    assert (
        h.m.list_transactions(now_ms=T0 + 100, duration_filter_ms=50)
        .transactions[0]
        .transactional_id
        == "a"
    )
    assert h.m.list_transactions(now_ms=T0 + 10, duration_filter_ms=50).transactions == ()


# -- replay property -----------------------------------------------------------------------

_IDS = ["a", "b", "c"]
_ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["init", "init_bump", "add", "offsets", "commit", "abort", "markers", "tick", "expire"]
        ),
        st.sampled_from(_IDS),
        st.integers(0, 3),
        st.integers(0, 40_000),
    ),
    max_size=40,
)


def _drive(h: Harness, ops: list[tuple[str, str, int, int]]) -> None:
    now = T0
    pending: dict[str, MarkerWrite] = {}
    for op, txn_id, n, dt in ops:
        now += dt
        m = h.m.transactions.get(txn_id)
        pid, epoch = (m.producer_id, m.producer_epoch) if m else (-1, -1)
        out: Any
        if op == "init":
            out = h.m.init_producer_id(txn_id, TIMEOUT, now)
        elif op == "init_bump":
            out = h.m.init_producer_id(txn_id, TIMEOUT, now, pid, epoch)
        elif op == "add":
            out = h.m.add_partitions(txn_id, pid, epoch, [("t", n)], now)
        elif op == "offsets":
            out = h.m.add_offsets(txn_id, pid, epoch, f"g{n}", now)
        elif op in ("commit", "abort"):
            out = h.m.end_txn(txn_id, pid, epoch, op == "commit", now)
        elif op == "markers":
            mw = pending.pop(txn_id, None)
            if mw is None:
                continue
            out = h.m.complete_markers(
                mw.transactional_id, mw.producer_id, mw.producer_epoch, mw.coordinator_epoch, now
            )
        elif op == "tick":
            for o in h.m.tick(now):
                h.apply(o)
                assert o.markers is not None
                pending[o.markers.transactional_id] = o.markers
            continue
        else:
            h.apply(Outcome(h.m.expire_transactional_ids(now)))
            continue
        h.apply(out)
        if out.markers is not None:
            pending[out.markers.transactional_id] = out.markers


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_replay_rebuilds_the_same_state(ops: list[tuple[str, str, int, int]]) -> None:
    h = Harness(TransactionConfig(transactional_id_expiration_ms=100_000))
    _drive(h, ops)
    # every live transition was legal (replay checks it) and loading the log - through its
    # bytes - rebuilds every persisted field
    for version in (0, 1):
        fresh = TransactionStateManager(h.m.config, lambda: 0)
        pairs = [encode_record(r, version) for r in h.log]
        for p in range(50):
            fresh.load_partition(
                p,
                3,
                [
                    r
                    for r in (decode_record(k, v) for k, v in pairs)
                    if r and fresh.partition_for(r.transactional_id) == p
                ],
            )
        live = {k: persisted(v) for k, v in h.m.transactions.items()}
        loaded = {k: persisted(v) for k, v in fresh.transactions.items()}
        if version == 0:  # v0 does not keep the previous producer id
            live = {k: replace(v, previous_producer_id=-1) for k, v in live.items()}
        assert loaded == live
    # and replaying the records themselves gives the live state, last epochs included
    again = TransactionStateManager(h.m.config, lambda: 0)
    for p in range(50):
        again.begin_loading(p, 3)
        again.loading.discard(p)
    for r in h.log:
        again.replay(r)
    assert again.transactions == h.m.transactions


def test_concurrent_init_of_a_new_id() -> None:
    h = Harness()
    first = h.m.init_producer_id("new", TIMEOUT, T0)
    assert h.m.init_producer_id("new", TIMEOUT, T0).response == InitProducerIdResult(
        Errors.CONCURRENT_TRANSACTIONS
    )
    h.m.append_failed(first.records)
    second = h.m.init_producer_id("new", TIMEOUT, T0)
    assert h.apply(second) == InitProducerIdResult(Errors.NONE, 1001, 0)
