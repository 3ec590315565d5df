"""KafkaZkClient against a real ZooKeeper: election, fencing, conditional state writes, sessions."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from odradek.cluster.zk import KafkaZkClient
from odradek.cluster.znodes import (
    BrokerInfo,
    ControllerMovedError,
    LeaderAndIsr,
    TopicAssignment,
    parse_connect,
)
from odradek.testing.helpers import wait_until

from .harness import expire_session

_chroots = itertools.count()


@pytest.fixture
def chroot(zk_connect: str) -> str:
    """A fresh chroot per test, so tests share the module's server without seeing each other."""
    return f"{zk_connect}/t{next(_chroots)}"


@pytest.fixture
def clients(chroot: str) -> Iterator[Callable[..., KafkaZkClient]]:
    made: list[KafkaZkClient] = []

    def make(session_timeout_ms: int = 6000) -> KafkaZkClient:
        c = KafkaZkClient(chroot, session_timeout_ms=session_timeout_ms, connection_timeout_ms=5000)
        c.start()
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_parse_connect() -> None:
    assert parse_connect("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert parse_connect("a:1") == ("a:1", None)
    assert parse_connect("a:1/") == ("a:1", None)


def test_chroot_holds_kafkas_layout(clients: Callable[..., KafkaZkClient], chroot: str, zk_connect: str) -> None:
    c = clients()
    c.register_broker(BrokerInfo(1, "127.0.0.1", 9092))
    raw = KazooClient(hosts=zk_connect)
    raw.start(timeout=5)
    try:
        root = chroot[chroot.index("/"):]
        assert raw.get_children(f"{root}/brokers/ids") == ["1"]
        data = json.loads(raw.get(f"{root}/brokers/ids/1")[0])
        assert data["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"] and data["version"] == 5
        assert not raw.exists("/brokers/ids/1")
    finally:
        raw.stop()
        raw.close()


def test_broker_epoch_is_czxid_and_ephemeral(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    epoch = a.register_broker(BrokerInfo(1, "127.0.0.1", 9092, rack="r1"))
    info = b.get_broker(1)
    assert info is not None and info.epoch == epoch and info.rack == "r1" and info.port == 9092
    a.close()
    assert b.get_all_broker_ids() == []


def test_two_clients_race_for_the_controller(clients: Callable[..., KafkaZkClient]) -> None:
    contenders = [clients() for _ in range(4)]
    won: list[tuple[int, tuple[int, int]]] = []
    lost: list[int] = []
    barrier = threading.Barrier(len(contenders))

    def run(i: int, c: KafkaZkClient) -> None:
        barrier.wait()
        try:
            won.append((i, c.register_controller_and_increment_controller_epoch(i)))
        except ControllerMovedError:
            lost.append(i)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(contenders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 3
    winner, (epoch, _version) = won[0]
    assert epoch == 1 and contenders[0].get_controller_id() == winner
    assert contenders[0].get_controller_epoch() == (1, 1)


def test_deposed_controller_cannot_write(clients: Callable[..., KafkaZkClient]) -> None:
    admin, old, new = clients(), clients(), clients()
    admin.create_topic_assignment("t", TopicAssignment({0: (1, 2)}))
    _, old_version = old.register_controller_and_increment_controller_epoch(1)
    created = old.create_topic_partition_states({("t", 0): LeaderAndIsr(1, 0, (1, 2), 1)}, old_version)
    state = created[("t", 0)]
    assert isinstance(state, LeaderAndIsr) and state.zk_version == 0
    old.delete_controller(old_version)  # as if its session had gone: /controller is free
    epoch, new_version = new.register_controller_and_increment_controller_epoch(2)
    assert epoch == 2
    with pytest.raises(ControllerMovedError):
        old.update_leader_and_isr({("t", 0): LeaderAndIsr(2, 1, (2,), 1, 0)}, old_version)
    with pytest.raises(ControllerMovedError):
        old.delete_topic_znodes("t", old_version)
    assert admin.get_topic_partition_states([("t", 0)])[("t", 0)].leader == 1
    res = new.update_leader_and_isr({("t", 0): LeaderAndIsr(2, 1, (2,), 2, 0)}, new_version)
    assert res.finished[("t", 0)].zk_version == 1


def test_stale_partition_state_write_is_refused(clients: Callable[..., KafkaZkClient]) -> None:
    c = clients()
    c.create_topic_assignment("t", TopicAssignment({0: (1, 2), 1: (2, 1)}))
    _, v = c.register_controller_and_increment_controller_epoch(1)
    c.create_topic_partition_states(
        {("t", 0): LeaderAndIsr(1, 0, (1, 2), 1), ("t", 1): LeaderAndIsr(2, 0, (2, 1), 1)}, v
    )
    first = c.update_leader_and_isr({("t", 0): LeaderAndIsr(1, 1, (1,), 1, 0)}, v)
    assert first.finished[("t", 0)].zk_version == 1
    stale = c.update_leader_and_isr(
        {("t", 0): LeaderAndIsr(2, 1, (2,), 1, 0), ("t", 1): LeaderAndIsr(2, 1, (2,), 1, 0),
         ("t", 9): LeaderAndIsr(2, 1, (2,), 1, 0)}, v
    )
    assert stale.bad_version == {("t", 0)} and stale.no_node == {("t", 9)}
    assert stale.finished[("t", 1)].zk_version == 1
    assert c.get_topic_partition_states([("t", 0)])[("t", 0)] == LeaderAndIsr(1, 1, (1,), 1, 1)


def test_ephemeral_gone_and_reregistered_after_session_expiry(
    clients: Callable[..., KafkaZkClient], chroot: str
) -> None:
    broker, observer = clients(session_timeout_ms=2000), clients()
    epoch = broker.register_broker(BrokerInfo(7, "127.0.0.1", 9000))
    renewed = threading.Event()
    # what the session-lost callbacks see: still the old registration, and no writes allowed
    # (the controller resigns there, before anything of the new session happens)
    at_loss: list[tuple[int, bool, bool]] = []
    broker.add_session_lost_callback(
        lambda: at_loss.append((broker.broker_epoch, broker.wait_writable(0), renewed.is_set()))
    )
    broker.add_new_session_callback(renewed.set)
    old_session = broker.session_id
    expire_session(broker, chroot)
    assert renewed.wait(15), "no new session"
    assert broker.session_id != old_session
    info = observer.get_broker(7)
    assert info is not None and info.epoch == broker.broker_epoch and info.epoch > epoch
    assert at_loss == [(epoch, False, False)]


def test_topic_config_deletion_admin_paths(clients: Callable[..., KafkaZkClient]) -> None:
    c = clients()
    c.create_topic_assignment("t", TopicAssignment({0: (1,)}, topic_id="abc"), {"cleanup.policy": "compact"})
    assert c.get_topic_config("t") == {"cleanup.policy": "compact"}
    assert c.zk.get_children("/config/changes") == ["config_change_0000000000"]
    got = c.get_topic_assignment("t")
    assert got is not None and got[0].topic_id == "abc" and got[0].partitions == {0: (1,)}
    c.create_delete_topic_path("t")
    assert c.get_topic_deletions() == ["t"]
    _, v = c.register_controller_and_increment_controller_epoch(1)
    c.create_topic_partition_states({("t", 0): LeaderAndIsr(1, 0, (1,), 1)}, v)
    c.delete_topic_znodes("t", v)
    assert c.get_all_topics_in_cluster() == [] and c.get_topic_deletions() == [] and c.get_topic_config("t") == {}
    c.create_partition_reassignment({("u", 0): (2, 3)})
    assert c.get_partition_reassignment() == {("u", 0): (2, 3)}
    c.delete_partition_reassignment(v)
    assert c.get_partition_reassignment() == {}
    c.create_preferred_replica_election([("u", 1)])
    assert c.get_preferred_replica_election() == {("u", 1)}
    name = c.propagate_isr_changes([("u", 0), ("u", 1)])
    assert c.get_all_isr_change_notifications() == [name]
    assert c.get_partitions_from_isr_change_notifications([name]) == {("u", 0), ("u", 1)}
    c.delete_isr_change_notifications([name], v)
    assert c.get_all_isr_change_notifications() == []
    first, second = c.propagate_log_dir_event(2), c.propagate_log_dir_event(3)
    assert first.startswith("log_dir_event_") and c.get_all_log_dir_event_notifications() == [first, second]
    data, _ = c.zk.get(f"/log_dir_event_notification/{first}")
    assert json.loads(data) == {"version": 1, "broker": 2, "event": 1}  # Kafka's LogDirEventNotificationZNode
    assert c.get_broker_ids_from_log_dir_events([first, second, "log_dir_event_9999999999"]) == [2, 3]
    c.delete_log_dir_event_notifications([first, second], v)
    assert c.get_all_log_dir_event_notifications() == []


def test_cluster_id_and_producer_id_blocks(clients: Callable[..., KafkaZkClient]) -> None:
    a, b = clients(), clients()
    cid = a.get_or_create_cluster_id()
    assert b.get_or_create_cluster_id("other") == cid and len(cid) == 22
    blocks: list[int] = []
    lock = threading.Lock()

    def take(c: KafkaZkClient, broker: int) -> None:
        for _ in range(10):
            blk = c.allocate_producer_id_block(broker)
            with lock:
                blocks.append(blk.first_producer_id)

    threads = [threading.Thread(target=take, args=(c, i)) for i, c in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(blocks) == [i * 1000 for i in range(20)]


@pytest.mark.timeout(60)
def test_suspended_session_refuses_writes(clients: Callable[..., KafkaZkClient], zookeeper) -> None:  # type: ignore[no-untyped-def]
    from odradek.cluster.znodes import NotConnectedError

    c = clients(session_timeout_ms=10_000)
    epoch = c.register_broker(BrokerInfo(3, "127.0.0.1", 9000))
    session_id = c.zk.client_id[0]
    zookeeper.kill()
    try:
        assert wait_until(lambda: not c.wait_writable(0))
        with pytest.raises(NotConnectedError):
            c.create_delete_topic_path("t")
    finally:
        zookeeper.start()
    assert c.wait_writable(15)
    c.create_delete_topic_path("t")
    if c.zk.client_id[0] == session_id:
        assert c.broker_epoch == epoch  # same session: same registration
    else:  # the restart outlasted the session (a loaded machine): registered again
        assert c.broker_epoch > epoch


def test_children_watch_calls_back_after_a_new_session_even_with_the_same_names(
    clients: Callable[..., KafkaZkClient], chroot: str
) -> None:
    """A controller's ``/brokers/ids`` watch: a broker that registered again while the
    controller's session was being replaced has the same name and a new epoch. kazoo's own
    ChildrenWatch stays silent then (the names are those it saw before); ours calls back, so
    the controller reads the epochs again."""
    watcher, broker = clients(session_timeout_ms=2000), clients()
    broker.register_broker(BrokerInfo(5, "127.0.0.1", 9005))
    seen: list[list[str]] = []
    lock = threading.Lock()

    def record(children: list[str]) -> bool | None:
        with lock:
            seen.append(sorted(children))
            return False if children == ["stop"] else None

    def count() -> int:
        with lock:
            return len(seen)

    watcher.watch_children("/brokers/ids", record)
    assert seen == [["5"]]
    broker.register_broker(BrokerInfo(6, "127.0.0.1", 9006))
    assert wait_until(lambda: count() == 2) and seen[-1] == ["5", "6"]

    renewed = threading.Event()
    watcher.add_new_session_callback(renewed.set)
    expire_session(watcher, chroot)
    assert renewed.wait(15), "no new session"
    assert wait_until(lambda: count() >= 3), seen
    assert seen[-1] == ["5", "6"]

    # a callback returning False stops the watch
    broker.zk.create("/brokers/ids/stop", b"", ephemeral=True)
    broker.zk.delete("/brokers/ids/5")
    broker.zk.delete("/brokers/ids/6")
    assert wait_until(lambda: seen[-1] == ["stop"])
    n = count()
    broker.register_broker(BrokerInfo(7, "127.0.0.1", 9007))
    assert broker.get_broker(7) is not None
    time.sleep(0.5)  # the deliberate "nothing more arrives" window of a stopped watch
    assert count() == n
