"""KIP-392 as pure decisions of a ``Partition`` (in-memory log, time passed in): the leader's
preferred read replica with the rack-aware selector, and a follower serving a consumer's
Fetch v11+ up to its high watermark while refusing one before v11."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from odradek.broker.metadata_store import PartitionState
from odradek.broker.partition import Partition
from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, MemoryLog

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}


def batch(n: int) -> bytes:
    return build_batch([(None, b"v", (), 1_700_000_000_000 + i) for i in range(n)])


def partition(leader: int, isr: list[int], node_id: int = 1) -> Partition:
    p = Partition(
        "t", 0, MemoryLog("t", 0), LogConfig(), PartitionState(0, -1, -1), node_id=node_id
    )
    state = PartitionState(0, leader, 0, [1, 2, 3, 4], isr)
    if leader == node_id:
        p.make_leader(state, now_ms=0)
    else:
        p.make_follower(state)
    p.log.append(batch(4), 0)
    p.log.append(batch(6), 0)
    return p


def test_the_most_caught_up_in_sync_replica_in_the_clients_rack() -> None:
    p = partition(1, [1, 2, 3, 4])
    p.update_follower_fetch(2, 6, now_ms=100)
    p.update_follower_fetch(3, 8, now_ms=100)
    p.update_follower_fetch(4, 10, now_ms=100)
    pick = p.preferred_read_replica
    assert pick(5, "b", RACKS.get, 200) == 3  # largest log end in rack b
    assert pick(9, "b", RACKS.get, 200) == -1  # neither has reached the fetch offset
    assert pick(5, "a", RACKS.get, 200) == -1  # the leader's own rack: read here
    assert pick(5, "c", RACKS.get, 200) == 4
    assert pick(5, "d", RACKS.get, 200) == -1  # nobody in that rack
    assert pick(5, "c", {**RACKS, 4: None}.get, 200) == -1  # broker 4 is not live
    p.state.isr = [1, 2]
    assert pick(5, "b", RACKS.get, 200) == 2  # 3 left the ISR
    assert pick(5, "c", RACKS.get, 200) == -1


def test_the_leader_answers_the_preferred_replica_without_records() -> None:
    p = partition(1, [1, 2, 3, 4])
    for r in (2, 3, 4):
        p.update_follower_fetch(r, 10, now_ms=100)
    p.maybe_increment_high_watermark()
    assert p.log.high_watermark == 10
    got = p.fetch_records(
        0, 1 << 20, True, follower=False, read_committed=False,
        client_rack="c", rack_of=RACKS.get, now_ms=200,
    )  # fmt: skip
    assert (got.error, got.preferred_read_replica, got.records, got.high_watermark) == (
        ErrorCode.none,
        4,
        None,
        10,
    )
    # without the selector (rack_of None) or before v11 (client_rack None): the records
    for rack, rack_of in (("c", None), (None, RACKS.get)):
        got = p.fetch_records(
            0, 1 << 20, True, follower=False, read_committed=False,
            client_rack=rack, rack_of=rack_of, now_ms=200,
        )  # fmt: skip
        assert got.preferred_read_replica == -1 and got.records is not None


def test_a_follower_serves_consumers_from_fetch_v11_up_to_its_high_watermark() -> None:
    p = partition(1, [1, 2, 3, 4], node_id=2)
    p.log.update_high_watermark(4)
    before_v11 = p.fetch_records(0, 1 << 20, True, follower=False, read_committed=False)
    assert before_v11.error == ErrorCode.not_leader_or_follower
    got = p.fetch_records(0, 1 << 20, True, follower=False, read_committed=False, client_rack="")
    assert got.error == ErrorCode.none and got.high_watermark == 4
    assert got.records is not None and len(got.records) == len(batch(4))  # below the HW only
    # a stale or future leader epoch is still checked
    stale = p.fetch_records(
        0, 1 << 20, True, follower=False, read_committed=False, client_rack="",
        current_leader_epoch=1,
    )  # fmt: skip
    assert stale.error == ErrorCode.unknown_leader_epoch
