"""The controller's event loop against a real ZooKeeper: 3 brokers in one process, each with its
own ZooKeeper session, broker registration and controller candidate; a recording channel."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from odradek.cluster.zk import KafkaZkClient
from odradek.cluster.znodes import BrokerInfo, LeaderAndIsr, TopicAssignment
from odradek.controller.controller import Controller, RecordingChannel
from odradek.controller.decisions import AlterPartitionItem
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from odradek.testing.helpers import wait_until

from .harness import expire_session

_chroots = itertools.count()
T0 = ("t", 0)


@dataclass
class Node:
    id: int
    zk: KafkaZkClient
    channel: RecordingChannel
    controller: Controller

    def stop(self) -> None:
        self.controller.stop()
        self.zk.close()


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[tuple[str, Callable[[int], Node], KafkaZkClient]]:
    connect = f"{zk_connect}/c{next(_chroots)}"
    nodes: list[Node] = []
    admin = KafkaZkClient(connect, session_timeout_ms=6000)
    admin.start()

    def start(broker_id: int, session_timeout_ms: int = 2000) -> Node:
        zk = KafkaZkClient(connect, session_timeout_ms=session_timeout_ms)
        zk.start()
        zk.register_broker(BrokerInfo(broker_id, "127.0.0.1", 9090 + broker_id))
        channel = RecordingChannel()
        controller = Controller(zk, broker_id, channel, auto_leader_rebalance_enable=False)
        controller.start()
        node = Node(broker_id, zk, channel, controller)
        nodes.append(node)
        return node

    yield connect, start, admin
    for n in nodes:
        n.stop()
    admin.close()


def active(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if n.controller.is_active]


def state(admin: KafkaZkClient, tp: tuple[str, int] = T0) -> LeaderAndIsr | None:
    return admin.get_topic_partition_states([tp]).get(tp)


@pytest.mark.timeout(60)
def test_one_controller_and_failover(cluster) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    nodes = [start(i) for i in (1, 2, 3)]
    assert wait_until(lambda: len(active(nodes)) == 1)
    first = active(nodes)[0]
    assert admin.get_controller_id() == first.id
    epoch = admin.get_controller_epoch()
    assert epoch is not None
    first.stop()
    rest = [n for n in nodes if n is not first]
    assert wait_until(lambda: len(active(rest)) == 1)
    second = active(rest)[0]
    assert admin.get_controller_id() == second.id
    new_epoch = admin.get_controller_epoch()
    assert new_epoch is not None and new_epoch[0] == epoch[0] + 1
    ctx = second.controller.context
    assert ctx is not None and ctx.epoch == new_epoch[0]
    assert sorted(ctx.live_brokers) == sorted(n.id for n in rest)


@pytest.mark.timeout(60)
def test_topic_creation_and_broker_failure_elect_with_epochs(cluster) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    nodes = [start(i) for i in (1, 2, 3)]
    assert wait_until(lambda: len(active(nodes)) == 1)
    ctl = active(nodes)[0]
    ctx = ctl.controller.context
    assert ctx is not None
    victim = next(n for n in nodes if n is not ctl)
    survivors = [n.id for n in nodes if n is not victim]
    replicas = (victim.id, *survivors)
    admin.create_topic_assignment("t", TopicAssignment({0: replicas, 1: tuple(reversed(replicas))}))
    assert wait_until(lambda: state(admin) is not None and state(admin, ("t", 1)) is not None)
    assert state(admin) == LeaderAndIsr(victim.id, 0, replicas, ctx.epoch, 0)

    def lai_for(broker: int, leader: int) -> list[LeaderAndIsrRequest]:
        return [r for b, r in ctl.channel.snapshot() if b == broker and isinstance(r, LeaderAndIsrRequest)
                and any(s.partition_index == 0 and s.leader == leader for s in r.partition_states)]

    assert wait_until(lambda: all(lai_for(b, victim.id) for b in replicas))
    # the leader (not the controller) goes away: the next replica in the ISR leads, epoch + 1
    victim.stop()
    assert wait_until(lambda: (s := state(admin)) is not None and s.leader != victim.id)
    assert state(admin) == LeaderAndIsr(survivors[0], 1, tuple(survivors), ctx.epoch, 1)
    assert wait_until(lambda: all(lai_for(b, survivors[0]) for b in survivors))
    for b in survivors:
        req = lai_for(b, survivors[0])[-1]
        assert req.broker_epoch == admin.get_broker(b).epoch  # type: ignore[union-attr]
        assert req.controller_epoch == ctx.epoch and req.controller_id == ctl.id
        st = next(s for s in req.partition_states if s.partition_index == 0)
        assert (st.leader_epoch, st.partition_epoch, st.isr) == (1, 1, tuple(survivors))
    # partition 1 had the victim as a follower: it left the ISR, leader unchanged
    s1 = state(admin, ("t", 1))
    assert s1 is not None and victim.id not in s1.isr and s1.leader == survivors[-1] and s1.leader_epoch == 1


@pytest.mark.timeout(60)
def test_expired_leader_session_is_a_bounce(cluster) -> None:  # type: ignore[no-untyped-def]
    connect, start, admin = cluster
    nodes = [start(i) for i in (1, 2, 3)]
    assert wait_until(lambda: len(active(nodes)) == 1)
    ctl = active(nodes)[0]
    leader = next(n for n in nodes if n is not ctl)
    admin.create_topic_assignment("t", TopicAssignment({0: (leader.id, *[n.id for n in nodes if n is not leader])}))
    assert wait_until(lambda: (s := state(admin)) is not None and s.leader == leader.id)
    old_epoch = admin.get_broker(leader.id).epoch  # type: ignore[union-attr]
    renewed = threading.Event()
    leader.zk.add_new_session_callback(renewed.set)
    expire_session(leader.zk, connect)
    assert renewed.wait(15)
    new_epoch = leader.zk.broker_epoch
    assert new_epoch > old_epoch
    # Kafka's bounce: leadership moves off the bounced broker, which then learns it with its new epoch
    assert wait_until(lambda: (s := state(admin)) is not None and s.leader != leader.id)
    assert wait_until(lambda: any(
        b == leader.id and isinstance(r, LeaderAndIsrRequest) and r.broker_epoch == new_epoch
        for b, r in ctl.channel.snapshot()))


@pytest.mark.timeout(60)
def test_deposed_controller_cannot_write(cluster) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    nodes = [start(i) for i in (1, 2)]
    assert wait_until(lambda: len(active(nodes)) == 1)
    old = active(nodes)[0]
    other = next(n for n in nodes if n is not old)
    admin.create_topic_assignment("t", TopicAssignment({0: (old.id, other.id)}))
    assert wait_until(lambda: state(admin) is not None)
    before = state(admin)
    assert before is not None
    release = threading.Event()
    old.controller.run_in_loop(lambda: release.wait(20))  # the old controller is busy ...
    shrink = old.controller.alter_partition(
        old.id, old.zk.broker_epoch, [AlterPartitionItem("t", 0, before.leader_epoch, (old.id,), before.zk_version)]
    )
    admin.zk.delete("/controller")  # ... while an operator forces a new election
    assert wait_until(lambda: other.controller.is_active)
    release.set()
    with pytest.raises(Exception) as err:
        shrink.result(10)
    assert type(err.value).__name__ == "ControllerMovedError"
    assert wait_until(lambda: not old.controller.is_active)
    assert state(admin) == before  # the deposed controller wrote nothing
    assert admin.get_controller_id() == other.id


def _three(start) -> tuple[list[Node], Node]:  # type: ignore[no-untyped-def]
    nodes = [start(i) for i in (1, 2, 3)]
    assert wait_until(lambda: len(active(nodes)) == 1)
    return nodes, active(nodes)[0]


@pytest.mark.timeout(60)
def test_admin_paths_deletion_reassignment_preferred_isr_notification(cluster) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    _, ctl = _three(start)
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2)}))
    admin.create_topic_assignment("gone", TopicAssignment({0: (1, 2, 3)}))
    assert wait_until(lambda: state(admin) is not None and state(admin, ("gone", 0)) is not None)

    # deletion: StopReplica(delete) everywhere, then every znode of the topic is gone
    admin.create_delete_topic_path("gone")
    assert wait_until(lambda: "gone" not in admin.get_all_topics_in_cluster() and admin.get_topic_deletions() == [])
    assert not admin.exists("/config/topics/gone")
    from odradek.protocol.inter_broker import StopReplicaRequest

    stops = {b for b, r in ctl.channel.snapshot() if isinstance(r, StopReplicaRequest)
             and any(p.topic_name == "gone" and p.delete_partition for p in r.partition_states)}
    assert stops == {1, 2, 3}

    # reassignment through /admin/reassign_partitions: [1, 2] -> [3, 2]
    admin.create_partition_reassignment({T0: (3, 2)})
    assert wait_until(lambda: (a := admin.get_topic_assignment("t")) is not None
                      and a[0].adding_replicas.get(0) == (3,))
    s = state(admin)
    assert s is not None and s.leader == 1
    # the leader reports 3 caught up (AlterPartition): the reassignment completes
    res = ctl.controller.alter_partition(1, admin.get_broker(1).epoch,  # type: ignore[union-attr]
                                         [AlterPartitionItem("t", 0, s.leader_epoch, (1, 2, 3), s.zk_version)])
    assert res.result(10).alter_partition[T0].error_code == 0
    assert wait_until(lambda: not admin.exists("/admin/reassign_partitions"))
    a = admin.get_topic_assignment("t")
    assert a is not None and a[0].partitions == {0: (3, 2)} and a[0].adding_replicas == {}
    s = state(admin)
    assert s is not None and s.leader == 3 and s.isr == (2, 3)

    # preferred replica election through the znode: nothing to do, the znode is consumed
    admin.create_preferred_replica_election([T0])
    assert wait_until(lambda: not admin.exists("/admin/preferred_replica_election"))

    # an ISR change written by a leader itself is picked up and announced
    cur = state(admin)
    assert cur is not None
    admin.zk.set("/brokers/topics/t/partitions/0/state",
                 LeaderAndIsr(3, cur.leader_epoch, (3,), cur.controller_epoch).to_json(), cur.zk_version)
    admin.propagate_isr_changes([T0])
    assert wait_until(lambda: admin.get_all_isr_change_notifications() == [])
    assert wait_until(lambda: (c := ctl.controller.context) is not None and c.states[T0].isr == (3,))


@pytest.mark.timeout(60)
def test_controlled_shutdown_through_the_controller(cluster) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    nodes, ctl = _three(start)
    leaving = next(n for n in nodes if n is not ctl)
    others = [n.id for n in nodes if n is not leaving]
    admin.create_topic_assignment("t", TopicAssignment({0: (leaving.id, *others), 1: (others[0], leaving.id)}))
    assert wait_until(lambda: state(admin) is not None and state(admin, ("t", 1)) is not None)
    d = ctl.controller.controlled_shutdown(leaving.id, leaving.zk.broker_epoch).result(10)
    assert d.error_code == 0 and d.remaining_partitions == ()
    s0, s1 = state(admin), state(admin, ("t", 1))
    assert s0 is not None and s0.leader == others[0] and leaving.id not in s0.isr and s0.leader_epoch == 1
    assert s1 is not None and s1.leader == others[0] and s1.isr == (others[0],)
    stale = ctl.controller.controlled_shutdown(leaving.id, 12345).result(10)
    assert stale.error_code == 77  # STALE_BROKER_EPOCH
    third = next(n for n in nodes if n is not ctl and n is not leaving)
    assert third.controller.controlled_shutdown(leaving.id, 0).result(10).error_code == 41  # NOT_CONTROLLER


@pytest.mark.timeout(60)
def test_controller_session_expiry_resigns_and_a_new_epoch_wins(cluster) -> None:  # type: ignore[no-untyped-def]
    connect, start, admin = cluster
    nodes, ctl = _three(start)
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2, 3)}))
    assert wait_until(lambda: state(admin) is not None)
    got = admin.get_controller_epoch()
    assert got is not None
    old_epoch = got[0]
    expire_session(ctl.zk, connect)
    # some candidate (possibly the old one, in its new session) wins with a higher epoch
    assert wait_until(lambda: (e := admin.get_controller_epoch()) is not None and e[0] > old_epoch, 15)
    assert wait_until(lambda: len(active(nodes)) == 1 and active(nodes)[0].controller.context is not None
                      and active(nodes)[0].controller.context.epoch > old_epoch, 15)
    winner = active(nodes)[0]
    assert admin.get_controller_id() == winner.id
    # the old controller's registration came back with a new broker epoch, and the new controller
    # knows it (a bounce: leadership of t-0 may have moved, but t-0 has a live leader)
    assert wait_until(lambda: sorted(winner.controller.context.live_brokers) == [1, 2, 3])  # type: ignore[union-attr]
    assert wait_until(lambda: (s := state(admin)) is not None and s.leader in (1, 2, 3))


@pytest.mark.timeout(90)
def test_zookeeper_restart_while_the_controller_serves(cluster, zookeeper) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    nodes, ctl = _three(start)
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2, 3)}))
    assert wait_until(lambda: state(admin) is not None)
    epoch = admin.get_controller_epoch()
    zookeeper.restart()  # sessions (2 s) outlive a ~1 s restart
    assert wait_until(lambda: all(n.zk.wait_writable(0) for n in nodes) and admin.wait_writable(0), 20)
    admin.create_topic_assignment("u", TopicAssignment({0: (2, 3)}))
    assert wait_until(lambda: state(admin, ("u", 0)) is not None, 15)
    s = state(admin, ("u", 0))
    assert s is not None and s.leader == 2
    if admin.get_controller_epoch() == epoch:  # sessions survived: the same controller serves on
        assert ctl.controller.is_active and s.controller_epoch == epoch[0]


@pytest.mark.timeout(60)
def test_topic_ids_and_alter_partition_v3_with_kio(cluster) -> None:  # type: ignore[no-untyped-def]
    from kio.schema.alter_partition.v3 import request as apr
    from kio.static.primitive import i8, i32, i64

    from odradek.controller.decisions import topic_uuid
    from odradek.protocol.messages import decode_response, encode_response

    _, start, admin = cluster
    _, ctl = _three(start)
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2, 3)}))  # no topic id
    assert wait_until(lambda: state(admin) is not None)
    got = admin.get_topic_assignment("t")
    assert got is not None and got[0].topic_id is not None  # the controller gave it one (KIP-516)
    tid = topic_uuid(got[0].topic_id)
    s = state(admin)
    assert s is not None

    def request(isr: tuple[int, ...], epochs: tuple[int, ...], partition_epoch: int) -> apr.AlterPartitionRequest:
        return apr.AlterPartitionRequest(
            broker_id=i32(1), broker_epoch=i64(admin.get_broker(1).epoch),  # type: ignore[union-attr]
            topics=(apr.TopicData(topic_id=tid, partitions=(apr.PartitionData(
                partition_index=i32(0), leader_epoch=i32(s.leader_epoch),
                new_isr_with_epochs=tuple(apr.BrokerState(broker_id=i32(b), broker_epoch=i64(e))
                                          for b, e in zip(isr, epochs, strict=True)),
                leader_recovery_state=i8(0), partition_epoch=i32(partition_epoch)),)),),
        )

    epochs = {b: admin.get_broker(b).epoch for b in (1, 2)}  # type: ignore[union-attr]
    stale = ctl.controller.alter_partition_request(request((1, 2), (epochs[1], 12345), s.zk_version)).result(10)
    assert stale.topics[0].partitions[0].error_code.value == 107  # INELIGIBLE_REPLICA
    resp = ctl.controller.alter_partition_request(request((1, 2), (epochs[1], epochs[2]), s.zk_version)).result(10)
    p = resp.topics[0].partitions[0]
    assert (p.error_code.value, p.leader_id, tuple(p.isr), p.partition_epoch) == (0, 1, (1, 2), s.zk_version + 1)
    assert state(admin) == LeaderAndIsr(1, s.leader_epoch, (1, 2), s.controller_epoch, s.zk_version + 1)
    wire = encode_response(resp, 7, api_key=56, api_version=3)
    assert decode_response(56, 3, wire[4:], header=True) == resp


@pytest.mark.timeout(60)
def test_admin_apis_with_kio(cluster) -> None:  # type: ignore[no-untyped-def]
    import datetime

    from kio.schema.alter_partition_reassignments.v0 import request as alter
    from kio.schema.elect_leaders.v2 import request as elect
    from kio.schema.list_partition_reassignments.v0 import request as lst
    from kio.static.primitive import i8, i32

    from odradek.protocol.messages import decode_response, encode_response

    _, start, admin = cluster
    nodes, ctl = _three(start)
    other = next(n for n in nodes if n is not ctl)
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2), 1: (2, 3)}))
    assert wait_until(lambda: state(admin) is not None and state(admin, ("t", 1)) is not None)
    second = 10 * datetime.timedelta(seconds=1)

    req = elect.ElectLeadersRequest(election_type=i8(0), topic_partitions=None, timeout=second)
    resp = ctl.controller.elect_leaders_request(req).result(10)
    codes = {(r.topic, p.partition_id): p.error_code.value for r in resp.replica_election_results
             for p in r.partition_result}
    assert codes == {("t", 0): 84, ("t", 1): 84}  # ELECTION_NOT_NEEDED
    assert decode_response(43, 2, encode_response(resp, 1, api_key=43, api_version=2)[4:], header=True) == resp
    assert other.controller.elect_leaders_request(req).result(10).error_code.value == 41  # NOT_CONTROLLER

    areq = alter.AlterPartitionReassignmentsRequest(timeout=second, topics=(alter.ReassignableTopic(
        name="t", partitions=(alter.ReassignablePartition(partition_index=i32(0), replicas=(i32(3), i32(1))),
                              alter.ReassignablePartition(partition_index=i32(7), replicas=(i32(3),)))),))
    aresp = ctl.controller.alter_partition_reassignments_request(areq).result(10)
    assert [p.error_code.value for p in aresp.responses[0].partitions] == [0, 3]
    lresp = ctl.controller.list_partition_reassignments_request(
        lst.ListPartitionReassignmentsRequest(timeout=second, topics=None)).result(10)
    ongoing = lresp.topics[0].partitions[0]
    assert (lresp.topics[0].name, ongoing.partition_index, tuple(ongoing.replicas), tuple(ongoing.adding_replicas),
            tuple(ongoing.removing_replicas)) == ("t", 0, (3, 1, 2), (3,), (2,))
    # cancel: back to the original replicas
    creq = alter.AlterPartitionReassignmentsRequest(timeout=second, topics=(alter.ReassignableTopic(
        name="t", partitions=(alter.ReassignablePartition(partition_index=i32(0), replicas=None),)),))
    assert ctl.controller.alter_partition_reassignments_request(creq).result(10).responses[0].partitions[0] \
        .error_code.value == 0
    assert wait_until(lambda: (a := admin.get_topic_assignment("t")) is not None and a[0].partitions[0] == (1, 2)
                      and a[0].adding_replicas == {})
    lresp = ctl.controller.list_partition_reassignments_request(
        lst.ListPartitionReassignmentsRequest(timeout=second, topics=None)).result(10)
    assert lresp.topics == ()


@pytest.mark.timeout(90)
def test_controller_that_resigned_while_zookeeper_was_down_takes_over_again(cluster, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """An event while ZooKeeper is away makes the controller resign (NotConnectedError), never
    wait: the AlterPartition is answered at once, unapplied; when ZooKeeper comes back, however
    long it was away, the session is the same and ``/controller`` still names this broker: it
    must take the controllership up again (else no broker would)."""
    import time

    connect, start, admin = cluster
    nodes, ctl = _three(start)
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2, 3)}))
    assert wait_until(lambda: state(admin) is not None)
    before = state(admin)
    assert before is not None
    leader = next(n for n in nodes if n.id == before.leader)
    epoch = admin.get_controller_epoch()
    zookeeper.stop()
    try:
        assert wait_until(lambda: not ctl.zk.wait_writable(0), 10)
        # the leader shrinks the ISR: the controller finds ZooKeeper away (its watches, fired by the
        # disconnect, may have queued events before this one: none of them may wait for ZooKeeper)
        shrink = ctl.controller.alter_partition(
            leader.id, leader.zk.broker_epoch,
            [AlterPartitionItem("t", 0, before.leader_epoch, (leader.id,), before.zk_version)],
        )
        assert shrink.exception(10) is not None or shrink.result().error_code == ErrorCode.not_controller.value
        assert wait_until(lambda: not active(nodes), 10)
        # the deliberate downtime: longer than twice the session timeout (2 s)
        time.sleep(5)
    finally:  # a failure here must not leave the next test without ZooKeeper
        zookeeper.start()
    # the test's own client: a new session (its old one may have expired while kazoo's
    # reconnect backoff, grown over the downtime, kept it away; that says nothing of the brokers)
    after = KafkaZkClient(connect, session_timeout_ms=6000)
    after.start()
    try:
        assert wait_until(lambda: len(active(nodes)) == 1, 20), "no controller after ZooKeeper came back"
        assert active(nodes)[0] is ctl and after.get_controller_epoch() == epoch  # the same session
        # and it works: a new topic gets its leader
        after.create_topic_assignment("u", TopicAssignment({0: (2, 3)}))
        assert wait_until(lambda: (s := state(after, ("u", 0))) is not None and s.leader == 2, 15)
    finally:
        after.close()


@pytest.mark.timeout(60)
def test_log_dir_event_notification_and_storage_errors_take_replicas_offline(cluster) -> None:  # type: ignore[no-untyped-def]
    _, start, admin = cluster
    nodes = [start(i) for i in (1, 2, 3)]
    assert wait_until(lambda: len(active(nodes)) == 1)
    ctrl = active(nodes)[0]
    failed = next(n for n in nodes if n is not ctrl)
    others = [n.id for n in nodes if n is not failed]
    admin.create_topic_assignment(
        "t", TopicAssignment({0: (failed.id, *others), 1: (others[0], failed.id)})
    )
    assert wait_until(lambda: state(admin) is not None and state(admin, ("t", 1)) is not None)
    sent_before = len(ctrl.channel.snapshot())
    admin.propagate_log_dir_event(failed.id)  # what the broker writes when a dir fails
    assert wait_until(lambda: admin.get_all_log_dir_event_notifications() == [])

    def asked() -> list[tuple[str, int]]:
        return sorted(
            (s.topic_name, s.partition_index)
            for b, r in ctrl.channel.snapshot()[sent_before:]
            if b == failed.id and isinstance(r, LeaderAndIsrRequest)
            for s in r.partition_states
        )

    assert wait_until(lambda: asked() == [T0, ("t", 1)])
    # the broker answers KAFKA_STORAGE_ERROR for the partition on its failed dir only
    ctrl.controller.leader_and_isr_response(
        failed.id,
        LeaderAndIsrResponse(
            0, (LeaderAndIsrPartitionError("t", 0, 56), LeaderAndIsrPartitionError("t", 1, 0))
        ),
    )
    assert wait_until(lambda: (s := state(admin)) is not None and s.leader == others[0])
    s0 = state(admin)
    assert s0 is not None and s0.isr == tuple(others) and s0.leader_epoch == 1
    s1 = state(admin, ("t", 1))
    assert s1 is not None and failed.id in s1.isr  # its other dir serves on
    ctx = ctrl.controller.context
    assert ctx is not None and ctx.offline_replicas(T0) == (failed.id,)
