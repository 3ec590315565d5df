"""An EndTxn whose request is cancelled while its markers are being written (the client
disconnected: the connection cancels its handlers) still completes the transaction: the
markers belong to the coordinator once PrepareCommit is written. Driven on a real in-process
broker's partition writer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from odradek.broker.server import transaction_coordinator_config
from odradek.coordinator.transaction import Errors as TxnErrors
from odradek.coordinator.transaction import TransactionState, TxnMarker
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(30)


async def test_cancelled_end_txn_still_completes_the_transaction() -> None:
    broker = EmbeddedBroker({"transaction.state.log.num.partitions": 2}, thread=False)
    await broker.astart()
    try:
        server = broker.broker
        entered = asyncio.Event()
        gate = asyncio.Event()
        written: list[TxnMarker] = []

        async def write_markers(markers: Sequence[TxnMarker]) -> Mapping[tuple[str, int], int]:
            entered.set()
            await gate.wait()
            written.extend(markers)
            return {(m.topic, m.partition): 0 for m in markers}

        coord = TransactionCoordinator(
            server.coordinator_writer,
            transaction_coordinator_config(server.config),
            server.clock,
            server.producer_ids.allocate,
            write_markers,
        )
        await coord.start()
        try:
            init = await coord.execute(
                lambda m, now: m.init_producer_id("tx", 60_000, now), creates=True
            )
            assert init.error is TxnErrors.NONE
            pid, epoch = init.producer_id, init.producer_epoch
            added = await coord.execute(
                lambda m, now: m.add_partitions("tx", pid, epoch, [("out", 0)], now)
            )
            assert added is TxnErrors.NONE
            end = asyncio.create_task(
                coord.execute(lambda m, now: m.end_txn("tx", pid, epoch, True, now))
            )
            await asyncio.wait_for(entered.wait(), 10)
            end.cancel()
            with pytest.raises(asyncio.CancelledError):
                await end
            gate.set()
            deadline = asyncio.get_running_loop().time() + 10
            while coord.manager.transactions["tx"].state is not TransactionState.COMPLETE_COMMIT:
                assert asyncio.get_running_loop().time() < deadline, "the commit never completed"
                await asyncio.sleep(0.01)
            assert [(m.topic, m.partition) for m in written] == [("out", 0)]
        finally:
            await coord.stop()
    finally:
        await broker.astop()
