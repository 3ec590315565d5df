"""The transactional producer's state machine (pure) and read_committed batch filtering."""

from __future__ import annotations

import pytest

from odradek.client import _records
from odradek.client.aio._txn import TransactionManager, TxnState, error_for
from odradek.client.errors import (
    ConfigError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionStateError,
)
from odradek.client.types import TopicPartition
from odradek.protocol.records import finish_batch, iter_batch_headers

TP = TopicPartition("t", 0)


def test_happy_path_and_partition_gating() -> None:
    m = TransactionManager("tx", 60000)
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        m.check_send()
    with pytest.raises(TransactionStateError, match="UNINITIALIZED"):
        m.transition(TxnState.IN_TRANSACTION)  # begin before init
    m.transition(TxnState.INITIALIZING)
    m.transition(TxnState.READY)
    m.transition(TxnState.IN_TRANSACTION)
    m.check_send()
    assert not m.may_drain(TP) and m.pending == {TP}  # held back until AddPartitionsToTxn
    m.partitions_added([TP])
    assert m.may_drain(TP) and not m.pending and m.anything_to_end
    m.transition(TxnState.COMMITTING_TRANSACTION)
    assert m.may_drain(TP)  # commit flushes
    m.transition(TxnState.COMMITTING_TRANSACTION)  # a timed-out commit may be retried
    m.transition(TxnState.READY)
    assert not m.partitions and not m.anything_to_end
    with pytest.raises(TransactionStateError):
        m.transition(TxnState.COMMITTING_TRANSACTION)  # commit without a transaction
    with pytest.raises(TransactionStateError):
        m.transition(TxnState.ABORTING_TRANSACTION)


def test_abortable_error_only_allows_abort() -> None:
    m = TransactionManager("tx", 60000)
    for s in (TxnState.INITIALIZING, TxnState.READY, TxnState.IN_TRANSACTION):
        m.transition(s)
    m.partitions_added([TP])
    m.fail_abortable(TransactionAbortableError("a batch failed"), bump_epoch=True)
    assert m.state is TxnState.ABORTABLE_ERROR and m.epoch_bump_needed
    assert not m.may_drain(TP)
    with pytest.raises(TransactionAbortableError, match="abort_transaction"):
        m.check_send()
    with pytest.raises(TransactionAbortableError, match="abort_transaction"):
        m.transition(TxnState.COMMITTING_TRANSACTION)
    m.transition(TxnState.ABORTING_TRANSACTION)
    m.fail_abortable(TransactionAbortableError("late failure"))  # no effect while aborting
    assert m.state is TxnState.ABORTING_TRANSACTION
    m.transition(TxnState.READY)
    m.transition(TxnState.IN_TRANSACTION)


def test_fenced_is_fatal_everywhere() -> None:
    m = TransactionManager("tx", 60000)
    for s in (TxnState.INITIALIZING, TxnState.READY, TxnState.IN_TRANSACTION):
        m.transition(s)
    err = error_for(90, "EndTxn", "tx")
    assert isinstance(err, ProducerFencedError) and err.fatal and "fenced" in str(err)
    assert isinstance(error_for(47, "Produce", "tx"), ProducerFencedError)
    assert type(error_for(48, "EndTxn", "tx")) is KafkaError
    m.fail_fatal(err)
    m.fail_fatal(KafkaError("later"))  # the first fatal error stays
    for call in (m.check_send, lambda: m.transition(TxnState.ABORTING_TRANSACTION),
                 lambda: m.transition(TxnState.INITIALIZING)):
        with pytest.raises(ProducerFencedError):
            call()


def test_config_rules() -> None:
    from odradek.client._config import PRODUCER, parse_config

    c = parse_config({"bootstrap.servers": "h:1", "transactional.id": "x"}, PRODUCER, "producer")
    assert c["enable.idempotence"] and c["acks"] == -1 and c["transaction.timeout.ms"] == 60000
    with pytest.raises(ConfigError, match="acks=all"):
        parse_config({"bootstrap.servers": "h:1", "transactional.id": "x", "acks": 1}, PRODUCER, "producer")
    with pytest.raises(ConfigError, match="idempotence"):
        parse_config({"bootstrap.servers": "h:1", "transactional.id": "x", "enable.idempotence": False},
                     PRODUCER, "producer")


def _batch(base: int, pid: int, *, txn: bool = False, control: bool = False, n: int = 1) -> bytes:
    from odradek.protocol.records import encode_records

    data, count, max_ts = encode_records([(None, b"v%d" % (base + i), None, 0) for i in range(n)], 0)
    attrs = (0x10 if txn else 0) | (0x20 if control else 0)
    return finish_batch(data, count, 0, max_ts, attributes=attrs, producer_id=pid, producer_epoch=0,
                        base_sequence=0, base_offset=base)


def test_committed_batches_drops_aborted_and_control() -> None:
    # offsets: 0 plain; 1-2 pid 7 (aborted, marker at 5); 3 pid 8 (committed, marker at 4); 6 pid 7 (open)
    data = b"".join([
        _batch(0, -1), _batch(1, 7, txn=True, n=2), _batch(3, 8, txn=True), _batch(4, 8, txn=True, control=True),
        _batch(5, 7, txn=True, control=True), _batch(6, 7, txn=True),
    ])
    partial = _batch(7, -1)[:30]
    kept = _records.committed_batches(data + partial, [(7, 1)])
    assert [h[0] for _pos, h in iter_batch_headers(kept)] == [0, 3, 6]
    assert kept.endswith(partial)
    recs, nxt = _records.decode_records("t", 0, data, read_committed=True, aborted=[(7, 1)])
    assert [r.offset for r in recs] == [0, 3, 6] and nxt == 7
    assert _records.committed_batches(_batch(0, -1), []) == _batch(0, -1)  # nothing dropped: no copy
