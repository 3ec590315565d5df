"""GroupCoordinator on a real in-process broker (odradek.testing.EmbeddedBroker on the test's
loop): persistence in __consumer_offsets, reload by replay after a restart, group commit with
fsync, COORDINATOR_LOAD_IN_PROGRESS while loading. Time is a ManualClock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.coordinator import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    GroupMetadataManager,
    JoinParams,
    OffsetCommitEntry,
)
from odradek.coordinator.records import partition_for
from odradek.coordinator.state import Errors, GroupState
from odradek.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(30)

SETTINGS = {"offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0}


def _join(group: str, member_id: str = "", instance: str | None = None) -> JoinParams:
    return JoinParams(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[("range", b"sub")],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        client_id="test",
        client_host="/127.0.0.1",
    )


async def _stable_member(coord: GroupCoordinator, group: str) -> tuple[str, int]:
    first = await coord.join_group(_join(group))
    assert first.error is Errors.MEMBER_ID_REQUIRED
    joined = await coord.join_group(_join(group, first.member_id))
    assert joined.error is Errors.NONE
    synced = await coord.sync_group(
        group,
        joined.generation_id,
        joined.member_id,
        None,
        None,
        None,
        [(joined.member_id, b"asg")],
    )
    assert synced.error is Errors.NONE and synced.assignment == b"asg"
    return joined.member_id, joined.generation_id


async def test_offsets_and_groups_survive_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    broker = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, clock=clock, thread=False)
    await broker.astart()
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        # created on the first group request, as Kafka does
        assert broker.broker.metadata.topic(OFFSETS_TOPIC) is None
        member, gen = await _stable_member(coord, "live")
        assert broker.broker.metadata.topic(OFFSETS_TOPIC).num_partitions == 4
        errors = await coord.commit_offsets(
            "live", gen, member, None, [OffsetCommitEntry(OFFSETS_TOPIC, 0, 42, 1, "meta")]
        )
        assert errors == [Errors.NONE]
        assert await coord.commit_offsets(
            "simple", -1, "", None, [OffsetCommitEntry(OFFSETS_TOPIC, 1, 7, -1, None)]
        ) == [Errors.NONE]
        assert await coord.commit_offsets(
            "simple", -1, "", None, [OffsetCommitEntry("no-such-topic", 0, 7)]
        ) == [Errors.UNKNOWN_TOPIC_OR_PARTITION]
        # the records are in the group's partition of __consumer_offsets
        p = partition_for("live", 4)
        assert broker.broker.partition(OFFSETS_TOPIC, p).log.log_end_offset >= 2
    finally:
        await broker.astop()

    again = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, clock=clock, thread=False)
    await again.astart()
    try:
        coord = again.broker.group_coordinator
        await coord.wait_loaded()
        error, fetched = coord.fetch_offsets("live", None)
        assert error is Errors.NONE
        ((topic, [(part, om)]),) = fetched
        assert (topic, part, om.offset, om.leader_epoch, om.metadata) == (
            OFFSETS_TOPIC,
            0,
            42,
            1,
            "meta",
        )
        assert coord.fetch_offsets("simple", [(OFFSETS_TOPIC, [1])])[1][0][1][0][1].offset == 7
        group = coord.manager.groups["live"]
        assert group.state is GroupState.STABLE and group.generation_id == gen
        # the member of before the restart is still a member: it heartbeats on
        assert await coord.heartbeat("live", gen, member, None) is Errors.NONE
        # ... until its session runs out
        clock.advance(11_000)
        await coord.run_timers()
        assert coord.manager.groups["live"].state is GroupState.EMPTY
        assert await coord.heartbeat("live", gen, member, None) is Errors.UNKNOWN_MEMBER_ID
        # deleting the groups writes tombstones; after another restart they stay deleted
        assert await coord.delete_groups(["live", "simple", "ghost"]) == [
            Errors.NONE,
            Errors.NONE,
            Errors.GROUP_ID_NOT_FOUND,
        ]
    finally:
        await again.astop()

    third = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, clock=clock, thread=False)
    await third.astart()
    try:
        coord = third.broker.group_coordinator
        await coord.wait_loaded()
        assert coord.manager.groups == {}
        assert coord.fetch_offsets("live", None) == (Errors.NONE, [])
    finally:
        await third.astop()


async def test_group_commit_with_fsync(tmp_path: Path) -> None:
    broker = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, thread=False)
    await broker.astart()
    try:
        b = broker.broker
        coord: GroupCoordinator = b.group_coordinator
        await coord.wait_loaded()
        assert coord.coordinator_for("g")[0] is Errors.NONE  # creates __consumer_offsets
        await b.topic_admin.alter_topic_configs(
            OFFSETS_TOPIC, {"flush.messages": "1", "cleanup.policy": "compact"}
        )
        before = coord.fsyncs
        results = await asyncio.gather(
            *(
                coord.commit_offsets("g", -1, "", None, [OffsetCommitEntry(OFFSETS_TOPIC, 0, i)])
                for i in range(50)
            )
        )
        assert all(r == [Errors.NONE] for r in results)
        # 50 concurrent commits of one group: grouped into far fewer appends + fsyncs
        assert 1 <= coord.fsyncs - before < 10
        assert coord.fetch_offsets("g", None)[1][0][1][0][1].offset == 49
        plog = b.partition(OFFSETS_TOPIC, partition_for("g", 4)).log
        assert plog.recovery_point == plog.log_end_offset
    finally:
        await broker.astop()


async def test_load_in_progress_until_replayed() -> None:
    broker = EmbeddedBroker(SETTINGS, thread=False)
    await broker.astart()
    try:
        assert (
            broker.broker.group_coordinator.coordinator_for("g")[0] is Errors.NONE
        )  # creates the topic
        coord = broker.broker.new_group_coordinator()
        await coord.start()
        try:
            assert coord.coordinator_for("g")[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
            assert (await coord.join_group(_join("g"))).error is Errors.COORDINATOR_LOAD_IN_PROGRESS
            assert coord.list_groups()[0] is Errors.COORDINATOR_LOAD_IN_PROGRESS
            await coord.wait_loaded()
            error, node, host, port = coord.coordinator_for("g")
            assert error is Errors.NONE and host == "127.0.0.1" and port == broker.port
            assert node == broker.broker.node_id
        finally:
            await coord.stop()
        assert coord.coordinator_for("g")[0] is Errors.COORDINATOR_NOT_AVAILABLE
    finally:
        await broker.astop()


async def test_parked_join_is_answered_by_the_timer_task() -> None:
    """The first join of an empty group waits group.initial.rebalance.delay.ms (real time here)."""
    broker = EmbeddedBroker({**SETTINGS, "group.initial.rebalance.delay.ms": 50}, thread=False)
    await broker.astart()
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        first = await coord.join_group(_join("g"))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        joined = await asyncio.wait_for(coord.join_group(_join("g", first.member_id)), 5)
        assert joined.error is Errors.NONE and joined.generation_id == 1
        assert loop.time() - t0 >= 0.045
    finally:
        await broker.astop()


def _full_replay(broker: EmbeddedBroker, partitions: int) -> GroupMetadataManager:
    """The persisted state from replaying every record of __consumer_offsets from the start."""
    from odradek.coordinator.records import decode_record
    from odradek.protocol.records import iter_batches

    manager = GroupMetadataManager()
    for p in range(partitions):
        plog = broker.broker.partition(OFFSETS_TOPIC, p).log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = plog.read(offset, 1 << 20).records
            data = data.read() if hasattr(data, "read") else bytes(data)
            for batch in iter_batches(data):
                for rec in batch.records():
                    if rec.offset >= offset:
                        r = decode_record(rec.key, rec.value)
                        if r is not None:
                            manager.replay(r, loading=True)
                offset = batch.last_offset + 1
    return manager


def _persisted_state(manager: GroupMetadataManager) -> dict[str, Any]:
    return {
        gid: (g.persisted, dict(g.offsets), g.generation_id, g.state)
        for gid, g in manager.groups.items()
    }


async def test_snapshots_bound_what_is_replayed_at_start(tmp_path: Path) -> None:
    clock = ManualClock()
    broker = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, clock=clock, thread=False)
    await broker.astart()
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        coord.snapshot_min_records = 100
        member, gen = await _stable_member(coord, "members")
        for i in range(300):
            for group in ("busy", "other"):
                errors = await coord.commit_offsets(
                    group, -1, "", None, [OffsetCommitEntry(OFFSETS_TOPIC, i % 3, i, -1, f"m{i}")]
                )
                assert errors == [Errors.NONE]
            if i == 150:
                assert (
                    coord.maybe_snapshot()
                )  # the partitions of busy and other outgrew their state
        await coord.commit_offsets(
            "members", gen, member, None, [OffsetCommitEntry(OFFSETS_TOPIC, 0, 7)]
        )
        await coord.commit_offsets("gone", -1, "", None, [OffsetCommitEntry(OFFSETS_TOPIC, 0, 1)])
        assert await coord.delete_groups(["gone"]) == [Errors.NONE]
        coord.maybe_snapshot()
        assert coord.snapshots_written >= 2
        live_state = _persisted_state(coord.manager)
        snapshot_offsets = dict(coord._snapshot_offsets)
        assert (tmp_path / "coordinator-snapshot-checkpoint").exists()
    finally:
        await broker.astop()

    again = EmbeddedBroker(SETTINGS, storage="file", data_dir=tmp_path, clock=clock, thread=False)
    await again.astart()
    try:
        coord = again.broker.group_coordinator
        await coord.wait_loaded()
        for p, offset in snapshot_offsets.items():
            assert coord.loaded_from[p] == offset > 0
        # loading from the snapshots == replaying everything == the state before the restart
        assert _persisted_state(coord.manager) == live_state
        assert _persisted_state(_full_replay(again, 4)) == live_state
        om = coord.fetch_offsets("busy", [(OFFSETS_TOPIC, [2])])[1][0][1][0][1]
        assert (om.offset, om.metadata) == (299, "m299")
        assert "gone" not in coord.manager.groups
        assert coord.manager.groups["members"].generation_id == gen
    finally:
        await again.astop()


async def test_offsets_partitions_get_logs_on_first_use(tmp_path: Path) -> None:
    """__consumer_offsets has its 50 partitions in metadata, but only the partitions groups
    wrote to have logs (directories); a restart opens and replays only those."""
    settings = {"offsets.topic.num.partitions": 50, "group.initial.rebalance.delay.ms": 0}
    broker = EmbeddedBroker(settings, storage="file", data_dir=tmp_path, thread=False)
    await broker.astart()
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        assert coord.coordinator_for("g")[0] is Errors.NONE  # creates __consumer_offsets
        assert broker.broker.metadata.topic(OFFSETS_TOPIC).num_partitions == 50
        assert not list(tmp_path.rglob(f"{OFFSETS_TOPIC}-*"))
        broker.broker.create_topic("t", 1)
        entry = [OffsetCommitEntry("t", 0, 5)]
        assert await coord.commit_offsets("g", -1, "", None, entry) == [Errors.NONE]
        dirs = sorted(p.name for p in tmp_path.rglob(f"{OFFSETS_TOPIC}-*"))
        assert dirs == [f"{OFFSETS_TOPIC}-{partition_for('g', 50)}"]
    finally:
        await broker.astop()
    again = EmbeddedBroker(settings, storage="file", data_dir=tmp_path, thread=False)
    await again.astart()
    try:
        coord = again.broker.group_coordinator
        await coord.wait_loaded()
        assert not coord.is_loading
        assert coord.fetch_offsets("g", None)[1][0][1][0][1].offset == 5
        assert len(list(tmp_path.rglob(f"{OFFSETS_TOPIC}-*"))) == 1
        # a group of another partition still works (its log is created now)
        other = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 50) != 0)
        assert await coord.commit_offsets(other, -1, "", None, entry) == [Errors.NONE]
        assert len(list(tmp_path.rglob(f"{OFFSETS_TOPIC}-*"))) == 2
    finally:
        await again.astop()


async def test_offset_metadata_max_bytes_is_a_broker_setting() -> None:
    settings = {**SETTINGS, "offset.metadata.max.bytes": 10}
    broker = EmbeddedBroker(settings, storage="memory", thread=False)
    await broker.astart()
    try:
        coord: GroupCoordinator = broker.broker.group_coordinator
        await coord.wait_loaded()
        broker.broker.create_topic("t", 1)
        assert coord.config.offset_metadata_max_bytes == 10
        ok = [OffsetCommitEntry("t", 0, 1, -1, "x" * 10)]
        too_long = [OffsetCommitEntry("t", 0, 1, -1, "x" * 11)]
        assert await coord.commit_offsets("g", -1, "", None, ok) == [Errors.NONE]
        assert await coord.commit_offsets("g", -1, "", None, too_long) == [
            Errors.OFFSET_METADATA_TOO_LARGE
        ]
    finally:
        await broker.astop()
