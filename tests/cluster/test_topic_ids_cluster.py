"""Topic ids across three real brokers on ZooKeeper (KIP-516, KIP-951): every replica's
directory records the id ZooKeeper holds, a follower answers another replica's Fetch 16 by id
with NOT_LEADER_OR_FOLLOWER and the current leader's id, epoch and endpoint, and the leader
serves it; a consumer's Fetch 16 is served by a follower too (KIP-392)."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.wire import Wire, metadata_request, ms, req
from odradek.cluster.zk import KafkaZkClient
from odradek.storage.partition_metadata import read_partition_metadata

from .conftest import Cluster

pytestmark = pytest.mark.interop

NOT_LEADER_OR_FOLLOWER = 6


def _fetch_v16(topic_id: uuid.UUID, replica_id: int = -1) -> object:
    part = req(1, 16, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    return req(
        1,
        16,
        replica_state=req(1, 16, "ReplicaState", replica_id=replica_id, replica_epoch=-1),
        max_wait=ms(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(req(1, 16, "FetchTopic", topic_id=topic_id, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_replicas_record_the_zookeeper_topic_id_and_followers_name_the_leader(
    cluster3: Cluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    for f in admin.create_topics([NewTopic("tids", 1, 3)], request_timeout=30).values():
        f.result(timeout=30)
    md = cluster3.wait_every_broker(
        lambda md: (p := cluster3.partitions(md, "tids")) and len(p[0].isr_nodes) == 3
    )
    zk = KafkaZkClient(cluster3.zookeeper.connect_string + cluster3.chroot)
    zk.start()
    try:
        text = json.loads(zk.zk.get("/brokers/topics/tids")[0])["topic_id"]
    finally:
        zk.close()
    zk_id = uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    leader = cluster3.partitions(next(iter(md.values())), "tids")[0].leader_id
    for broker in cluster3.brokers.values():
        assert read_partition_metadata(broker.data_dir / "tids-0") == zk_id
    with Wire(cluster3.brokers[leader].bootstrap_servers) as wire:
        (t,) = wire.call(metadata_request(["tids"], allow_auto=False)).topics
        assert t.topic_id == zk_id
        r = wire.call(_fetch_v16(zk_id))
        assert int(r.responses[0].partitions[0].error_code) == 0
        assert r.node_endpoints == ()
    follower, other = (i for i in cluster3.brokers if i != leader)
    with Wire(cluster3.brokers[follower].bootstrap_servers) as wire:
        consumer = wire.call(_fetch_v16(zk_id))
        r = wire.call(_fetch_v16(zk_id, replica_id=other))
    assert int(consumer.responses[0].partitions[0].error_code) == 0
    (p,) = r.responses[0].partitions
    assert int(p.error_code) == NOT_LEADER_OR_FOLLOWER
    assert (int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)) == (leader, 0)
    assert [(int(n.node_id), n.port) for n in r.node_endpoints] == [
        (leader, cluster3.brokers[leader].port)
    ]
    for f in admin.delete_topics(["tids"], request_timeout=30).values():
        f.result(timeout=30)
    cluster3.wait_every_broker(lambda md: not cluster3.partitions(md, "tids"))
