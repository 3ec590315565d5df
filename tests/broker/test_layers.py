"""The broker's seams: response ordering without sockets, the one leadership and epoch check
(Partition / ReplicaManager) through every API that uses it, OffsetsForLeaderEpoch, and
Metadata / DescribeCluster answered from the MetadataStore."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.broker.config import BrokerConfig
from odradek.broker.connection import CLOSE, ResponseQueue
from odradek.broker.metadata_store import BrokerInfo, PartitionState
from odradek.broker.partition import Partition
from odradek.broker.server import Broker
from odradek.clock import ManualClock
from odradek.protocol.records import build_batch
from odradek.storage import LogConfig, MemoryLog

from .wire import Wire, create, fetch_request, produce_request, req

pytestmark = pytest.mark.timeout(60)

NONE, NOT_LEADER, LEADER_NOT_AVAILABLE, FENCED, UNKNOWN_EPOCH = 0, 6, 5, 74, 75


# -- response ordering (sans I/O, as h11 tests its state machine) -----------------------------


def test_responses_go_out_at_once_when_nothing_is_pending() -> None:
    q = ResponseQueue()
    out: list[Any] = []
    assert q.add([b"a"], out) is False
    assert q.add(None, out) is False  # acks=0: no response
    assert q.add([b"b", b"c"], out) is False
    assert out == [b"a", b"b", b"c"] and len(q) == 0


def test_a_suspended_response_holds_back_later_ones_until_filled() -> None:
    q = ResponseQueue()
    out: list[Any] = []
    q.add([b"1"], out)
    slot = q.reserve()
    q.add([b"3"], out)
    later = q.reserve()
    q.add([b"5"], out)
    assert out == [b"1"] and len(q) == 4
    out.clear()
    assert q.fill(later, [b"4"], out) is False
    assert out == []  # still behind the first slot
    assert q.fill(slot, [b"2"], out) is False
    assert out == [b"2", b"3", b"4", b"5"] and len(q) == 0


def test_close_is_released_in_order() -> None:
    q = ResponseQueue()
    out: list[Any] = []
    assert q.add(CLOSE, out) is True  # nothing pending: close now
    slot = q.reserve()
    assert q.add(CLOSE, out) is False  # queued behind the slot
    assert q.fill(slot, [b"x"], out) is True
    assert out == [b"x"]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10)), max_size=30), st.randoms())
def test_any_interleaving_answers_in_request_order(plan: list[tuple[bool, int]], rnd: Any) -> None:
    """Requests answered at once or later, in any completion order: the bytes written are the
    responses in request order, and nothing is written past an unfilled slot."""
    q = ResponseQueue()
    written: list[Any] = []
    slots: list[tuple[Any, int]] = []
    for i, (suspended, _) in enumerate(plan):
        if suspended:
            slots.append((q.reserve(), i))
        else:
            q.add([i], written)
    rnd.shuffle(slots)
    for slot, i in slots:
        q.fill(slot, [i], written)
        assert written == list(range(len(written)))
    assert written == list(range(len(plan))) and len(q) == 0


# -- the leadership and epoch check -------------------------------------------------------------


def _partition(leader: int = 1, epoch: int = 5) -> Partition:
    log = MemoryLog("t", 0, LogConfig(), ManualClock())
    return Partition("t", 0, log, LogConfig(), PartitionState(0, leader, epoch, [1], [1]), 1)


def test_check_leader_epoch_follows_kip_320() -> None:
    p = _partition()
    assert p.is_leader
    assert p.check_leader_epoch(-1) == NONE  # no check
    assert p.check_leader_epoch(5) == NONE
    assert p.check_leader_epoch(4) == FENCED  # the client is behind
    assert p.check_leader_epoch(6) == UNKNOWN_EPOCH  # the broker is behind
    follower = _partition(leader=2)
    assert not follower.is_leader
    assert follower.check_leader_epoch(-1) == NOT_LEADER
    assert follower.check_leader_epoch(5) == NOT_LEADER


def _config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "storage.engine": "memory",
        }
    )


def _epoch_request(topic: str, epoch: int, current: int = -1, version: int = 4) -> Any:
    p = req(
        23,
        version,
        "OffsetForLeaderPartition",
        partition=0,
        current_leader_epoch=current,
        leader_epoch=epoch,
    )
    t = req(23, version, "OffsetForLeaderTopic", topic=topic, partitions=(p,))
    return req(23, version, replica_id=-1, topics=(t,))


def _list_offsets_request(topic: str, current: int) -> Any:
    p = req(
        2, 7, "ListOffsetsPartition", partition_index=0, current_leader_epoch=current, timestamp=-1
    )
    t = req(2, 7, "ListOffsetsTopic", name=topic, partitions=(p,))
    return req(2, 7, replica_id=-1, isolation_level=0, topics=(t,))


def _fetch_with_epoch(topic: str, current: int) -> Any:
    r = fetch_request(topic, {0: 0})
    part = dataclasses.replace(r.topics[0].partitions[0], current_leader_epoch=current)
    return dataclasses.replace(r, topics=(dataclasses.replace(r.topics[0], partitions=(part,)),))


async def test_produce_fetch_list_offsets_and_epochs_share_one_check(tmp_path: Path) -> None:
    async with Broker(_config(tmp_path)) as broker:
        addr = f"127.0.0.1:{broker.bound_port}"

        def setup() -> tuple[int, int, int, int]:
            with Wire(addr) as w:
                create(w, "lead")
                r = w.call(produce_request("lead", 0, build_batch([(None, b"x", (), None)] * 3)))
                produced = int(r.responses[0].partition_responses[0].error_code)
                e = w.call(_epoch_request("lead", 0)).topics[0].partitions[0]
                unknown = w.call(_epoch_request("nope", 0)).topics[0].partitions[0]
                return produced, int(e.leader_epoch), int(e.end_offset), int(unknown.error_code)

        assert await asyncio.to_thread(setup) == (NONE, 0, 3, 3)

        # a new leader epoch (as a controller would give): older requests are fenced
        state = broker.metadata.partition("lead", 0)
        assert state is not None
        state.leader_epoch = 2

        def epochs() -> list[int]:
            with Wire(addr) as w:
                return [
                    int(w.call(_fetch_with_epoch("lead", 1)).responses[0].partitions[0].error_code),
                    int(w.call(_fetch_with_epoch("lead", 3)).responses[0].partitions[0].error_code),
                    int(w.call(_fetch_with_epoch("lead", 2)).responses[0].partitions[0].error_code),
                    int(
                        w.call(_list_offsets_request("lead", 1)).topics[0].partitions[0].error_code
                    ),
                    int(
                        w.call(_list_offsets_request("lead", 3)).topics[0].partitions[0].error_code
                    ),
                    int(w.call(_epoch_request("lead", 0, 1)).topics[0].partitions[0].error_code),
                    int(w.call(_epoch_request("lead", 0, 3)).topics[0].partitions[0].error_code),
                ]

        assert await asyncio.to_thread(epochs) == [
            FENCED,
            UNKNOWN_EPOCH,
            NONE,
            FENCED,
            UNKNOWN_EPOCH,
            FENCED,
            UNKNOWN_EPOCH,
        ]

        # leadership moves to broker 7, which is not live: every API refuses, Metadata says
        # LEADER_NOT_AVAILABLE with leader -1
        state.leader = 7

        def moved() -> tuple[list[int], tuple[int, int, int, tuple[int, ...]]]:
            with Wire(addr) as w:
                codes = [
                    int(
                        w.call(produce_request("lead", 0, build_batch([(None, b"y", (), None)])))
                        .responses[0]
                        .partition_responses[0]
                        .error_code
                    ),
                    int(
                        w.call(_fetch_with_epoch("lead", -1)).responses[0].partitions[0].error_code
                    ),
                    int(
                        w.call(_list_offsets_request("lead", -1)).topics[0].partitions[0].error_code
                    ),
                    int(w.call(_epoch_request("lead", 0)).topics[0].partitions[0].error_code),
                ]
                t = req(3, 12, "MetadataRequestTopic", name="lead", topic_id=None)
                m = w.call(
                    req(
                        3,
                        12,
                        topics=(t,),
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )
                p = m.topics[0].partitions[0]
                return codes, (
                    int(p.error_code),
                    int(p.leader_id),
                    int(m.controller_id),
                    tuple(int(r) for r in p.offline_replicas),
                )

        codes, meta = await asyncio.to_thread(moved)
        assert codes == [NOT_LEADER] * 4
        assert meta == (LEADER_NOT_AVAILABLE, -1, broker.node_id, ())
        assert broker.partition("lead", 0) is not None
        assert broker.partition("lead", 0).log.log_end_offset == 3  # nothing appended


async def test_metadata_and_describe_cluster_list_every_live_broker(tmp_path: Path) -> None:
    async with Broker(_config(tmp_path)) as broker:
        await broker.metadata.register_broker(BrokerInfo(42, "10.0.0.42", 9093, rack="r2"))

        def ask() -> tuple[list[tuple[int, str, int, str | None]], list[int], int]:
            with Wire(f"127.0.0.1:{broker.bound_port}") as w:
                m = w.call(
                    req(
                        3,
                        12,
                        topics=(),
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )
                d = w.call(req(60, 0, include_cluster_authorized_operations=False))
                return (
                    [(int(b.node_id), b.host, int(b.port), b.rack) for b in m.brokers],
                    [int(b.broker_id) for b in d.brokers],
                    int(d.controller_id),
                )

        brokers, described, controller = await asyncio.to_thread(ask)
        assert brokers == [
            (broker.node_id, "127.0.0.1", broker.bound_port, None),
            (42, "10.0.0.42", 9093, "r2"),
        ]
        assert described == [broker.node_id, 42] and controller == broker.node_id


# -- topic admin and producer ids ------------------------------------------------------------


def test_assign_replicas_is_round_robin_over_live_brokers() -> None:
    from odradek.broker.metadata_store import InvalidPartitionsError
    from odradek.broker.topic_admin import assign_replicas

    assert assign_replicas([0], 0, 3) == {0: [0], 1: [0], 2: [0]}
    assert assign_replicas([3, 1, 2], 2, 3, 2) == {2: [3, 1], 3: [1, 2], 4: [2, 3]}
    with pytest.raises(InvalidPartitionsError):
        assign_replicas([1], 0, 1, 2)


async def test_producer_ids_come_in_blocks_that_survive_a_restart(tmp_path: Path) -> None:
    from odradek.broker.local_metadata_store import LocalMetadataStore
    from odradek.broker.producer_ids import BLOCK_SIZE, ProducerIdManager

    ids = ProducerIdManager(LocalMetadataStore(0, tmp_path))
    assert [await ids.allocate() for _ in range(3)] == [0, 1, 2]
    again = ProducerIdManager(LocalMetadataStore(0, tmp_path))
    assert await again.allocate() == BLOCK_SIZE  # never an id handed out before
