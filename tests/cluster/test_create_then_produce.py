"""A Produce sent to a topic's only replica right after CreateTopics answered through another
broker: that broker may not know the topic yet (it learns of it from the controller's
LeaderAndIsr and UpdateMetadata). The client gets Kafka's retriable errors
(UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER) until the broker leads the partition,
never UNKNOWN_SERVER_ERROR, and the topic keeps the assignment it was created with."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from tests.broker.wire import Wire, produce_request, req

from odradek.protocol.records import build_batch

from .harness import Cluster

ROUNDS = 12
"""Topics created; before the fix about half of them got UNKNOWN_SERVER_ERROR here."""
RETRIABLE = {3, 6}  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER


def test_produce_at_once_after_create_gets_only_retriable_errors(cluster3: Cluster) -> None:
    one = cluster3.brokers[1].bootstrap_servers
    three = cluster3.brokers[3].bootstrap_servers
    batch = build_batch([(None, b"x" * 100, (), int(time.time() * 1000))])
    deadline = time.monotonic() + 60
    seen: dict[int, int] = {}
    with Wire(one) as w1, Wire(three) as w3:
        for _ in range(ROUNDS):
            topic = f"cp-{uuid.uuid4().hex[:8]}"
            assignment = req(19, 7, "CreatableReplicaAssignment", partition_index=0,
                             broker_ids=(3,))  # fmt: skip
            creatable = req(19, 7, "CreatableTopic", name=topic, num_partitions=-1,
                            replication_factor=-1, assignments=(assignment,), configs=())  # fmt: skip
            created = w1.call(
                req(19, 7, topics=(creatable,), timeout=timedelta(seconds=15), validate_only=False)
            )
            assert int(created.topics[0].error_code) == 0
            for _attempt in range(2000):  # bounded in count and by the deadline
                resp = w3.call(produce_request(topic, 0, batch))
                code = int(resp.responses[0].partition_responses[0].error_code)
                seen[code] = seen.get(code, 0) + 1
                if code == 0:
                    break
                assert code in RETRIABLE, (topic, code, cluster3.logs())
                assert time.monotonic() < deadline, (topic, seen)
                time.sleep(0.005)
            else:
                raise AssertionError(f"{topic}: never produced ({seen})")
            # broker 3 leads once LeaderAndIsr came; its metadata follows with UpdateMetadata
            md = cluster3.wait_metadata(lambda m, t=topic: any(x.name == t for x in m.topics), 15, 3)
            leaders = [p.leader_id for t in md.topics if t.name == topic for p in t.partitions]
            assert leaders == [3], (topic, leaders)
