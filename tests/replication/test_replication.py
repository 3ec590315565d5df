"""Replication between real broker processes (broker.id 1..3, no ZooKeeper), driven by the
LeaderAndIsr / StopReplica frames a controller would send, then Produce / Fetch frames.

Waiting is done by the brokers: an acks=all Produce returns only once every ISR follower has
fetched past the batch, so its answer proves the followers hold the data; a follower's log
is read back by making it the leader."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from broker.wire import Wire, fetch_request, fetched_values, produce_request, req
from odradek.testing.process import BrokerProcess

from .controller import (
    EARLIEST,
    FENCED_LEADER_EPOCH,
    LATEST,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    REQUEST_TIMED_OUT,
    STALE_CONTROLLER_EPOCH,
    Controller,
    batch,
    brokers,
    fetch,
    list_offsets,
    produce,
    read,
    values,
)

pytestmark = pytest.mark.timeout(120)

SETTINGS = {"min.insync.replicas": 2, "replica.fetch.backoff.ms": 100}


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[int, BrokerProcess]]:
    with brokers(3, SETTINGS) as procs:
        yield procs


@pytest.fixture(scope="module")
def controller(cluster: dict[int, BrokerProcess]) -> Controller:
    """One controller for the module: the brokers remember the newest controller epoch."""
    return Controller(cluster)


def topic_name() -> str:
    return f"r-{uuid.uuid4().hex[:8]}"


def test_inter_broker_apis_are_advertised(cluster: dict[int, BrokerProcess]) -> None:
    with Wire(cluster[1].bootstrap_servers) as w:
        r = w.call(req(18, 3, client_software_name="t", client_software_version="1"))
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert ranges[4] == (6, 7)  # LeaderAndIsr
    assert ranges[5] == (3, 4)  # StopReplica


def test_replicates_to_every_follower(
    cluster: dict[int, BrokerProcess], controller: Controller
) -> None:
    t = topic_name()
    controller.elect(t, 0, leader=1, leader_epoch=0, isr=[1, 2, 3], replicas=[1, 2, 3])
    assert produce(cluster[1], t, batch(b"a", b"b", b"c")) == (NONE, 0)
    assert produce(cluster[1], t, batch(b"d")) == (NONE, 3)
    err, hw, batches = fetch(cluster[1], t)
    assert (err, hw, values(batches)) == (NONE, 4, [b"a", b"b", b"c", b"d"])
    # followers refuse a consumer's Fetch before v11; from v11 (KIP-392) they serve it, up to
    # their own high watermark
    with Wire(cluster[2].bootstrap_servers) as w:
        old = w.call(fetch_request(t, {0: 0}, version=10)).responses[0].partitions[0]
        new = w.call(fetch_request(t, {0: 0}, version=11)).responses[0].partitions[0]
    assert old.error_code == NOT_LEADER_OR_FOLLOWER
    assert new.error_code == NONE and new.high_watermark <= 4
    assert fetched_values(new.records) == [b"a", b"b", b"c", b"d"][: new.high_watermark]
    assert produce(cluster[3], t, batch(b"x"))[0] == NOT_LEADER_OR_FOLLOWER
    # every follower holds the data, offsets and epochs unchanged: read each back as leader
    for epoch, leader in ((1, 2), (2, 3)):
        controller.elect(t, 0, leader=leader, leader_epoch=epoch, isr=[1, 2, 3], replicas=[1, 2, 3])
        batches = read(cluster[leader], t, 4)
        assert values(batches) == [b"a", b"b", b"c", b"d"]
        assert [(b.base_offset, b.partition_leader_epoch) for b in batches] == [(0, 0), (3, 0)]
    # the new leader's writes carry its epoch and reach the others
    assert produce(cluster[3], t, batch(b"e")) == (NONE, 4)
    controller.elect(t, 0, leader=1, leader_epoch=3, isr=[1, 2, 3], replicas=[1, 2, 3])
    batches = read(cluster[1], t, 5)
    assert values(batches) == [b"a", b"b", b"c", b"d", b"e"]
    assert batches[-1].partition_leader_epoch == 2


def test_acks_all_waits_for_followers_and_catch_up_after_restart(
    cluster: dict[int, BrokerProcess], controller: Controller
) -> None:
    t = topic_name()
    controller.elect(t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce(cluster[1], t, batch(b"x")) == (NONE, 0)
    cluster[2].kill()
    try:
        # the ISR still names broker 2: acks=1 is answered, acks=all waits and times out, and
        # consumers do not see what is not replicated
        assert produce(cluster[1], t, batch(b"y", b"z"), acks=1) == (NONE, 1)
        assert produce(cluster[1], t, batch(b"w"), timeout_ms=300)[0] == REQUEST_TIMED_OUT
        err, hw, batches = fetch(cluster[1], t)
        assert (err, hw, values(batches)) == (NONE, 1, [b"x"])
    finally:
        cluster[2].restart()
    # the controller tells the restarted broker again; it catches up from its log end
    controller.leader_and_isr(2, t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce(cluster[1], t, batch(b"v")) == (NONE, 4)
    err, hw, batches = fetch(cluster[1], t)
    assert (err, hw, values(batches)) == (NONE, 5, [b"x", b"y", b"z", b"w", b"v"])
    controller.elect(t, 0, leader=2, leader_epoch=1, isr=[1, 2], replicas=[1, 2])
    batches = read(cluster[2], t, 5)
    assert values(batches) == [b"x", b"y", b"z", b"w", b"v"]


def test_diverged_follower_truncates_after_leader_change(
    cluster: dict[int, BrokerProcess], controller: Controller
) -> None:
    t = topic_name()
    controller.elect(t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce(cluster[1], t, batch(b"a")) == (NONE, 0)
    # broker 2 is elected (epoch 1) while broker 1, not told yet, still takes acks=1 writes
    # that were never replicated: its log diverges from offset 1
    assert (
        controller.leader_and_isr(2, t, 0, leader=2, leader_epoch=1, isr=[2, 1], replicas=[1, 2])
        .partition_errors[0]
        .error_code
        == NONE
    )
    assert produce(cluster[1], t, batch(b"lost1", b"lost2"), acks=1) == (NONE, 1)
    assert produce(cluster[2], t, batch(b"c"), acks=1) == (NONE, 1)
    # a follower fetch that names the old epoch past its end is told where it diverges
    with Wire(cluster[2].bootstrap_servers) as w:
        r = w.call(
            fetch_request(
                t,
                {0: 3},
                current_leader_epoch=1,
                last_fetched_epoch=0,
                log_start_offset=0,
                replica_id=1,
            )
        )
    p = r.responses[0].partitions[0]
    assert int(p.error_code) == NONE and not p.records
    assert (int(p.diverging_epoch.epoch), int(p.diverging_epoch.end_offset)) == (0, 1)
    # now broker 1 learns it follows broker 2 in epoch 1: it truncates, then copies
    controller.leader_and_isr(1, t, 0, leader=2, leader_epoch=1, isr=[2, 1], replicas=[1, 2])
    assert produce(cluster[2], t, batch(b"d")) == (NONE, 2)  # acks=all: broker 1 has it
    controller.elect(t, 0, leader=1, leader_epoch=2, isr=[1, 2], replicas=[1, 2])
    batches = read(cluster[1], t, 3)
    assert values(batches) == [b"a", b"c", b"d"]
    assert [b.partition_leader_epoch for b in batches] == [0, 1, 1]


def test_not_enough_replicas_before_append(
    cluster: dict[int, BrokerProcess], controller: Controller
) -> None:
    t = topic_name()
    # min.insync.replicas=2 and an ISR of the leader alone
    controller.elect(t, 0, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2])
    assert produce(cluster[1], t, batch(b"no"))[0] == NOT_ENOUGH_REPLICAS
    # nothing was written: the next acks=1 write gets offset 0
    assert produce(cluster[1], t, batch(b"yes"), acks=1) == (NONE, 0)
    err, hw, batches = fetch(cluster[1], t)
    assert (err, hw, values(batches)) == (NONE, 1, [b"yes"])  # an ISR of one: HW = log end


def test_epochs_are_fenced(cluster: dict[int, BrokerProcess], controller: Controller) -> None:
    t = topic_name()
    controller.elect(t, 0, leader=1, leader_epoch=5, isr=[1, 2], replicas=[1, 2])
    # an older (or the same) leader epoch from the controller is refused per partition
    r = controller.leader_and_isr(1, t, 0, leader=2, leader_epoch=4, isr=[1, 2], replicas=[1, 2])
    assert r.partition_errors[0].error_code == STALE_CONTROLLER_EPOCH
    # an older controller epoch refuses the whole request
    controller.epoch = 3
    controller.elect(t, 0, leader=1, leader_epoch=6, isr=[1, 2], replicas=[1, 2])
    r = controller.leader_and_isr(
        1, t, 0, leader=1, leader_epoch=7, isr=[1, 2], replicas=[1, 2], controller_epoch=2
    )
    assert r.error_code == STALE_CONTROLLER_EPOCH
    # clients with an older epoch are fenced
    with Wire(cluster[1].bootstrap_servers) as w:
        r2 = w.call(fetch_request(t, {0: 0}, current_leader_epoch=5))
    assert int(r2.responses[0].partitions[0].error_code) == FENCED_LEADER_EPOCH
    # StopReplica: an older leader epoch is fenced; then the follower stops and deletes
    s = controller.stop_replica(2, t, 0, leader_epoch=1)
    assert s.partition_errors[0].error_code == FENCED_LEADER_EPOCH
    s = controller.stop_replica(2, t, 0, leader_epoch=6, delete=True)
    assert (s.error_code, s.partition_errors[0].error_code) == (NONE, NONE)
    assert produce(cluster[1], t, batch(b"alone"), timeout_ms=300)[0] == REQUEST_TIMED_OUT


def test_not_enough_replicas_after_append_when_the_isr_shrinks_meanwhile(
    cluster: dict[int, BrokerProcess], controller: Controller
) -> None:
    t = topic_name()
    # broker 2 is in the ISR but not told to follow: nothing will fetch for it
    r = controller.leader_and_isr(1, t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2, 3])
    assert r.partition_errors[0].error_code == NONE
    with Wire(cluster[1].bootstrap_servers, timeout=30) as producer:
        request = produce_request(t, 0, batch(b"late"), acks=-1, timeout_ms=20_000)
        correlation_id = producer.send(request)
        # the append happened (a replica's fetch reads to the log end) and the produce waits
        with Wire(cluster[1].bootstrap_servers) as w:
            f = fetch_request(
                t,
                {0: 0},
                max_wait_ms=10_000,
                current_leader_epoch=0,
                log_start_offset=0,
                replica_id=3,
            )
            fp = w.call(f).responses[0].partitions[0]
            assert fetched_values(fp.records) == [b"late"], fp
        # the controller shrinks the ISR to the leader alone (same leader epoch, newer
        # partition epoch): the HW passes the batch, but the ISR is below min.insync.replicas
        r = controller.leader_and_isr(
            1, t, 0, leader=1, leader_epoch=0, isr=[1], replicas=[1, 2, 3], partition_epoch=1
        )
        assert r.partition_errors[0].error_code == NONE
        answer = producer.receive(request, correlation_id)
    p = answer.responses[0].partition_responses[0]
    assert int(p.error_code) == NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_new_leader_below_its_epoch_start_answers_offset_not_available() -> None:
    """A follower elected before it learned the high watermark its old leader gave out must not
    answer a too-low latest offset (Kafka's Partition.fetchOffsetForTimestamp): consumers
    get OFFSET_NOT_AVAILABLE (retriable) until its followers' fetches move its HW to the start
    of its epoch."""
    t = topic_name()
    # a follower learns the leader's HW in the answer to its next fetch, which waits for new
    # records (here: long enough to elect it first)
    settings = {**SETTINGS, "replica.fetch.wait.max.ms": 60_000}
    with brokers(2, settings) as procs:
        controller = Controller(procs)
        controller.elect(t, 0, leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2])
        # acks=all: broker 2 fetched past the batch (its log ends at 3), so the leader's HW is
        # 3, but broker 2 still has the HW of its previous fetch answer: 0
        assert produce(procs[1], t, batch(b"a", b"b", b"c", ts=1000)) == (NONE, 0)
        assert list_offsets(procs[1], t, LATEST) == (NONE, 3)
        # broker 2 is elected at epoch 1, from its log end 3; broker 1 is not told yet
        controller.leader_and_isr(2, t, 0, leader=2, leader_epoch=1, isr=[2, 1], replicas=[1, 2])
        for isolation in (0, 1):
            assert list_offsets(procs[2], t, LATEST, isolation) == (OFFSET_NOT_AVAILABLE, -1)
            assert list_offsets(procs[2], t, 1000, isolation) == (OFFSET_NOT_AVAILABLE, -1)
        assert list_offsets(procs[2], t, EARLIEST) == (NONE, 0)
        # broker 1 follows; once it has fetched past the new record, the HW is the log end
        controller.leader_and_isr(1, t, 0, leader=2, leader_epoch=1, isr=[2, 1], replicas=[1, 2])
        assert produce(procs[2], t, batch(b"d", ts=2000)) == (NONE, 3)
        for isolation in (0, 1):
            assert list_offsets(procs[2], t, LATEST, isolation) == (NONE, 4)
            assert list_offsets(procs[2], t, 1000, isolation) == (NONE, 0)
            assert list_offsets(procs[2], t, 5000, isolation) == (NONE, -1)
