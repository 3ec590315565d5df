"""The leader's decisions as pure functions of a ``Partition`` (in-memory log, time passed in):
follower tracking, high watermark, ISR shrink/expand, acks=all, and the follower's truncation
point; then the ``ReplicaManager`` driving them with a local AlterPartitionManager."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.broker.local_metadata_store import LocalMetadataStore
from odradek.broker.metadata_store import PartitionState
from odradek.broker.partition import FollowerState, Partition, caught_up_time
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_fetcher import fetcher_id, truncation_offset
from odradek.broker.replica_manager import (
    LeaderAndIsrPartition,
    ReplicaManager,
    ReplicationConfig,
    StopReplicaPartition,
)
from odradek.clock import ManualClock
from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, LogManager, MemoryLog

LAG_MS = 10_000


def batch(n: int = 1) -> bytes:
    return build_batch([(None, b"v", (), 1_700_000_000_000 + i) for i in range(n)])  # type: ignore[arg-type]


def leader(replicas: list[int], isr: list[int] | None = None, epoch: int = 0) -> Partition:
    plog = MemoryLog("t", 0)
    p = Partition("t", 0, plog, LogConfig(), PartitionState(0, -1, -1), node_id=1)
    state = PartitionState(0, 1, epoch, list(replicas), list(isr or replicas))
    p.make_leader(state, now_ms=0)
    return p


def append(p: Partition, n: int = 1) -> None:
    p.log.append(batch(n), p.leader_epoch)
    p.maybe_increment_high_watermark()


# -- follower tracking -------------------------------------------------------------------------


def test_caught_up_time_follows_kafka() -> None:
    s = FollowerState(log_end_offset=0, last_caught_up_ms=5)
    assert caught_up_time(s, fetch_offset=10, leader_leo=10, now_ms=100) == 100  # at the end
    s = FollowerState(10, 5, last_fetch_leader_leo=10, last_fetch_ms=50)
    # behind now, but it reached where the leader was at its previous fetch
    assert caught_up_time(s, fetch_offset=10, leader_leo=12, now_ms=100) == 50
    assert caught_up_time(s, fetch_offset=9, leader_leo=12, now_ms=100) == 5


def test_high_watermark_is_the_minimum_over_the_isr_and_never_moves_back() -> None:
    p = leader([1, 2, 3])
    append(p, 5)
    assert p.high_watermark == 0  # followers' log ends unknown
    p.update_follower_fetch(2, 5, now_ms=1)
    assert not p.maybe_increment_high_watermark()
    p.update_follower_fetch(3, 3, now_ms=1)
    assert p.maybe_increment_high_watermark() and p.high_watermark == 3
    p.update_follower_fetch(3, 1, now_ms=2)  # a follower that went back (truncated)
    assert not p.maybe_increment_high_watermark() and p.high_watermark == 3
    # a replica outside the ISR does not hold the HW back
    q = leader([1, 2, 3], isr=[1, 2])
    append(q, 4)
    q.update_follower_fetch(2, 4, now_ms=1)
    assert q.maybe_increment_high_watermark() and q.high_watermark == 4


def test_a_pending_expansion_counts_at_once_a_shrink_only_when_committed() -> None:
    p = leader([1, 2, 3], isr=[1, 2])
    append(p, 4)
    p.update_follower_fetch(2, 4, now_ms=1)
    p.update_follower_fetch(3, 2, now_ms=1)
    p.pending_isr = [1, 2, 3]  # expansion in flight: 3 already counts
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 2
    assert p.apply_isr_update(PartitionState(0, 1, 0, [1, 2, 3], [1, 2, 3], version=1))
    assert p.isr == [1, 2, 3] and p.state.version == 1 and p.pending_isr is None
    # a shrink in flight: the HW still waits for the member being removed
    p.pending_isr = [1, 2]
    append(p, 1)
    p.update_follower_fetch(2, 5, now_ms=2)
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 2
    assert p.apply_isr_update(PartitionState(0, 1, 0, [1, 2, 3], [1, 2], version=2))
    assert p.maybe_increment_high_watermark() and p.high_watermark == 5


def test_isr_update_for_another_epoch_or_older_version_is_ignored() -> None:
    p = leader([1, 2], epoch=3)
    p.state.version = 4
    assert not p.apply_isr_update(PartitionState(0, 1, 2, [1, 2], [1], version=5))
    assert not p.apply_isr_update(PartitionState(0, 1, 3, [1, 2], [1], version=3))
    assert p.isr == [1, 2]


def test_shrink_after_lag_time_never_the_leader() -> None:
    p = leader([1, 2, 3])
    append(p, 3)
    p.update_follower_fetch(2, 3, now_ms=1000)  # caught up
    p.update_follower_fetch(3, 1, now_ms=1000)  # behind since the start (caught up at 0)
    assert p.isr_shrink(now_ms=LAG_MS, lag_time_max_ms=LAG_MS) is None
    assert p.isr_shrink(now_ms=LAG_MS + 1, lag_time_max_ms=LAG_MS) == [1, 2]
    # a follower at the leader's end is never out of sync, however old its catch-up time
    q = leader([1, 2])
    q.update_follower_fetch(2, 0, now_ms=0)
    assert q.isr_shrink(now_ms=10 * LAG_MS, lag_time_max_ms=LAG_MS) is None
    # an ISR of the leader alone stays
    r = leader([1, 2], isr=[1])
    assert r.isr_shrink(now_ms=10 * LAG_MS, lag_time_max_ms=LAG_MS) is None


def test_expand_when_caught_up_to_the_hw_and_the_epoch_start() -> None:
    p = leader([1, 2], isr=[1])
    append(p, 4)
    assert p.high_watermark == 4
    p.update_follower_fetch(2, 3, now_ms=1)
    assert p.isr_expansion(2) is None
    p.update_follower_fetch(2, 4, now_ms=2)
    assert p.isr_expansion(2) == [1, 2]
    p.pending_isr = [1, 2]
    assert p.isr_expansion(2) is None  # one change in flight
    # the epoch start: a follower below where this leader's epoch began is not in sync
    q = leader([1, 2], isr=[1])
    append(q, 2)
    q.make_leader(PartitionState(0, 1, 1, [1, 2], [1]), now_ms=5)
    assert q.leader_epoch_start_offset == 2
    q.log.update_high_watermark(0)
    q.update_follower_fetch(2, 1, now_ms=6)
    assert q.isr_expansion(2) is None


def test_acks_all_decisions() -> None:
    p = leader([1, 2, 3])
    assert p.check_enough_replicas(3) is ErrorCode.none
    assert p.check_enough_replicas(4) is ErrorCode.not_enough_replicas
    append(p, 2)
    assert p.acks_all_status(2, 2) is None  # HW below the batch end
    for r in (2, 3):
        p.update_follower_fetch(r, 2, now_ms=1)
    p.maybe_increment_high_watermark()
    assert p.acks_all_status(2, 2) is ErrorCode.none
    p.apply_isr_update(PartitionState(0, 1, 0, [1, 2, 3], [1], version=1))
    assert p.acks_all_status(2, 2) is ErrorCode.not_enough_replicas_after_append
    p.make_follower(PartitionState(0, 2, 1, [1, 2, 3], [2, 3]))
    assert p.acks_all_status(2, 2) is ErrorCode.not_leader_or_follower


# -- properties --------------------------------------------------------------------------------

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.integers(0, 40)),
        st.tuples(st.just("tick"), st.integers(0, 2 * LAG_MS)),
        st.tuples(st.just("shrink")),
        st.tuples(st.just("expand"), st.sampled_from([2, 3])),
        st.tuples(st.just("commit")),
        st.tuples(st.just("refuse")),
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(_ops)
def test_hw_never_moves_back_and_the_isr_is_never_empty(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    p = leader([1, 2, 3])
    now = 0
    hw = p.high_watermark
    version = 0
    for op in ops:
        kind = op[0]
        if kind == "append":
            append(p, op[1])
        elif kind == "fetch":
            p.update_follower_fetch(op[1], min(op[2], p.log.log_end_offset), now)
            p.maybe_increment_high_watermark()
        elif kind == "tick":
            now += op[1]
        elif kind == "shrink" and p.pending_isr is None:
            p.pending_isr = p.isr_shrink(now, LAG_MS)
        elif kind == "expand" and p.pending_isr is None:
            p.pending_isr = p.isr_expansion(op[1])
            p.maybe_increment_high_watermark()
        elif kind == "commit" and p.pending_isr is not None:
            version += 1
            p.apply_isr_update(
                PartitionState(0, 1, 0, [1, 2, 3], list(p.pending_isr), version=version)
            )
            p.maybe_increment_high_watermark()
        elif kind == "refuse":
            p.pending_isr = None
        assert p.high_watermark >= hw, "the high watermark moved back"
        if p.high_watermark > hw:  # when it moves, it passes no member's known log end
            for r in p.maximal_isr():
                if r != 1:
                    assert p.high_watermark <= p.followers[r].log_end_offset
        hw = p.high_watermark
        assert p.isr and 1 in p.isr, "the ISR lost its leader"
        assert hw <= p.log.log_end_offset


# -- the follower's truncation point (KIP-101/279) ---------------------------------------------


def epoch_log(*epochs: tuple[int, int]) -> MemoryLog:
    """A log with ``count`` one-record batches per (epoch, count)."""
    plog = MemoryLog("t", 0)
    for epoch, count in epochs:
        for _ in range(count):
            plog.append(batch(), epoch)
    return plog


def test_truncation_offset() -> None:
    plog = epoch_log((0, 3), (2, 2))  # epoch 0: 0-2, epoch 2: 3-4
    plog.update_high_watermark(2)
    assert truncation_offset(plog, 2, 4) == (4, True)  # the leader's epoch 2 ended earlier
    assert truncation_offset(plog, 2, 9) == (5, True)  # never past our own end
    assert truncation_offset(plog, 0, 3) == (3, True)
    # the leader answers epoch 1, which we never saw: cut to our end of epoch 0, ask again
    assert truncation_offset(plog, 1, 4) == (3, False)
    assert truncation_offset(plog, -1, -1) == (2, True)  # no such epoch there: our HW
    # every epoch we hold is newer than the leader's answer: nothing of ours is the leader's
    newer = epoch_log((1, 2))
    assert truncation_offset(newer, 0, 1) == (0, True)


# -- the replica manager with a local AlterPartitionManager ------------------------------------


class LocalAlterPartition:
    """Commits every ISR change at once (what the controller would write)."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.version = 0

    async def submit(
        self,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        new_isr: list[int],
        partition_epoch: int,
    ) -> PartitionState | ErrorCode:
        if partition_epoch != self.version:
            return ErrorCode.invalid_update_version
        self.calls.append(list(new_isr))
        self.version += 1
        return PartitionState(
            partition, 1, leader_epoch, [1, 2, 3], list(new_isr), version=self.version
        )


def in_memory_replica_manager(
    metadata: LocalMetadataStore,
    clock: ManualClock,
    alter_partition_manager: LocalAlterPartition | None,
    replication: ReplicationConfig | None = None,
) -> ReplicaManager:
    """A ReplicaManager on in-memory logs and ``clock``; with an ``alter_partition_manager``
    in cluster mode (partitions wait for the controller's LeaderAndIsr)."""
    return ReplicaManager(
        metadata,
        LogManager(None, in_memory=True, clock=clock),
        LogConfig(),
        Purgatory(),
        None,
        clock=clock,
        replication=replication,
        alter_partition_manager=alter_partition_manager,
    )


async def test_replica_manager_shrinks_and_expands_through_the_manager() -> None:
    clock = ManualClock()
    metadata = LocalMetadataStore(1, None)
    alter = LocalAlterPartition()
    rm = in_memory_replica_manager(
        metadata,
        clock,
        alter,
        ReplicationConfig(replica_lag_time_max_ms=LAG_MS, min_insync_replicas=2),
    )
    seen: list[tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]] = []
    rm.add_leadership_listener(lambda led, followed: seen.append((led, followed)))
    moved: list[tuple[str, int, int]] = []
    rm.add_high_watermark_listener(lambda t, p, hw: moved.append((t, p, hw)))
    try:
        state = LeaderAndIsrPartition(
            "t", 0, leader=1, leader_epoch=0, isr=[1, 2, 3], partition_epoch=0, replicas=[1, 2, 3]
        )
        assert rm.become_leader_or_follower(0, 1, [state], []) == {("t", 0): ErrorCode.none}
        assert seen == [([("t", 0, 0)], [])]
        # the same epoch again is stale; an older controller epoch refuses everything
        assert rm.become_leader_or_follower(0, 1, [state], []) == {
            ("t", 0): ErrorCode.stale_controller_epoch
        }
        assert rm.is_stale_controller_epoch(0)
        elsewhere = LeaderAndIsrPartition(
            "u", 0, leader=2, leader_epoch=0, isr=[2], partition_epoch=0, replicas=[2, 3]
        )
        assert rm.become_leader_or_follower(0, 1, [elsewhere], []) == {
            ("u", 0): ErrorCode.unknown_topic_or_partition
        }
        handle, code = rm.leader_partition("t", 0)
        assert handle is not None and code is ErrorCode.none
        handle.log.append(batch(3), 0)
        rm.record_follower_fetch(handle, 2, 3)
        rm.record_follower_fetch(handle, 3, 1)
        clock.advance(LAG_MS + 1)
        rm.maybe_shrink_isr()
        await _settle(rm)
        assert alter.calls == [[1, 2]] and handle.isr == [1, 2]
        assert (rm.isr_shrinks, rm.isr_expands) == (1, 0)  # IsrShrinksPerSec
        assert handle.high_watermark == 3  # 3 left the ISR: the HW follows 1 and 2
        assert moved == [("t", 0, 1), ("t", 0, 3)]
        # acks=all with |ISR| = 2 = min.insync.replicas: answered once the HW passes it
        handle.log.append(batch(1), 0)
        waiter = asyncio.ensure_future(rm.wait_for_acks(handle, 4, 2, timeout_s=5))
        await asyncio.sleep(0)
        assert not waiter.done()
        rm.record_follower_fetch(handle, 2, 4)
        assert await waiter is ErrorCode.none
        # broker 3 catches up and rejoins
        rm.record_follower_fetch(handle, 3, 4)
        await _settle(rm)
        assert alter.calls[-1] == [1, 2, 3] and handle.isr == [1, 2, 3]
        assert (rm.isr_shrinks, rm.isr_expands) == (1, 1)  # IsrExpandsPerSec
        # a timed-out acks=all
        handle.log.append(batch(1), 0)
        assert await rm.wait_for_acks(handle, 5, 2, timeout_s=0.01) is ErrorCode.request_timed_out
        # StopReplica: the listeners learn the partition is no longer led here
        from types import SimpleNamespace

        stop = SimpleNamespace(
            topic_name="t", partition_index=0, leader_epoch=0, delete_partition=False
        )
        assert rm.stop_replicas(0, 1, [stop]) == {("t", 0): ErrorCode.none}
        assert seen[-1] == ([], [("t", 0, 0)])
    finally:
        await rm.close()


async def _settle(rm: ReplicaManager) -> None:
    """Let the AlterPartition tasks finish (they complete without I/O)."""
    for _ in range(10):
        await asyncio.sleep(0)


# -- property: a diverged follower ends as a prefix of its leader (KIP-101/279) ----------------

_terms = st.lists(
    st.tuples(st.sampled_from(["F", "L", "both"]), st.integers(0, 3)), min_size=1, max_size=8
)


@settings(max_examples=100, deadline=None)
@given(_terms)
def test_truncation_loop_leaves_the_follower_a_prefix_of_the_leader(
    terms: list[tuple[str, int]],
) -> None:
    """Epochs 0, 1, 2, ... each led by one replica; "both" terms were replicated to both (the
    common, committed history, which must come first), "F"/"L" terms only the replica that led
    them wrote. The follower asks the leader for its latest epoch's end, truncates, repeats;
    it must end as a prefix of the leader's log and keep all of the common history."""
    terms = sorted(terms, key=lambda t: t[0] != "both")  # the common history first
    follower, leader_log = MemoryLog("t", 0), MemoryLog("t", 0)
    common = 0
    for epoch, (who, count) in enumerate(terms):
        for plog, mine in ((follower, who in ("F", "both")), (leader_log, who in ("L", "both"))):
            if not mine:
                continue
            plog.assign_leader_epoch(epoch)
            for _ in range(count):
                plog.append(batch(), epoch)
        if who == "both":
            common += count
    follower.update_high_watermark(common)
    for _ in range(len(terms) + 2):
        entries = follower.leader_epoch_entries()
        if not entries:
            follower.truncate_to(follower.high_watermark)
            break
        asked = entries[-1][0]
        epoch, end = leader_log.end_offset_for_epoch(asked)
        target, done = truncation_offset(follower, epoch, end)
        follower.truncate_to(target)
        now = follower.leader_epoch_entries()
        if done or not now or now[-1][0] >= asked:
            break
    else:
        raise AssertionError("the truncation loop did not end")

    def layout(plog: MemoryLog) -> list[tuple[int, int]]:
        from odradek.protocol.records import iter_batches

        data = plog.read(0, 1 << 30).records
        return [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(bytes(data))]

    mine, theirs = layout(follower), layout(leader_log)
    assert mine == theirs[: len(mine)], (terms, mine, theirs)
    assert follower.log_end_offset >= common


async def test_cluster_mode_partitions_wait_for_their_leader_and_isr() -> None:
    """With an AlterPartitionManager (cluster mode) a partition opened from the metadata image
    neither leads nor follows until the controller's LeaderAndIsr, whatever the image says."""
    clock = ManualClock()
    metadata = LocalMetadataStore(1, None)
    await metadata.create_topic("m", {0: [1]})
    rm = in_memory_replica_manager(metadata, clock, LocalAlterPartition())
    try:
        handle, code = rm.leader_partition("m", 0)
        assert handle is not None and code is ErrorCode.not_leader_or_follower
        handle.log.append(batch(2), 0)
        assert handle.high_watermark == 0  # not following its log end
        state = LeaderAndIsrPartition(
            "m", 0, leader=1, leader_epoch=0, isr=[1], partition_epoch=0, replicas=[1]
        )
        assert rm.become_leader_or_follower(0, 1, [state], []) == {("m", 0): ErrorCode.none}
        assert rm.leader_partition("m", 0)[1] is ErrorCode.none
        assert handle.high_watermark == 2
    finally:
        await rm.close()
    # alone (no AlterPartitionManager) the image's leadership applies at once, as before
    alone = ReplicaManager(
        metadata, LogManager(None, in_memory=True), LogConfig(), Purgatory(), None
    )
    assert alone.leader_partition("m", 0)[1] is ErrorCode.none


class _Leader:
    def __init__(self, broker_id: int, port: int) -> None:
        self.broker_id, self.host_name, self.port = broker_id, "127.0.0.1", port


async def test_fetchers_one_per_leader_and_partitions_follow_a_moved_leader() -> None:
    clock = ManualClock()
    rm = in_memory_replica_manager(
        LocalMetadataStore(1, None), clock, None, ReplicationConfig(replica_fetch_backoff_ms=10)
    )

    def follow(topic: str, port: int, epoch: int = 0) -> None:
        state = LeaderAndIsrPartition(
            topic, 0, leader=2, leader_epoch=epoch, isr=[1, 2], partition_epoch=0, replicas=[1, 2]
        )
        assert rm.become_leader_or_follower(0, 1, [state], [_Leader(2, port)]) == {
            (topic, 0): ErrorCode.none
        }

    try:
        follow("a", 1)
        follow("b", 1)
        assert list(rm.fetchers()) == [(2, 0)] and rm.fetchers()[(2, 0)].partition_count() == 2
        follow("c", 2)  # broker 2 came back on another port: every partition moves with it
        fetcher = rm.fetchers()[(2, 0)]
        assert fetcher.address == ("127.0.0.1", 2)
        assert sorted(p.topic for p in fetcher.partitions()) == ["a", "b", "c"]
        # leading a partition, or StopReplica, takes it out of the fetcher
        lead = LeaderAndIsrPartition(
            "a", 0, leader=1, leader_epoch=1, isr=[1, 2], partition_epoch=1, replicas=[1, 2]
        )
        rm.become_leader_or_follower(0, 1, [lead], [])
        rm.stop_replicas(0, 1, [StopReplicaPartition("b", 0, 0, False)])
        assert [p.topic for p in fetcher.partitions()] == ["c"]
        rm.stop_replicas(0, 1, [StopReplicaPartition("c", 0, -2, True)])
        assert rm.fetchers() == {}  # an idle fetcher stops
    finally:
        await rm.close()


def test_fetcher_id_is_kafkas_get_fetcher_id() -> None:
    """Utils.abs(31 * topic.hashCode() + partition) % n, values from Java (jshell); the
    "__consumer_offsets" sum is negative in int32."""
    expected = {
        ("foo", 0): (0, 0, 5),
        ("foo", 3): (1, 0, 1),
        ("__consumer_offsets", 0): (1, 2, 6),
        ("__consumer_offsets", 1): (0, 1, 5),
        ("r-0a1b2c3d", 2): (1, 2, 3),
        ("\u00fcn\u00efcode-topic", 1): (1, 1, 3),
        ("a", 3): (0, 1, 0),
    }
    for (topic, p), ids in expected.items():
        assert tuple(fetcher_id(topic, p, n) for n in (2, 3, 7)) == ids, (topic, p)
        assert fetcher_id(topic, p, 1) == 0


async def test_num_replica_fetchers_spreads_a_leaders_partitions() -> None:
    clock = ManualClock()
    rm = ReplicaManager(
        LocalMetadataStore(1, None),
        LogManager(None, in_memory=True, clock=clock),
        LogConfig(),
        Purgatory(),
        None,
        clock=clock,
        replication=ReplicationConfig(replica_fetch_backoff_ms=10, num_replica_fetchers=2),
    )
    states = [
        LeaderAndIsrPartition(
            "t", p, leader=2, leader_epoch=0, isr=[1, 2], partition_epoch=0, replicas=[1, 2]
        )
        for p in range(4)
    ]
    try:
        assert set(rm.become_leader_or_follower(0, 1, states, [_Leader(2, 1)]).values()) == {
            ErrorCode.none
        }
        fetchers = rm.fetchers()
        assert sorted(fetchers) == [(2, 0), (2, 1)]
        for (_leader, fid), fetcher in fetchers.items():
            assert fetcher.client_id == f"broker-1-fetcher-{fid}"
            held = sorted(p.partition for p in fetcher.partitions())
            assert held == [p for p in range(4) if fetcher_id("t", p, 2) == fid] and held
        # the leader moves to another port: every partition follows, to the same fetcher ids
        moved = LeaderAndIsrPartition(
            "t", 0, leader=2, leader_epoch=1, isr=[1, 2], partition_epoch=1, replicas=[1, 2]
        )
        rm.become_leader_or_follower(0, 1, [moved], [_Leader(2, 2)])
        assert sorted(rm.fetchers()) == [(2, 0), (2, 1)]
        assert all(f.address == ("127.0.0.1", 2) for f in rm.fetchers().values())
        assert sum(f.partition_count() for f in rm.fetchers().values()) == 4
    finally:
        await rm.close()
