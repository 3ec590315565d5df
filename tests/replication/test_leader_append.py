"""The one leader append (``ReplicaManager.append_records`` → ``Partition.append_as_leader``)
seen from its three writers: Produce, transaction markers and the coordinators' writer, on
in-memory logs, alone and in cluster mode (a replication-factor-1 partition led here)."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from odradek.broker.config import BrokerConfig
from odradek.broker.coordinator_writer import BrokerPartitionWriter
from odradek.broker.local_metadata_store import LocalMetadataStore
from odradek.broker.replica_manager import LeaderAndIsrPartition, ReplicaManager
from odradek.broker.topic_admin import TopicAdmin
from odradek.broker.txn_markers import TxnMarkerAppender
from odradek.clock import ManualClock
from odradek.coordinator.transaction.manager import TxnMarker
from odradek.coordinator.transaction.state import TransactionResult
from odradek.protocol.records import build_batch

from .test_decisions import LocalAlterPartition, in_memory_replica_manager

PID, EPOCH = 7, 0


def txn_batch(n: int, base_sequence: int = 0) -> bytes:
    return build_batch(
        [(None, b"v%d" % i, (), 0) for i in range(n)],
        producer_id=PID,
        producer_epoch=EPOCH,
        base_sequence=base_sequence,
        is_transactional=True,
    )


def lead_alone(rm: ReplicaManager, topic: str = "t") -> None:
    """LeaderAndIsr: broker 1 leads ``topic``-0, its only replica."""
    state = LeaderAndIsrPartition(
        topic, 0, leader=1, leader_epoch=0, isr=[1], partition_epoch=0, replicas=[1]
    )
    assert rm.become_leader_or_follower(0, 1, [state], []) == {(topic, 0): ErrorCode.none}


def in_transaction(*_args: object) -> ErrorCode:
    return ErrorCode.none


async def test_a_marker_on_a_leader_alone_is_below_the_high_watermark_at_once() -> None:
    clock = ManualClock()
    rm = in_memory_replica_manager(LocalMetadataStore(1, None), clock, LocalAlterPartition())
    lead_alone(rm)
    try:
        results, delayed = rm.append_records(
            [("t", 0, txn_batch(3))], -1, 5.0, verify_txn=in_transaction
        )
        # an ISR of this leader alone: the high watermark is past the records, nothing waits
        assert delayed is None
        assert [r.error for r in results] == [ErrorCode.none]
        handle = rm.get_partition("t", 0)
        assert handle is not None and handle.high_watermark == 3
        assert handle.producer_state().last_stable_offset(3) == 0  # the transaction is open

        markers = TxnMarkerAppender(rm, clock, replication_timeout_ms=5000)
        marker = TxnMarker("t", 0, PID, EPOCH, TransactionResult.COMMIT, coordinator_epoch=0)
        # the wait for the ISR ends at once: the HW passed the marker when it was appended
        code = await asyncio.wait_for(markers.append_marker_replicated(marker), 1.0)
        assert code is ErrorCode.none
        assert handle.high_watermark == handle.log.log_end_offset == 4
        assert handle.producer_state().last_stable_offset(4) == 4
        # a marker of an older coordinator epoch is refused, and nothing is written
        stale = TxnMarker("t", 0, PID, EPOCH, TransactionResult.ABORT, coordinator_epoch=-1)
        code = await asyncio.wait_for(markers.append_marker_replicated(stale), 1.0)
        assert code is ErrorCode.transaction_coordinator_fenced
        assert handle.log.log_end_offset == 4
    finally:
        await rm.close()


def test_produce_validation_refuses_before_anything_is_written() -> None:
    rm = in_memory_replica_manager(LocalMetadataStore(1, None), ManualClock(), None)
    appended, _ = rm.append_records([("t", 0, txn_batch(2))], 1, 0.0)
    # no such topic: nothing to lead
    assert appended[0].error is ErrorCode.unknown_topic_or_partition
    bad_acks, _ = rm.append_records([("t", 0, txn_batch(2))], 2, 0.0)
    assert bad_acks[0].error is ErrorCode.invalid_required_acks


@pytest.mark.parametrize("cluster", [False, True], ids=["alone", "cluster"])
async def test_the_coordinator_writer_calls_high_watermark_listeners_once_per_append(
    cluster: bool,
) -> None:
    clock = ManualClock()
    metadata = LocalMetadataStore(1, None)
    rm = in_memory_replica_manager(metadata, clock, LocalAlterPartition() if cluster else None)
    admin = TopicAdmin(BrokerConfig.from_properties({}), metadata, rm)
    writer = BrokerPartitionWriter(metadata, rm, admin)
    writer.ensure_internal_topic("__internal", 1, {})
    if cluster:
        lead_alone(rm, "__internal")
    seen: list[tuple[int, int]] = []
    writer.add_high_watermark_listener("__internal", lambda p, hw: seen.append((p, hw)))
    try:
        assert writer.append("__internal", 0, build_batch([(b"k", b"v", (), 0)])) == 0
        assert writer.append("__internal", 0, build_batch([(b"k", b"w", (), 0)] * 2)) == 1
        assert seen == [(0, 1), (0, 3)]
        # a coordinator's transactional data batch opens its producer's transaction
        base = writer.append("__internal", 0, txn_batch(1))
        handle = rm.get_partition("__internal", 0)
        assert handle is not None and handle.producer_state().in_transaction(PID)
        assert handle.producer_state().last_stable_offset(handle.high_watermark) == base
    finally:
        await rm.close()
