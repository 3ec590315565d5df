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
