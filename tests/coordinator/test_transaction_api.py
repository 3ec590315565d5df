"""The transaction APIs' kio glue: every version kio has, responses that kio can encode."""

from __future__ import annotations

import datetime
import io
import itertools
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from odradek.broker.apis import _transactions as api
from odradek.coordinator.transaction import Errors, TransactionStateManager, requests
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC

T0 = 1_700_000_000_000


def _make(cls: type, **kwargs: Any) -> Any:
    known = set(getattr(cls, "__dataclass_fields__", ()))
    return cls(**{k: v for k, v in kwargs.items() if k in known})


def _request(key: int, version: int, **fields: Any) -> Any:
    cls = load_request_schema(key, version)
    return _make(cls, **fields)


def _roundtrip(entity: Any) -> Any:
    """Encode with kio and read back: proves the response fits its version."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return entity_reader(type(entity))(memoryview(buf.getvalue()), 0)[0]


def _manager() -> TransactionStateManager:
    ids = itertools.count(500)
    m = TransactionStateManager(None, lambda: next(ids))
    for p in range(50):
        m.load_partition(p, 0, [])
    return m


def _apply(m: TransactionStateManager, out: Any) -> Any:
    for r in out.records:
        m.replay(r)
    return out.response


def _topic(module_cls: type, name: str, parts: tuple[int, ...]) -> Any:
    return _make(module_cls, name=name, partitions=parts)


@pytest.mark.parametrize("version", range(0, 7))
def test_init_producer_id_all_versions(version: int) -> None:
    m = _manager()
    req = _request(22, version, transactional_id="t", transaction_timeout=datetime.timedelta(seconds=60),
                   producer_id=-1, producer_epoch=-1)  # fmt: skip
    resp = _roundtrip(_apply(m, api.init_producer_id(m, req, T0)))
    assert (resp.error_code, resp.producer_id, resp.producer_epoch) == (ErrorCode.none, 500, 0)
    if version >= 3:
        stale = _request(22, version, transactional_id="t",
                         transaction_timeout=datetime.timedelta(seconds=60),
                         producer_id=999, producer_epoch=0)  # fmt: skip
        fenced: Any = api.init_producer_id(m, stale, T0).response
        want = ErrorCode.producer_fenced if version >= 4 else ErrorCode.invalid_producer_epoch
        assert fenced.error_code == want


def _begin(m: TransactionStateManager) -> tuple[int, int]:
    req = _request(22, 4, transactional_id="t", transaction_timeout=datetime.timedelta(seconds=60),
                   producer_id=-1, producer_epoch=-1)  # fmt: skip
    resp = _apply(m, api.init_producer_id(m, req, T0))
    return int(resp.producer_id), int(resp.producer_epoch)


@pytest.mark.parametrize("version", range(0, 4))
def test_add_partitions_v3_and_below(version: int) -> None:
    m = _manager()
    pid, epoch = _begin(m)
    cls = load_request_schema(24, version)
    mod = __import__(cls.__module__, fromlist=["AddPartitionsToTxnTopic"])
    topic_cls = mod.AddPartitionsToTxnTopic
    req = _make(cls, v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(_topic(topic_cls, "a", (0, 1)), _topic(topic_cls, "gone", (0,))))  # fmt: skip
    exists = lambda t, p: t == "a"  # noqa: E731
    resp = _roundtrip(_apply(m, api.add_partitions_to_txn(m, req, T0, exists)))
    errors = {(t.name, p.partition_index): p.partition_error_code
              for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}  # fmt: skip
    assert errors == {("a", 0): ErrorCode.operation_not_attempted,
                      ("a", 1): ErrorCode.operation_not_attempted,
                      ("gone", 0): ErrorCode.unknown_topic_or_partition}  # fmt: skip
    req = _make(cls, v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch, v3_and_below_topics=(_topic(topic_cls, "a", (0,)),))  # fmt: skip
    resp = _roundtrip(_apply(m, api.add_partitions_to_txn(m, req, T0, exists)))
    assert (
        resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        == ErrorCode.none
    )
    assert m.transactions["t"].topic_partitions == {("a", 0)}


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_batched_and_verify_only(version: int) -> None:
    m = _manager()
    pid, epoch = _begin(m)
    cls = load_request_schema(24, version)
    mod = __import__(cls.__module__, fromlist=["x"])

    def txn(verify: bool, parts: tuple[int, ...]) -> Any:
        return _make(mod.AddPartitionsToTxnTransaction, transactional_id="t", producer_id=pid,
                     producer_epoch=epoch, verify_only=verify,
                     topics=(_topic(mod.AddPartitionsToTxnTopic, "a", parts),))  # fmt: skip

    resp = _roundtrip(
        _apply(
            m,
            api.add_partitions_to_txn(
                m, _make(cls, transactions=(txn(False, (0,)),)), T0, lambda t, p: True
            ),
        )
    )
    assert (
        resp.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code
        == ErrorCode.none
    )
    resp = _roundtrip(
        _apply(
            m,
            api.add_partitions_to_txn(
                m, _make(cls, transactions=(txn(True, (0, 1)),)), T0, lambda t, p: True
            ),
        )
    )
    codes = [
        p.partition_error_code
        for p in resp.results_by_transaction[0].topic_results[0].results_by_partition
    ]
    assert codes == [ErrorCode.none, ErrorCode.invalid_txn_state]


@pytest.mark.parametrize("version", range(0, 5))
def test_add_offsets_and_end_txn(version: int) -> None:
    m = _manager()
    pid, epoch = _begin(m)
    req = _request(
        25, version, transactional_id="t", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    assert _roundtrip(_apply(m, api.add_offsets_to_txn(m, req, T0))).error_code == ErrorCode.none
    end = _request(
        26, version, transactional_id="t", producer_id=pid, producer_epoch=epoch, committed=True
    )
    out = api.end_txn(m, end, T0)
    assert _roundtrip(_apply(m, out)).error_code == ErrorCode.none
    assert out.markers is not None and out.markers.partitions[0][0] == "__consumer_offsets"
    old = _request(
        26, version, transactional_id="t", producer_id=pid, producer_epoch=epoch + 5, committed=True
    )
    want = ErrorCode.producer_fenced if version >= 2 else ErrorCode.invalid_producer_epoch
    fenced: Any = api.end_txn(m, old, T0).response
    assert fenced.error_code == want


def test_describe_and_list_transactions() -> None:
    m = _manager()
    _begin(m)
    d = api.describe_transactions(m, _request(65, 0, transactional_ids=("t", "nope")))
    buf = io.BytesIO()
    entity_writer(type(d))(buf, d)  # kio writes it; its reader refuses the -1 start time
    # that Kafka sends for a transaction that has not started (as here)
    assert (-1).to_bytes(8, "big", signed=True) in buf.getvalue()
    assert [(s.transactional_id, s.error_code, s.transaction_state) for s in d.transaction_states] == [
        ("t", ErrorCode.none, "Empty"), ("nope", ErrorCode.transactional_id_not_found, ""),
    ]  # fmt: skip
    for version in range(0, 3):
        req = _request(66, version, state_filters=("Empty", "Weird"), producer_id_filters=(),
                       duration_filter=-1, transactional_id_pattern="t.*")  # fmt: skip
        resp = _roundtrip(api.list_transactions(m, req, T0))
        assert [s.transactional_id for s in resp.transaction_states] == ["t"]
        assert resp.unknown_state_filters == ("Weird",)
    bad = _request(66, 2, state_filters=(), producer_id_filters=(), transactional_id_pattern="(")
    assert api.list_transactions(m, bad, T0).error_code == ErrorCode.invalid_regular_expression
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"


@pytest.mark.parametrize("version", [1, 2])
def test_write_txn_markers_roundtrip(version: int) -> None:
    from odradek.coordinator.transaction import TransactionResult, TxnMarker

    markers = [
        TxnMarker("a", 0, 7, 1, TransactionResult.COMMIT, 3),
        TxnMarker("a", 2, 7, 1, TransactionResult.COMMIT, 3),
        TxnMarker("b", 1, 7, 1, TransactionResult.COMMIT, 3),
        TxnMarker("a", 1, 9, 0, TransactionResult.ABORT, 3),
    ]
    req = _roundtrip(requests.write_txn_markers_request(markers, version))
    assert len(req.markers) == 2
    assert api.txn_markers_of(req) == markers
    resp = _roundtrip(
        api.write_txn_markers_response(req, {(9, "a", 1): Errors.TRANSACTION_COORDINATOR_FENCED})
    )
    codes = {
        (int(m.producer_id), t.name, int(p.partition_index)): p.error_code
        for m in resp.markers
        for t in m.topics
        for p in t.partitions
    }
    assert codes[(9, "a", 1)] == ErrorCode.transaction_coordinator_fenced
    assert codes[(7, "b", 1)] == ErrorCode.none


@pytest.mark.parametrize("version", [3, 4])
def test_with_error_sets_every_error_code(version: int) -> None:
    """A request whose records could not be written answers its retriable error everywhere."""
    m = _manager()
    pid, epoch = _begin(m)
    cls = load_request_schema(24, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    if version <= 3:
        req = _make(cls, v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=(_topic(mod.AddPartitionsToTxnTopic, "a", (0, 1)),))  # fmt: skip
    else:
        req = _make(cls, transactions=(_make(
            mod.AddPartitionsToTxnTransaction, transactional_id="t", producer_id=pid,
            producer_epoch=epoch, verify_only=False,
            topics=(_topic(mod.AddPartitionsToTxnTopic, "a", (0, 1)),)),))  # fmt: skip
    out = api.add_partitions_to_txn(m, req, T0, lambda t, p: True)
    resp = _roundtrip(api.with_error(out.response, Errors.COORDINATOR_NOT_AVAILABLE))
    if version <= 3:
        codes = [p.partition_error_code for t in resp.results_by_topic_v3_and_below
                 for p in t.results_by_partition]  # fmt: skip
    else:
        assert resp.error_code == ErrorCode.coordinator_not_available
        codes = [p.partition_error_code for r in resp.results_by_transaction
                 for t in r.topic_results for p in t.results_by_partition]  # fmt: skip
    assert codes == [ErrorCode.coordinator_not_available] * 2
    end = _request(26, 3, transactional_id="t", producer_id=pid, producer_epoch=epoch,
                   committed=True)  # fmt: skip
    answer = api.with_error(api.end_txn(m, end, T0).response, Errors.NOT_COORDINATOR)
    assert _roundtrip(answer).error_code == ErrorCode.not_coordinator


def test_verify_partitions_request_and_results() -> None:
    """A partition leader's KIP-890 question to a coordinator on another broker, answered by
    the coordinator's glue: NONE for partitions in the transaction, INVALID_TXN_STATE for the
    others, PRODUCER_FENCED for an old epoch."""
    m = _manager()
    _begin(m)
    pid, epoch = _begin(m)  # a second instance: epoch 1
    assert epoch == 1
    cls = load_request_schema(24, 3)
    mod = __import__(cls.__module__, fromlist=["x"])
    add = _make(cls, v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(_topic(mod.AddPartitionsToTxnTopic, "a", (0,)),))  # fmt: skip
    _apply(m, api.add_partitions_to_txn(m, add, T0, lambda t, p: True))

    ask = _roundtrip(requests.verify_partitions_request("t", pid, epoch, [("a", 0), ("a", 1)]))
    out = api.add_partitions_to_txn(m, ask, T0, lambda t, p: True)
    assert out.records == []  # verify_only writes nothing
    assert requests.verify_partitions_results(_roundtrip(out.response)) == {
        ("a", 0): 0,
        ("a", 1): int(ErrorCode.invalid_txn_state),
    }
    stale = _roundtrip(requests.verify_partitions_request("t", pid, epoch - 1, [("a", 0)]))
    answer = api.add_partitions_to_txn(m, stale, T0, lambda t, p: True).response
    assert requests.verify_partitions_results(_roundtrip(answer)) == {
        ("a", 0): int(ErrorCode.producer_fenced)
    }
