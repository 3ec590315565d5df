"""KIP-345 static members and KIP-429 cooperative rebalancing with confluent-kafka (librdkafka)
members in their own processes, against a broker with group.initial.rebalance.delay.ms=0.

* Every static member restarts in turn (so the group leader restarts too): each gets its
  partitions back, in the same generation, and no other member sees a rebalance.
* A second process with a live member's group.instance.id fences the first one
  (FENCED_INSTANCE_ID is fatal for librdkafka) and takes over its partitions.
* cooperative-sticky: members joining one after the other; a member never gives up a partition
  it keeps (only increments are revoked) and every record is read.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from .support import unique_topic, wait_for
from .test_groups_scenarios import Member, new_topic, produce, settled

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

BROKER_SETTINGS = {
    "group.min.session.timeout.ms": 500,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 10,
}


def _describe(bootstrap: str, group: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(15)


def test_every_static_member_restarts_without_a_rebalance(kafka: Any) -> None:
    bs = kafka.bootstrap_servers
    topic = new_topic(bs, 4)
    group = unique_topic("static-restart")
    session = 6000
    members = {
        iid: Member("confluent", bs, group, topic, instance_id=iid, session_ms=session)
        for iid in ("a", "b")
    }
    started = list(members.values())
    try:
        wait_for(lambda: settled(list(members.values()), 4), 30, "two static members settled")
        before = {iid: m.assignment for iid, m in members.items()}
        for iid in ("a", "b"):  # one of them is the leader
            other = members["b" if iid == "a" else "a"]
            other_events = other.rebalances()
            members[iid].stop()  # a static member does not send LeaveGroup on close
            fresh = Member("confluent", bs, group, topic, instance_id=iid, session_ms=session)
            started.append(fresh)
            members[iid] = fresh
            wait_for(lambda f=fresh: f.assignment, 20, f"restarted {iid} to get its partitions")
            assert fresh.assignment == before[iid]
            # a rebalance would reach the other member by its next heartbeat (every 0.3 s);
            # the restarted member's assignment was awaited above, so 0.6 s more is enough
            time.sleep(0.6)
            assert other.rebalances() == other_events, f"{iid}'s restart caused a rebalance"
        d = _describe(bs, group)
        assert str(d.state).endswith("STABLE")
        assert sorted(m.group_instance_id for m in d.members) == ["a", "b"]
        produce(bs, topic, 4, 20)
        wait_for(lambda: sum(len(m.records) for m in members.values()) >= 20, 30, "20 records read")
    finally:
        for m in started:
            m.kill()


def test_a_second_process_with_the_same_instance_id_fences_the_first(kafka: Any) -> None:
    bs = kafka.bootstrap_servers
    topic = new_topic(bs, 2)
    group = unique_topic("static-fenced")
    first = Member("confluent", bs, group, topic, instance_id="x", session_ms=6000)
    second = None
    try:
        wait_for(lambda: first.assignment == {0, 1}, 30, "the first member owns both partitions")
        second = Member("confluent", bs, group, topic, instance_id="x", session_ms=6000)
        wait_for(lambda: second.assignment == {0, 1}, 30, "the second takes the partitions over")
        wait_for(
            lambda: any(e["fatal"] for e in first.errors()), 30, "the first member to be fenced"
        )
        fatal = next(e for e in first.errors() if e["fatal"])
        assert "fenced" in fatal["text"].lower(), fatal
        assert second.errors() == []
    finally:
        for m in (first, second):
            if m is not None:
                m.kill()


def test_cooperative_sticky_members_keep_their_partitions_across_rebalances(kafka: Any) -> None:
    bs = kafka.bootstrap_servers
    topic = new_topic(bs, 6)
    group = unique_topic("coop")
    expected = produce(bs, topic, 6, 60)
    coop = "cooperative-sticky"
    members = [Member("confluent", bs, group, topic, strategy=coop, session_ms=6000)]
    try:
        wait_for(lambda: members[0].assignment == set(range(6)), 30, "a owns six partitions")
        for n in (2, 3):
            held = [m.assignment for m in members]
            members.append(Member("confluent", bs, group, topic, strategy=coop, session_ms=6000))
            wait_for(lambda n=n: settled(members, 6), 40, f"{n} members sharing six partitions")
            wait_for(
                lambda n=n: all(len(m.assignment) == 6 // n for m in members), 20, "an even split"
            )
            for m, had in zip(members, held, strict=False):
                # sticky: what a member still owns it owned before; cooperative: it only ever
                # gave up partitions that moved (no revoke-everything step)
                assert m.assignment <= had
                gave_up = {
                    p for e in m.snapshot() if e["event"] == "removed" for p in e["partitions"]
                }
                assert not (gave_up & m.assignment), (m.client_id, gave_up, m.assignment)
        produce(bs, topic, 6, 60, start=60)
        expected |= {(i % 6, f"r{i}") for i in range(60, 120)}
        wait_for(
            lambda: {(p, v) for m in members for p, _, v in m.records} >= expected,
            40,
            "every record read",
        )
        assert all(m.errors() == [] for m in members)
    finally:
        for m in members:
            m.kill()
