"""Transactions on the wire against a real broker process: the transaction coordinator's APIs,
KIP-890 verification of transactional Produce, the last stable offset in Fetch and ListOffsets
(read_committed), the aborted-transactions list, TxnOffsetCommit pending until the COMMIT
marker (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT), WriteTxnMarkers' epoch checks;
and, in process, a coordinator that restarts with a transaction in PrepareCommit completes it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from odradek.coordinator.transaction import TransactionResult, TxnMarker
from odradek.coordinator.transaction.requests import write_txn_markers_request
from odradek.protocol.records import build_batch, iter_batches
from odradek.testing.process import BrokerProcess

from .wire import Wire, fetch_request, ms, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"offsets.topic.num.partitions": 3, "transaction.max.timeout.ms": 60000}
TOPIC = "txn-wire"


@pytest.fixture(scope="module", autouse=True)
def _txn_topic(broker: BrokerProcess) -> None:
    """The module's topic (2 partitions), created once on the module's broker."""
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
    r = wire.call(
        fetch_request(
            TOPIC,
            {partition: offset},
            version=11,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=isolation,
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


# -- in process: a coordinator restarting with a transaction in PrepareCommit ---------------------


async def _call(broker: Any, api_key: int, version: int, **fields: Any) -> Any:
    from kio.index import load_request_schema, load_response_schema
    from kio.serial import entity_reader

    from odradek.broker.api import EncodedResponse, RequestContext, RequestHeaderInfo
    from odradek.broker.registry import load_registry
    from odradek.protocol.messages import make_entity

    cls = load_request_schema(api_key, version)
    ctx = RequestContext(
        broker.services, RequestHeaderInfo(api_key, version, 1, "unit"), "127.0.0.1", 1
    )
    response = await load_registry()[api_key].handler(ctx, make_entity(cls, **fields))
    if isinstance(response, EncodedResponse):
        body = b"".join(bytes(p) for p in response.parts)
        return entity_reader(load_response_schema(api_key, version))(body, 0)[0]
    return response


async def test_restart_completes_a_prepared_commit(tmp_path: Any) -> None:
    """The broker stops after PrepareCommit reached ``__transaction_state`` but before any
    marker was written (as after a crash there): the restarted coordinator finds it while
    loading, writes the COMMIT markers (the data and the group offsets become visible) and
    CompleteCommit."""
    from odradek.broker.config import BrokerConfig
    from odradek.broker.server import Broker
    from odradek.coordinator.records import build_batch as state_batch
    from odradek.coordinator.transaction.records import (
        TRANSACTION_STATE_TOPIC,
        TransactionLogRecord,
        TransactionLogValue,
        encode_record,
        partition_for,
    )
    from odradek.coordinator.transaction.state import TransactionState

    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    b = Broker(config)
    await b.start()
    try:
        b.create_topic("t", 1)
        r = await _call(
            b,
            22,
            4,
            transactional_id="r1",
            transaction_timeout=ms(60000),
            producer_id=-1,
            producer_epoch=-1,
        )
        pid, epoch = int(r.producer_id), int(r.producer_epoch)
        t = req(24, 3, "AddPartitionsToTxnTopic", name="t", partitions=(0,))
        await _call(
            b,
            24,
            3,
            v3_and_below_transactional_id="r1",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(t,),
        )
        r = await _call(
            b, 25, 3, transactional_id="r1", producer_id=pid, producer_epoch=epoch, group_id="g"
        )
        assert int(r.error_code) == 0
        b.group_coordinator.fetch_offsets("g", None)  # creates __consumer_offsets
        offsets_partition = b.partition("__consumer_offsets", partition_for("g", 3))
        assert offsets_partition is not None
        assert not offsets_partition.producer_state().in_transaction(pid)  # loaded, empty
        p = req(
            28,
            3,
            "TxnOffsetCommitRequestPartition",
            partition_index=0,
            committed_offset=7,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        tt = req(28, 3, "TxnOffsetCommitRequestTopic", name="t", partitions=(p,))
        r = await _call(
            b,
            28,
            3,
            transactional_id="r1",
            group_id="g",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(tt,),
        )
        assert int(r.topics[0].partitions[0].error_code) == 0
        # the offsets went to the group's partition as a transactional batch of the producer
        assert offsets_partition.producer_state().in_transaction(pid)
        now = int(time.time() * 1000)
        batch = build_batch(
            [(None, b"v", (), now)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            is_transactional=True,
        )
        pd = req(0, 8, "PartitionProduceData", index=0, records=batch)
        td = req(0, 8, "TopicProduceData", name="t", partition_data=(pd,))
        r = await _call(b, 0, 8, transactional_id="r1", acks=-1, timeout=ms(5000), topic_data=(td,))
        assert int(r.responses[0].partition_responses[0].error_code) == 0
        m = b.txn_coordinator.manager.transactions["r1"]
        assert m.state is TransactionState.ONGOING
        prepared = TransactionLogRecord(
            "r1",
            TransactionLogValue(
                pid,
                epoch,
                m.txn_timeout_ms,
                TransactionState.PREPARE_COMMIT,
                tuple(sorted(m.topic_partitions)),
                now,
                m.txn_start_timestamp_ms,
            ),
        )
        b.coordinator_writer.append(
            TRANSACTION_STATE_TOPIC,
            b.txn_coordinator.manager.partition_for("r1"),
            state_batch([encode_record(prepared)], now),
        )
        part = b.partition("t", 0)
        assert part is not None
        assert part.producer_state().last_stable_offset(part.high_watermark) == 0
    finally:
        await b.stop()

    b = Broker(config)
    await b.start()
    try:
        await b.txn_coordinator.wait_loaded()
        await b.group_coordinator.wait_loaded()
        m = b.txn_coordinator.manager.transactions["r1"]
        assert m.state is TransactionState.COMPLETE_COMMIT
        part = b.partition("t", 0)
        assert part is not None
        assert part.high_watermark == 2  # the data and the COMMIT marker
        assert part.producer_state().last_stable_offset(part.high_watermark) == 2
        error, offsets = b.group_coordinator.fetch_offsets("g", [("t", [0])])
        assert int(error) == 0
        om = offsets[0][1][0][1]
        assert om is not None and om.offset == 7
        offsets_partition = b.partition("__consumer_offsets", partition_for("g", 3))
        assert offsets_partition is not None
        assert not offsets_partition.producer_state().in_transaction(pid)
    finally:
        await b.stop()


async def test_timeout_abort_and_deleted_partition(tmp_path: Any) -> None:
    """With a manual clock: an open transaction past its transaction.timeout.ms is aborted
    with the epoch bumped (its producer is fenced, the LSO is released, the abort is listed);
    a transaction whose partition's topic was deleted meanwhile still completes."""
    from odradek.broker.config import BrokerConfig
    from odradek.broker.server import Broker
    from odradek.clock import ManualClock
    from odradek.coordinator.transaction.state import TransactionState

    clock = ManualClock()
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    b = Broker(config, clock)
    await b.start()
    try:
        b.create_topic("t", 1)
        b.create_topic("gone", 1)

        async def begin(txn_id: str, topic: str, timeout_ms: int) -> tuple[int, int]:
            r = await _call(
                b,
                22,
                4,
                transactional_id=txn_id,
                transaction_timeout=ms(timeout_ms),
                producer_id=-1,
                producer_epoch=-1,
            )
            pid, epoch = int(r.producer_id), int(r.producer_epoch)
            t = req(24, 3, "AddPartitionsToTxnTopic", name=topic, partitions=(0,))
            r = await _call(
                b,
                24,
                3,
                v3_and_below_transactional_id=txn_id,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(t,),
            )
            assert (
                int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
                == 0
            )
            batch = build_batch(
                [(None, b"v", (), clock.now_ms())],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=0,
                is_transactional=True,
            )
            pd = req(0, 8, "PartitionProduceData", index=0, records=batch)
            td = req(0, 8, "TopicProduceData", name=topic, partition_data=(pd,))
            r = await _call(
                b, 0, 8, transactional_id=txn_id, acks=-1, timeout=ms(5000), topic_data=(td,)
            )
            assert int(r.responses[0].partition_responses[0].error_code) == 0
            return pid, epoch

        pid, epoch = await begin("slow", "t", 5000)
        part = b.partition("t", 0)
        assert part is not None
        state = part.producer_state()
        assert state.last_stable_offset(part.high_watermark) == 0
        clock.advance(4000)
        assert await b.txn_coordinator.abort_timed_out_transactions() == 0
        clock.advance(1001)
        assert await b.txn_coordinator.abort_timed_out_transactions() == 1
        m = b.txn_coordinator.manager.transactions["slow"]
        assert (m.state, m.producer_epoch) == (TransactionState.COMPLETE_ABORT, epoch + 1)
        assert state.last_stable_offset(part.high_watermark) == part.high_watermark == 2
        assert [(a.producer_id, a.first_offset) for a in state.aborted_transactions(0, 2)] == [
            (pid, 0)
        ]
        r = await _call(
            b, 26, 3, transactional_id="slow", producer_id=pid, producer_epoch=epoch, committed=True
        )
        assert int(r.error_code) == 90  # PRODUCER_FENCED: the timed-out producer is fenced

        pid, epoch = await begin("orphan", "gone", 60000)
        await b.topic_admin.delete_topic("gone")
        r = await _call(
            b,
            26,
            3,
            transactional_id="orphan",
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
        )
        assert int(r.error_code) == 0
        m = b.txn_coordinator.manager.transactions["orphan"]
        assert m.state is TransactionState.COMPLETE_COMMIT
    finally:
        await b.stop()
