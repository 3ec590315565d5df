"""The group coordinator in a cluster serves only the __consumer_offsets partitions its broker
leads: NOT_COORDINATOR elsewhere, loaded from the log when leadership arrives, unloaded when it
goes (Kafka's onElection / onResignation). Driven on a real in-process broker."""

from __future__ import annotations

import asyncio

import pytest

from odradek.coordinator import OFFSETS_TOPIC, OffsetCommitEntry
from odradek.coordinator.records import partition_for
from odradek.coordinator.state import Errors
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(30)

SETTINGS = {"offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0}


async def test_coordinator_follows_offsets_partition_leadership() -> None:
    broker = EmbeddedBroker(SETTINGS, thread=False)
    await broker.astart()
    try:
        main = broker.broker.group_coordinator
        assert main.coordinator_for("g")[0] is Errors.NONE  # creates the topic
        entry = OffsetCommitEntry(OFFSETS_TOPIC, 1, 7, -1, None)
        assert await main.commit_offsets("g", -1, "", None, [entry]) == [Errors.NONE]
        p = partition_for("g", 4)

        coord = broker.broker.new_group_coordinator()
        coord.follow_partition_leadership()
        await coord.start()
        try:
            # not led here: NOT_COORDINATOR, but FindCoordinator names the leader
            assert coord.fetch_offsets("g", None)[0] is Errors.NOT_COORDINATOR
            assert coord.coordinator_for("g")[0] is Errors.NONE
            assert not coord.is_loading

            coord.on_leadership_change([p], [])
            assert coord.fetch_offsets("g", None)[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
            await asyncio.wait_for(coord.wait_partitions_loaded(), 10)
            assert not coord.is_loading
            error, fetched = coord.fetch_offsets("g", [(OFFSETS_TOPIC, [1])])
            assert error is Errors.NONE and fetched[0][1][0][1].offset == 7
            # another partition is still not ours
            other = next(g for g in (f"x{i}" for i in range(100)) if partition_for(g, 4) != p)
            assert coord.fetch_offsets(other, None)[0] is Errors.NOT_COORDINATOR

            coord.on_leadership_change([], [p])
            assert coord.fetch_offsets("g", None)[0] is Errors.NOT_COORDINATOR
            assert "g" not in coord.manager.groups
        finally:
            await coord.stop()
    finally:
        await broker.astop()


async def test_transaction_coordinator_follows_transaction_state_leadership() -> None:
    """The transaction coordinator in a cluster: NOT_COORDINATOR for partitions not led here;
    LeaderAndIsr loads one (its leader epoch is the coordinator epoch) and a transaction found
    in PrepareCommit gets its markers written and completes; losing leadership unloads it."""
    from collections.abc import Mapping, Sequence

    from odradek.broker.server import transaction_coordinator_config
    from odradek.coordinator.records import build_batch
    from odradek.coordinator.transaction import (
        TRANSACTION_STATE_TOPIC,
        TransactionLogRecord,
        TransactionLogValue,
        TransactionResult,
        TransactionState,
        TxnMarker,
    )
    from odradek.coordinator.transaction import Errors as TxnErrors
    from odradek.coordinator.transaction.coordinator import TransactionCoordinator
    from odradek.coordinator.transaction.records import encode_record

    broker = EmbeddedBroker({**SETTINGS, "transaction.state.log.num.partitions": 4}, thread=False)
    await broker.astart()
    try:
        server = broker.broker
        writer = server.coordinator_writer
        writer.ensure_internal_topic(TRANSACTION_STATE_TOPIC, 4, {"cleanup.policy": "compact"})
        p = partition_for("tx", 4)
        prepared = TransactionLogValue(
            7, 3, 60_000, TransactionState.PREPARE_COMMIT, (("out", 0), ("out", 1)), 1, 1
        )
        pairs = [encode_record(TransactionLogRecord("tx", prepared))]
        writer.append(TRANSACTION_STATE_TOPIC, p, build_batch(pairs, 1))

        written: list[TxnMarker] = []

        async def write_markers(markers: Sequence[TxnMarker]) -> Mapping[tuple[str, int], int]:
            written.extend(markers)
            return {(m.topic, m.partition): 0 for m in markers}

        coord = TransactionCoordinator(
            writer,
            transaction_coordinator_config(server.config),
            server.clock,
            server.producer_ids.allocate,
            write_markers,
        )
        coord.follow_partition_leadership()
        await coord.start()
        try:
            out = await coord.execute(lambda m, now: m.init_producer_id("tx", 60_000, now))
            assert out.error is TxnErrors.NOT_COORDINATOR
            assert coord.coordinator_for("tx")[0] is TxnErrors.NONE  # names the leader

            coord.on_leadership_change({p: 5}, [])
            assert coord.coordinator_for("tx")[0] is TxnErrors.COORDINATOR_LOAD_IN_PROGRESS
            await asyncio.wait_for(coord.wait_partitions_loaded(), 10)
            assert {(m.topic, m.partition) for m in written} == {("out", 0), ("out", 1)}
            assert all(m.coordinator_epoch == 5 and m.producer_epoch == 3 for m in written)
            assert all(m.result is TransactionResult.COMMIT for m in written)
            txn = coord.manager.transactions["tx"]
            assert txn.state is TransactionState.COMPLETE_COMMIT
            # the completion was written: a reload finds it complete, with nothing to write
            written.clear()
            coord.on_leadership_change({p: 6}, [])
            await asyncio.wait_for(coord.wait_partitions_loaded(), 10)
            assert written == []
            assert coord.manager.transactions["tx"].state is TransactionState.COMPLETE_COMMIT

            coord.on_leadership_change({}, [p])
            assert "tx" not in coord.manager.transactions
            out = await coord.execute(lambda m, now: m.init_producer_id("tx", 60_000, now))
            assert out.error is TxnErrors.NOT_COORDINATOR
        finally:
            await coord.stop()
    finally:
        await broker.astop()
