"""Topic ids over the wire (KIP-516) and the newest request versions, with golden frames built
by kio against a real broker process: Fetch 13-17 name topics by id, Metadata answers ids, a
deleted (or deleted and re-created) topic's old id gets UNKNOWN_TOPIC_ID; Produce 11,
JoinGroup 8-9 and InitProducerId 5 answer as their previous versions do."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from odradek.storage.partition_metadata import read_partition_metadata
from odradek.testing.process import BrokerProcess

from .test_apis import batch, produce, topic_name
from .wire import (
    Wire,
    create,
    fetched_values,
    init_producer_id_request,
    metadata_request,
    ms,
    produce_request,
    req,
)

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"num.partitions": 1}
UNKNOWN_TOPIC_ID = 100
MEMBER_ID_REQUIRED = 79


@pytest.fixture
def wire(broker: BrokerProcess) -> Iterator[Wire]:
    with Wire(broker.bootstrap_servers) as w:
        yield w


def topic_id(wire: Wire, name: str) -> uuid.UUID:
    r = wire.call(metadata_request([name], version=12, allow_auto=False))
    (t,) = r.topics
    assert int(t.error_code) == 0 and t.topic_id is not None
    assert t.topic_id != uuid.UUID(int=0)
    return t.topic_id


def fetch_by_id(
    tid: uuid.UUID,
    partitions: dict[int, int],
    *,
    version: int,
    replica_id: int = -1,
    isolation_level: int = 0,
) -> object:
    parts = tuple(
        req(1, version, "FetchPartition", partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
        for p, o in partitions.items()
    )
    ft = req(1, version, "FetchTopic", topic_id=tid, partitions=parts)
    extra: dict[str, object] = {}
    if version >= 15:
        extra["replica_state"] = req(1, version, "ReplicaState", replica_id=replica_id)
    return req(
        1,
        version,
        replica_id=replica_id,
        max_wait=ms(0),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(ft,),
        forgotten_topics_data=(),
        rack_id="",
        **extra,
    )


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_fetch_by_topic_id(wire: Wire, version: int) -> None:
    t = topic_name("byid")
    create(wire, t, 2)
    produce(wire, t, batch(b"a", b"b"), partition=0)
    produce(wire, t, batch(b"c"), partition=1)
    tid = topic_id(wire, t)
    r = wire.call(fetch_by_id(tid, {0: 0, 1: 1}, version=version))
    (topic,) = r.responses
    assert topic.topic_id == tid
    got = {
        int(p.partition_index): (int(p.error_code), fetched_values(p.records))
        for p in topic.partitions
    }
    assert got == {0: (0, [b"a", b"b"]), 1: (0, [])}
    assert int(topic.partitions[0].high_watermark) == 2


def test_each_partition_directory_holds_its_topic_id(wire: Wire, broker: BrokerProcess) -> None:
    t = topic_name("pm")
    create(wire, t, 3)
    tid = topic_id(wire, t)
    for p in range(3):
        assert read_partition_metadata(broker.data_dir / f"{t}-{p}") == tid


@pytest.mark.parametrize("version", [13, 16, 17])
def test_fetch_unknown_topic_id(wire: Wire, version: int) -> None:
    stranger = uuid.uuid4()
    r = wire.call(fetch_by_id(stranger, {0: 0, 3: 0}, version=version))
    (topic,) = r.responses
    assert topic.topic_id == stranger
    assert [(int(p.partition_index), int(p.error_code)) for p in topic.partitions] == [
        (0, UNKNOWN_TOPIC_ID),
        (3, UNKNOWN_TOPIC_ID),
    ]


def test_recreated_topic_gets_a_new_id_and_the_old_one_is_unknown(
    wire: Wire, broker: BrokerProcess
) -> None:
    t = topic_name("again")
    create(wire, t)
    produce(wire, t, batch(b"first"))
    old = topic_id(wire, t)
    assert read_partition_metadata(broker.data_dir / f"{t}-0") == old
    r = wire.call(
        req(
            20,
            6,
            topics=(req(20, 6, "DeleteTopicState", name=t, topic_id=None),),
            timeout=ms(10000),
        )
    )
    assert int(r.responses[0].error_code) == 0
    create(wire, t)
    produce(wire, t, batch(b"second"))
    new = topic_id(wire, t)
    assert new != old
    assert read_partition_metadata(broker.data_dir / f"{t}-0") == new
    r = wire.call(fetch_by_id(old, {0: 0}, version=16))
    assert int(r.responses[0].partitions[0].error_code) == UNKNOWN_TOPIC_ID
    r = wire.call(fetch_by_id(new, {0: 0}, version=16))
    assert fetched_values(r.responses[0].partitions[0].records) == [b"second"]
    # Metadata v10+ looks a topic up by id as well
    mr = req(3, 12, "MetadataRequestTopic", name=None, topic_id=old)
    r = wire.call(
        req(
            3,
            12,
            topics=(mr,),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    assert int(r.topics[0].error_code) == UNKNOWN_TOPIC_ID


def test_produce_v11(wire: Wire) -> None:
    t = topic_name("p11")
    create(wire, t)
    r = wire.call(produce_request(t, 0, batch(b"x", b"y"), acks=-1, version=11))
    p = r.responses[0].partition_responses[0]
    assert (int(p.error_code), int(p.base_offset)) == (0, 0)
    r = wire.call(fetch_by_id(topic_id(wire, t), {0: 0}, version=17))
    assert fetched_values(r.responses[0].partitions[0].records) == [b"x", b"y"]


def test_init_producer_id_v5(wire: Wire) -> None:
    r = wire.call(init_producer_id_request(version=5))
    assert int(r.error_code) == 0 and int(r.producer_id) >= 0 and int(r.producer_epoch) == 0


@pytest.mark.parametrize("version", [8, 9])
def test_join_group_v8_v9(wire: Wire, version: int) -> None:
    group = topic_name("g")
    protocol = req(11, version, "JoinGroupRequestProtocol", name="range", metadata=b"\x00\x01")

    def join(member_id: str) -> object:
        return wire.call(
            req(
                11,
                version,
                group_id=group,
                session_timeout=ms(10000),
                rebalance_timeout=ms(10000),
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(protocol,),
                reason="test",
            )
        )

    first = join("")
    assert int(first.error_code) == MEMBER_ID_REQUIRED and first.member_id
    r = join(first.member_id)
    assert int(r.error_code) == 0
    assert r.leader == first.member_id and int(r.generation_id) == 1
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [first.member_id]
    assert version < 9 or r.skip_assignment is False


def test_a_transaction_at_the_newest_versions(wire: Wire) -> None:
    """InitProducerId 5, AddPartitionsToTxn 5 (the batched form), Produce 11,
    AddOffsetsToTxn 4, TxnOffsetCommit 4, EndTxn 4, then a read_committed Fetch 17."""
    t = topic_name("txn")
    create(wire, t)
    txn_id, group = topic_name("tx"), topic_name("txg")
    r = wire.call(
        req(
            22,
            5,
            transactional_id=txn_id,
            transaction_timeout=ms(30000),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    assert int(r.error_code) == 0
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    topic = req(24, 5, "AddPartitionsToTxnTopic", name=t, partitions=(0,))
    tx = req(
        24,
        5,
        "AddPartitionsToTxnTransaction",
        transactional_id=txn_id,
        producer_id=pid,
        producer_epoch=epoch,
        verify_only=False,
        topics=(topic,),
    )
    r = wire.call(req(24, 5, transactions=(tx,)))
    (result,) = r.results_by_transaction
    assert [
        (p.partition_index, int(p.partition_error_code))
        for tr in result.topic_results
        for p in tr.results_by_partition
    ] == [(0, 0)]
    data = batch(
        b"t1", b"t2", producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
    )
    pd = req(0, 11, "PartitionProduceData", index=0, records=data)
    td = req(0, 11, "TopicProduceData", name=t, partition_data=(pd,))
    r = wire.call(req(0, 11, transactional_id=txn_id, acks=-1, timeout=ms(5000), topic_data=(td,)))
    assert int(r.responses[0].partition_responses[0].error_code) == 0
    r = wire.call(
        req(25, 4, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group)
    )
    assert int(r.error_code) == 0
    p = req(
        28,
        4,
        "TxnOffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=2,
        committed_leader_epoch=-1,
        committed_metadata="",
    )
    r = wire.call(
        req(
            28,
            4,
            transactional_id=txn_id,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(req(28, 4, "TxnOffsetCommitRequestTopic", name=t, partitions=(p,)),),
        )
    )
    assert int(r.topics[0].partitions[0].error_code) == 0
    r = wire.call(
        req(26, 4, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=True)
    )
    assert int(r.error_code) == 0
    r = wire.call(fetch_by_id(topic_id(wire, t), {0: 0}, version=17, isolation_level=1))
    (part,) = r.responses[0].partitions
    assert int(part.last_stable_offset) == 3  # two records and the commit marker
    assert fetched_values(part.records)[:2] == [b"t1", b"t2"]
