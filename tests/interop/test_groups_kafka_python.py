"""Consumer groups with kafka-python against odradek (scenarios in test_groups_scenarios.py)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .test_groups_scenarios import GroupScenarios, _unstick_kafka_python, new_topic

pytestmark = pytest.mark.interop

# Short session timeouts (a killed member is noticed in seconds), the first rebalance at once,
# and ten __consumer_offsets partitions (the restart test reloads them all).
BROKER_SETTINGS = {
    "group.min.session.timeout.ms": 500,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 10,
}


class TestKafkaPythonGroups(GroupScenarios):
    client = "kafka-python"


# -- kafka-python 3.0's lost join (client side) ----------------------------------------------
#
# A kafka-python 3.0 group leader rejoins by itself when the topic metadata it assigned from
# changes (ConsumerCoordinator.need_rejoin: _assignment_snapshot != _metadata_snapshot). If
# poll()'s timeout ends while that JoinGroup is in flight, join_group_async returns and leaves
# _join_task running; the task's _perform_assignment then sets _assignment_snapshot =
# _metadata_snapshot, so need_rejoin() is False again, and neither ConsumerCoordinator.poll
# (`if self.need_rejoin():`) nor join_group_async (`while self.need_rejoin():`) ever looks at
# the finished task: _on_join_complete never runs, the member stays "rebalancing" with its
# heartbeat disabled and applies no assignment, although the coordinator answered JoinGroup
# and SyncGroup correctly. The Java client's loop condition is rejoinNeededOrPending() =
# rejoinNeeded || joinFuture != null, which does finish a pending join. These tests make it
# happen on purpose: the leader's rejoin is parked (as Kafka's GroupCoordinator parks it)
# until the other member, which is not polled meanwhile, rejoins.

_KP_CONFIG: dict[str, Any] = {
    "metadata_max_age_ms": 300,
    "session_timeout_ms": 10_000,
    "heartbeat_interval_ms": 200,
    "enable_auto_commit": False,
}


class _NoNeedRejoinChatter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("need_rejoin")


@pytest.fixture(autouse=True)
def _coordinator_debug_log(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """kafka-python's group coordinator at DEBUG in a failing test's report (its JoinGroup,
    SyncGroup and assignment steps), without need_rejoin()'s line per call."""
    chatter = _NoNeedRejoinChatter()
    consumer_coordinator = logging.getLogger("kafka.coordinator.consumer")
    consumer_coordinator.addFilter(chatter)
    caplog.set_level(logging.DEBUG, logger="kafka.coordinator")
    yield
    consumer_coordinator.removeFilter(chatter)


def _state(consumer: Any) -> str:
    coordinator = consumer._coordinator
    task = coordinator._join_task
    return (
        f"{consumer.config['client_id']}: partitions {_partitions(consumer)}, "
        f"{coordinator.state}, {coordinator._generation}, leader={coordinator._is_leader}, "
        f"join task {None if task is None else task.is_done}"
    )


def _partitions(consumer: Any) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


def _poll_until(consumers: list[Any], done: Any, seconds: float, unstick: bool) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            if unstick:  # a join that finished while another consumer polled
                _unstick_kafka_python(c)
            c.poll(timeout_ms=50)
            if unstick:
                _unstick_kafka_python(c)
        if done():
            return True
    return False


def _members_a_and_b(bootstrap: str, prefix: str) -> tuple[Any, Any, Any, str, str]:
    """Consumers A and B (not yet polled) of a new group on a new 2-partition topic, and an
    admin client: (a, b, admin, topic, group)."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient

    topic = new_topic(bootstrap, 2, prefix=prefix)
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    kw = dict(bootstrap_servers=bootstrap, group_id=group, **_KP_CONFIG)
    a = KafkaConsumer(topic, client_id="A", **kw)
    b = KafkaConsumer(topic, client_id="B", **kw)
    return a, b, KafkaAdminClient(bootstrap_servers=bootstrap), topic, group


def _leader_rejoin_parked(bootstrap: str, unstick: bool) -> tuple[Any, Any, Any, str, str]:
    """Leader A and follower B on a 2-partition topic, then 4 partitions; A polls alone until
    its rejoin is in flight, then only B polls (so A's join completes while A is not polling).
    ``unstick``: apply _unstick_kafka_python from the partition change on. Returns (a, b,
    admin, topic, group)."""
    from kafka.admin import NewPartitions
    from kafka.coordinator.base import MemberState

    a, b, admin, topic, group = _members_a_and_b(bootstrap, "kp-race")
    try:
        # the set-up joins can lose a join the same way (the topic's metadata arriving after the
        # first join): always unstick them
        assert _poll_until([a], lambda: _partitions(a) == [0, 1], 20, True), _state(a)
        both = _poll_until(
            [a, b], lambda: _partitions(a) == [0] and _partitions(b) == [1], 20, True
        )
        assert both, (_state(a), _state(b), _broker_assignment(admin, group, topic))
        assert a._coordinator._is_leader
        admin.create_partitions({topic: NewPartitions(4)})
        # A sees 4 partitions and rejoins; its JoinGroup waits for B, so poll() times out with
        # the join in flight
        assert _poll_until(
            [a],
            lambda: (
                a._coordinator.state is MemberState.REBALANCING
                and a._coordinator._join_task is not None
            ),
            20,
            unstick,
        )
        for _ in range(3):
            a.poll(timeout_ms=50)
        assert not a._coordinator._join_task.is_done
        # B learns of the rebalance from its heartbeat, rejoins, and gets its new assignment:
        # A's join (and its leader SyncGroup) finished meanwhile, while A was not polling
        assert _poll_until([b], lambda: _partitions(b) == [2, 3], 20, unstick)
    except BaseException:  # a failed set-up must not leave the clients' threads running
        for client in (a, b, admin):
            client.close()
        raise
    return a, b, admin, topic, group


def _broker_assignment(admin: Any, group: str, topic: str) -> tuple[str, dict[str, list[int]]]:
    described = admin.describe_groups([group])[group]
    out: dict[str, list[int]] = {}
    for m in described["members"]:
        parts = m["member_assignment"]["assigned_partitions"] if m["member_assignment"] else []
        out[m["client_id"]] = sorted(
            p for t in parts if t["topic"] == topic for p in t["partitions"]
        )
    return described["group_state"], out


@pytest.mark.timeout(90)
def test_kafka_python_leader_loses_a_finished_join_client_side(kafka: Any) -> None:
    """Without the workaround: the coordinator's view is right (Stable, A holds 0-1, B 2-3)
    while kafka-python's A never applies the join it got. Skipped once kafka-python applies
    it (then _unstick_kafka_python can go)."""
    if kafka.name == "tansu":
        pytest.skip("Tansu has no CreatePartitions")
    from kafka.coordinator.base import MemberState

    a, b, admin, topic, group = _leader_rejoin_parked(kafka.bootstrap_servers, unstick=False)
    try:
        applied = _poll_until([a, b], lambda: _partitions(a) == [0, 1], 2, unstick=False)
        if applied:
            pytest.skip("this kafka-python applies a join that finished between polls")
        coordinator = a._coordinator
        assert coordinator.state is MemberState.REBALANCING
        assert coordinator._join_task.is_done and coordinator._join_task.succeeded()
        assert not coordinator.need_rejoin()
        assert _broker_assignment(admin, group, topic) == ("Stable", {"A": [0, 1], "B": [2, 3]})
    finally:
        a.close()
        b.close()
        admin.close()


@pytest.mark.timeout(90)
def test_kafka_python_leader_rejoin_with_workaround(kafka: Any) -> None:
    """With _unstick_kafka_python, A rejoins once more and both members own their partitions."""
    if kafka.name == "tansu":
        pytest.skip("Tansu has no CreatePartitions")
    a, b, admin, topic, group = _leader_rejoin_parked(kafka.bootstrap_servers, unstick=True)
    try:
        assert _poll_until(
            [a, b], lambda: _partitions(a) == [0, 1] and _partitions(b) == [2, 3], 20, True
        ), (_partitions(a), _partitions(b))
        assert _broker_assignment(admin, group, topic) == ("Stable", {"A": [0, 1], "B": [2, 3]})
    finally:
        a.close()
        b.close()
        admin.close()


@pytest.mark.timeout(90)
def test_unstick_applies_a_finished_join_without_another_rebalance(kafka: Any) -> None:
    """The workaround itself, made deterministic: A's join finished while A was not polling
    (as in the test above); one _unstick_kafka_python call applies it, with A alone polling
    and no further JoinGroup. The earlier workaround (ask for a rejoin) started another
    rebalance here, parked until B rejoins - B is not polled, so A never got [0, 1]; with
    both polled it livelocked the same way (the ``([0], [2, 3])`` failure)."""
    if kafka.name == "tansu":
        pytest.skip("Tansu has no CreatePartitions")
    from kafka.coordinator.base import MemberState

    a, b, admin, topic, group = _leader_rejoin_parked(kafka.bootstrap_servers, unstick=False)
    try:
        task = a._coordinator._join_task
        if task is None or not task.is_done:
            pytest.skip("this kafka-python applies a join that finished between polls")
        generation = a._coordinator._generation.generation_id
        _unstick_kafka_python(a)
        assert _partitions(a) == [0, 1]
        assert a._coordinator.state is MemberState.STABLE
        assert _poll_until([a], lambda: False, 1, unstick=True) is False  # a second of polls
        assert _partitions(a) == [0, 1] and _partitions(b) == [2, 3]
        assert a._coordinator._generation.generation_id == generation  # no new rebalance
        assert _broker_assignment(admin, group, topic) == ("Stable", {"A": [0, 1], "B": [2, 3]})
    finally:
        a.close()
        b.close()
        admin.close()


@pytest.mark.timeout(90)
def test_unstick_applies_a_join_that_answered_a_heartbeats_rebalance(kafka: Any) -> None:
    """kafka-python's own way of losing a finished join, made deterministic: A (the leader,
    alone with [0, 1]) learns of B's join from a heartbeat's REBALANCE_IN_PROGRESS, which sets
    ``rejoin_needed``; one ``poll(timeout_ms=0)`` sends A's JoinGroup; the join and A's leader
    SyncGroup finish while only B polls. ``rejoin_needed`` is still True (only
    ``join_group_async`` clears it, after reading the task), so A's next poll would throw the
    finished join away and start another rebalance (leader JoinGroup in Stable) - with A and B
    polled in turn under load, again and again (the set-up's 74 generations in 20 s).
    _unstick_kafka_python applies it instead: A [0], B [1], no further generation."""
    from kafka.coordinator.base import MemberState

    from odradek.testing.helpers import wait_until

    bootstrap = kafka.bootstrap_servers
    a, b, admin, topic, group = _members_a_and_b(bootstrap, "kp-hb")
    try:
        assert _poll_until([a], lambda: _partitions(a) == [0, 1], 20, True), _state(a)
        # B's JoinGroup (the one with its member id) starts the rebalance and waits for A,
        # which is not polled
        assert _poll_until(
            [b],
            lambda: _broker_assignment(admin, group, topic)[0] == "PreparingRebalance",
            20,
            False,
        ), _state(b)
        wait_until(lambda: a._coordinator.rejoin_needed, 10, "A's heartbeat: REBALANCE_IN_PROGRESS")
        a.poll(timeout_ms=0)  # sends A's JoinGroup; cannot wait for its answer
        task = a._coordinator._join_task
        assert task is not None, _state(a)
        assert _poll_until([b], lambda: _partitions(b) == [1], 20, False), _state(b)
        wait_until(lambda: task.is_done, 10, "A's join and leader SyncGroup")
        assert task.succeeded(), _state(a)
        if not a._coordinator.need_rejoin():
            pytest.skip("this kafka-python clears rejoin_needed when a join finishes")
        generation = a._coordinator._generation.generation_id
        _unstick_kafka_python(a)
        assert _partitions(a) == [0], _state(a)
        assert a._coordinator.state is MemberState.STABLE and not a._coordinator.need_rejoin()
        assert _poll_until([a, b], lambda: False, 1, unstick=True) is False  # a second of polls
        assert _partitions(a) == [0] and _partitions(b) == [1], (_state(a), _state(b))
        assert a._coordinator._generation.generation_id == generation  # no new rebalance
        assert b._coordinator._generation.generation_id == generation
        assert _broker_assignment(admin, group, topic) == ("Stable", {"A": [0], "B": [1]})
    finally:
        a.close()
        b.close()
        admin.close()
