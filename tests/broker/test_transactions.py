"""Transactions on the wire against a real broker process: the transaction coordinator's APIs,
KIP-890 verification of transactional Produce, the last stable offset in Fetch and ListOffsets
(read_committed), the aborted-transactions list, TxnOffsetCommit pending until the COMMIT
marker (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT), WriteTxnMarkers' epoch checks;
and, in process, a coordinator that restarts with a transaction in PrepareCommit completes it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.broker.apis._transactions import write_txn_markers_request
from odradek.coordinator.transaction import TransactionResult, TxnMarker
from odradek.protocol.records import build_batch, iter_batches
from odradek.testing.process import BrokerProcess

from .wire import Wire, ms, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"offsets.topic.num.partitions": 3, "transaction.max.timeout.ms": 60000}
TOPIC = "txn-wire"


@pytest.fixture(scope="module")
def wire(broker: BrokerProcess) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        t = req(
            19,
            4,
            "CreatableTopic",
            name=TOPIC,
            num_partitions=2,
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        r = w.call(req(19, 4, topics=(t,), timeout=ms(10000), validate_only=False))
        assert int(r.topics[0].error_code) == 0
        yield w


def _init(
    wire: Wire, txn_id: str, timeout_ms: int = 30000, version: int = 4
) -> tuple[int, int, int]:
    r = wire.call(
        req(
            22,
            version,
            transactional_id=txn_id,
            transaction_timeout=ms(timeout_ms),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    return int(r.error_code), int(r.producer_id), int(r.producer_epoch)


def _add(wire: Wire, txn_id: str, pid: int, epoch: int, partitions: list[int]) -> list[int]:
    t = req(24, 3, "AddPartitionsToTxnTopic", name=TOPIC, partitions=tuple(partitions))
    r = wire.call(
        req(
            24,
            3,
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(t,),
        )
    )
    return [
        int(p.partition_error_code)
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]


def _produce(
    wire: Wire,
    txn_id: str | None,
    pid: int,
    epoch: int,
    seq: int,
    values: list[bytes],
    partition: int = 0,
) -> tuple[int, int]:
    batch = build_batch(
        [(None, v, (), int(time.time() * 1000)) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    pd = req(0, 8, "PartitionProduceData", index=partition, records=batch)
    td = req(0, 8, "TopicProduceData", name=TOPIC, partition_data=(pd,))
    r = wire.call(req(0, 8, transactional_id=txn_id, acks=-1, timeout=ms(5000), topic_data=(td,)))
    pr = r.responses[0].partition_responses[0]
    return int(pr.error_code), int(pr.base_offset)


def _end(wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    r = wire.call(
        req(26, 3, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    )
    return int(r.error_code)


def _latest(wire: Wire, isolation: int, partition: int = 0) -> int:
    p = req(
        2,
        5,
        "ListOffsetsPartition",
        partition_index=partition,
        current_leader_epoch=-1,
        timestamp=-1,
    )
    t = req(2, 5, "ListOffsetsTopic", name=TOPIC, partitions=(p,))
    r = wire.call(req(2, 5, replica_id=-1, isolation_level=isolation, topics=(t,)))
    return int(r.topics[0].partitions[0].offset)


def _fetch(wire: Wire, isolation: int, offset: int = 0, partition: int = 0) -> Any:
    fp = req(
        1,
        11,
        "FetchPartition",
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    ft = req(1, 11, "FetchTopic", topic=TOPIC, partitions=(fp,))
    r = wire.call(
        req(
            1,
            11,
            replica_id=-1,
            max_wait=ms(0),
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,
            topics=(ft,),
            forgotten_topics_data=(),
            rack_id="",
        )
    )
    return r.responses[0].partitions[0]


def test_transaction_over_the_wire(wire: Wire) -> None:
    assert _init(wire, "w1", timeout_ms=120000)[0] == 50  # INVALID_TRANSACTION_TIMEOUT
    error, pid, epoch = _init(wire, "w1")
    assert error == 0 and pid >= 0 and epoch == 0
    plain = _produce(wire, None, pid, epoch, 0, [b"x"])  # transactional, no transactional id
    assert plain[0] == 48  # INVALID_TXN_STATE
    # KIP-890: a transactional batch for a partition not added to the transaction is refused
    assert _produce(wire, "w1", pid, epoch, 0, [b"early"])[0] == 48
    assert _add(wire, "w1", pid, epoch, [0]) == [0]
    hw_before = _latest(wire, 0)
    code, base = _produce(wire, "w1", pid, epoch, 0, [b"a", b"b", b"c"])
    assert code == 0 and base == hw_before
    # the open transaction holds the LSO at its first offset
    assert _latest(wire, 1) == base and _latest(wire, 0) == base + 3
    part = _fetch(wire, 1)
    assert int(part.last_stable_offset) == base
    assert not part.records
    assert int(part.high_watermark) == base + 3

    r = wire.call(req(65, 0, transactional_ids=("w1", "nope")))
    states = {s.transactional_id: s for s in r.transaction_states}
    assert states["w1"].transaction_state == "Ongoing"
    assert [(t.topic, tuple(t.partitions)) for t in states["w1"].topics] == [(TOPIC, (0,))]
    assert int(states["nope"].error_code) == 105  # TRANSACTIONAL_ID_NOT_FOUND
    r = wire.call(
        req(66, 1, state_filters=("Ongoing",), producer_id_filters=(), duration_filter=-1)
    )
    assert [t.transactional_id for t in r.transaction_states] == ["w1"]

    assert _end(wire, "w1", pid, epoch, commit=False) == 0
    assert _end(wire, "w1", pid, epoch, commit=False) == 0  # a retry of a finished EndTxn
    marker = base + 3
    assert _latest(wire, 1) == _latest(wire, 0) == marker + 1
    part = _fetch(wire, 1)
    assert [(int(a.producer_id), int(a.first_offset)) for a in part.aborted_transactions] == [
        (pid, base)
    ]
    batches = list(iter_batches(bytes(part.records)))
    assert batches[-1].is_control and batches[-1].base_offset == marker
    assert _fetch(wire, 0).aborted_transactions is None  # read_uncommitted: no list

    # a second instance bumps the epoch; the first is fenced
    error, pid2, epoch2 = _init(wire, "w1")
    assert (error, pid2, epoch2) == (0, pid, epoch + 1)
    assert _add(wire, "w1", pid, epoch, [1]) == [90]  # PRODUCER_FENCED (v2+, KIP-588)
    assert _produce(wire, "w1", pid, epoch, 3, [b"zombie"])[0] == 47


def test_txn_offset_commit_visible_on_commit(wire: Wire) -> None:
    group = "txn-group"
    error, pid, epoch = _init(wire, "w2")
    assert error == 0
    r = wire.call(
        req(25, 3, transactional_id="w2", producer_id=pid, producer_epoch=epoch, group_id=group)
    )
    assert int(r.error_code) == 0

    def commit_offset(v: int, e: int) -> int:
        p = req(
            28,
            v,
            "TxnOffsetCommitRequestPartition",
            partition_index=1,
            committed_offset=42,
            committed_leader_epoch=-1,
            committed_metadata="m",
        )
        t = req(28, v, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(p,))
        r = wire.call(
            req(
                28,
                v,
                transactional_id="w2",
                group_id=group,
                producer_id=pid,
                producer_epoch=e,
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                topics=(t,),
            )
        )
        return int(r.topics[0].partitions[0].error_code)

    def fetch_offset(stable: bool) -> tuple[int, int]:
        t = req(9, 7, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(1,))
        r = wire.call(req(9, 7, group_id=group, topics=(t,), require_stable=stable))
        p = r.topics[0].partitions[0]
        return int(p.error_code), int(p.committed_offset)

    assert commit_offset(3, epoch + 1) == 90  # PRODUCER_FENCED (v3)
    assert commit_offset(2, epoch + 1) == 47  # INVALID_PRODUCER_EPOCH before v3
    assert commit_offset(3, epoch) == 0
    assert fetch_offset(stable=False) == (0, -1)  # pending: not the group's offset yet
    assert fetch_offset(stable=True) == (88, -1)  # UNSTABLE_OFFSET_COMMIT
    assert _end(wire, "w2", pid, epoch, commit=True) == 0
    assert fetch_offset(stable=True) == (0, 42)


def test_write_txn_markers_checks_epochs(wire: Wire) -> None:
    def write(pid: int, epoch: int, coordinator_epoch: int, partition: int = 1) -> int:
        marker = TxnMarker(TOPIC, partition, pid, epoch, TransactionResult.ABORT, coordinator_epoch)
        r = wire.call(write_txn_markers_request([marker]))
        return int(r.markers[0].topics[0].partitions[0].error_code)

    pid = 987654
    assert write(pid, 3, 5) == 0
    assert write(pid, 3, 4) == 52  # TRANSACTION_COORDINATOR_FENCED
    assert write(pid, 2, 5) == 47  # INVALID_PRODUCER_EPOCH
    assert write(pid, 3, 5, partition=9) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    part = _fetch(wire, 0, partition=1)
    last = list(iter_batches(bytes(part.records)))[-1]
    assert last.is_control and last.producer_id == pid and last.producer_epoch == 3
