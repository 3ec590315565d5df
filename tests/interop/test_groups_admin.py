"""Group administration through the clients' admin APIs, and static membership.

kafka-python's KafkaAdminClient (ListGroups with a states filter, DescribeGroups, multi-group
OffsetFetch v8, OffsetCommit for an empty group, OffsetDelete, batched LeaveGroup by
group.instance.id, DeleteGroups), confluent-kafka's AdminClient and aiokafka's
AIOKafkaAdminClient against live groups, and librdkafka static members restarting without a
rebalance.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from .support import unique_topic, wait_for
from .test_groups_scenarios import Member, new_topic, produce, settled

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

BROKER_SETTINGS = {
    "group.min.session.timeout.ms": 500,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 10,
}


@pytest.fixture
def live_group(kafka: Any) -> Any:
    """Two static confluent-kafka members of a group on a two-partition topic, 10 records read."""
    bs = kafka.bootstrap_servers
    topic = new_topic(bs, 2)
    group = unique_topic("live")
    produce(bs, topic, 2, 10)
    members = [
        Member("confluent", bs, group, topic, instance_id=f"{group}-inst-{i}") for i in range(2)
    ]
    try:
        wait_for(lambda: settled(members, 2), 30, "two members owning both partitions")
        wait_for(lambda: sum(len(m.records) for m in members) >= 10, 30, "10 records read")
        yield group, topic, members
    finally:
        for m in members:
            m.kill()


def test_kafka_python_admin(kafka: Any, live_group: Any) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, MemberToRemove
    from kafka.structs import OffsetAndMetadata

    group, topic, members = live_group
    simple = unique_topic("simple")
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        admin.alter_group_offsets(
            simple, {TopicPartition(topic, 0): OffsetAndMetadata(3, "meta", -1)}
        )
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (
            listed[group]["group_state"] == "Stable"
            and listed[group]["protocol_type"] == "consumer"
        )
        assert listed[simple]["group_state"] == "Empty" and listed[simple]["protocol_type"] == ""
        stable = {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group in stable and simple not in stable

        described = admin.describe_groups([group, "no-such-group"])
        d = described[group]
        assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == (
            "Stable",
            "consumer",
            "range",
        )
        assert sorted(m["group_instance_id"] for m in d["members"]) == [
            f"{group}-inst-0",
            f"{group}-inst-1",
        ]
        assert {m["client_id"] for m in d["members"]} == {m.client_id for m in members}
        assert all(m["client_host"] for m in d["members"])
        owned = sorted(
            p
            for m in d["members"]
            for a in m["member_assignment"]["assigned_partitions"]
            for p in a["partitions"]
        )
        assert owned == [0, 1]
        assert described["no-such-group"]["group_state"] == "Dead"

        # one OffsetFetch v8 for both groups
        offsets = admin.list_group_offsets({group: None, simple: None})
        assert {tp.partition: om.offset for tp, om in offsets[group].items()} == {0: 5, 1: 5}
        (om,) = offsets[simple].values()
        assert (om.offset, om.metadata) == (3, "meta")

        # OffsetDelete: refused for a topic the live group subscribes to, fine for the empty group
        result = admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
        assert result[TopicPartition(topic, 0)].__name__ == "GroupSubscribedToTopicError"
        result = admin.delete_group_offsets(simple, [TopicPartition(topic, 0)])
        assert result[TopicPartition(topic, 0)].__name__ == "NoError"
        assert admin.list_group_offsets({simple: None})[simple] == {}

        # DeleteGroups: a group with members cannot be deleted
        deleted = admin.delete_groups([group, simple, "no-such-group"])
        assert deleted == {
            group: "NonEmptyGroupError",
            simple: "OK",
            "no-such-group": "GroupIdNotFoundError",
        }

        # batched LeaveGroup (v3+) by group.instance.id: the static member is removed at once
        removed = admin.remove_group_members(
            group, [MemberToRemove(group_instance_id=f"{group}-inst-1")]
        )
        assert removed[f"{group}-inst-1"].__name__ == "NoError"
        unknown = admin.remove_group_members(group, [MemberToRemove(group_instance_id="nobody")])
        assert unknown["nobody"].__name__ == "UnknownMemberIdError"
    finally:
        admin.close()


def test_confluent_admin(kafka: Any, live_group: Any) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    group, topic, _members = live_group
    bs = kafka.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    simple = unique_topic("simple")
    request = ConsumerGroupTopicPartitions(
        simple, [TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 2)]
    )
    admin.alter_consumer_group_offsets([request])[simple].result(15)
    listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(15)
    assert group in {g.group_id for g in listed.valid} and simple not in {
        g.group_id for g in listed.valid
    }
    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
    assert sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions) == [
        0,
        1,
    ]
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(simple)])[
        simple
    ].result(15)
    assert sorted((tp.partition, tp.offset) for tp in fetched.topic_partitions) == [(0, 7), (1, 2)]
    # a live group's offsets cannot be changed by an admin commit
    bad = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 0)])
    try:
        result = admin.alter_consumer_group_offsets([bad])[group].result(15)
        errors = [tp.error for tp in result.topic_partitions]
    except Exception as exc:  # some librdkafka versions raise the partition error
        errors = [exc]
    assert errors and all(e is not None for e in errors), errors
    futures = admin.delete_consumer_groups([simple, group])
    futures[simple].result(15)
    with pytest.raises(Exception, match=r"NON_EMPTY_GROUP|not empty|NonEmpty"):
        futures[group].result(15)


def test_aiokafka_admin(kafka: Any, live_group: Any) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    group, topic, _members = live_group

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        await admin.start()
        try:
            groups = await admin.list_consumer_groups()
            assert (group, "consumer") in [(g[0], g[1]) for g in groups]
            described = await admin.describe_consumer_groups([group])
            (resp,) = described
            (g,) = resp.groups
            assert g[0] == 0 and g[1] == group and g[2] == "Stable"
            offsets = await admin.list_consumer_group_offsets(group)
            assert {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic} == {
                0: 5,
                1: 5,
            }
        finally:
            await admin.close()

    asyncio.run(run())


def test_static_member_restart_keeps_partitions_without_rebalance(kafka: Any) -> None:
    """librdkafka static members: a restart with the same group.instance.id within the session
    timeout gets the same partitions back and the other member never sees a rebalance."""
    bs = kafka.bootstrap_servers
    topic = new_topic(bs, 4)
    group = unique_topic("static")
    session = 6000
    a = Member("confluent", bs, group, topic, instance_id="a", session_ms=session)
    b = Member("confluent", bs, group, topic, instance_id="b", session_ms=session)
    a2 = None
    try:
        wait_for(lambda: settled([a, b], 4), 30, "two static members owning four partitions")
        produce(bs, topic, 4, 40)
        wait_for(lambda: len(a.records) + len(b.records) >= 40, 30, "40 records read")
        a_parts, b_events, b_read = a.assignment, b.rebalances(), len(b.records)
        a.stop()  # a static member does not leave the group on close
        a2 = Member("confluent", bs, group, topic, instance_id="a", session_ms=session)
        wait_for(lambda: a2.assignment, 20, "the restarted member to get its partitions")
        assert a2.assignment == a_parts
        produce(bs, topic, 4, 40, start=40)
        wait_for(
            lambda: len(a2.records) >= 20 and len(b.records) >= b_read + 20,
            30,
            "40 more records read",
        )
        # a negative check (no rebalance reaches b): one would reach b by its next heartbeat
        # (every HEARTBEAT_MS = 0.3 s), so 0.5 s is enough for it to show;
        # the records above were awaited
        time.sleep(0.5)
        assert b.rebalances() == b_events, "the other member saw a rebalance"
        # the restarted member resumed after what its first incarnation committed
        assert all(o >= 10 for _, o, _ in a2.records)
    finally:
        for m in (a, b, a2):
            if m is not None:
                m.kill()
