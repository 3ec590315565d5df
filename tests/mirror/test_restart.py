"""A flow that fails (its target went away, or refused a record) starts again in the same
process from the positions recorded on the target: it copies its topics again and drops nothing."""

from __future__ import annotations

from collections.abc import Callable

from odradek.client import Admin, NewTopic, Producer, TopicPartition
from odradek.testing.process import BrokerProcess

from .conftest import SETTINGS, MirrorProcess, base_properties, end_offsets, read_topic, wait_until

GROUP = "__mirror.A->B"


def recorded_position(bootstrap: str) -> int:
    """The flow's position for orders 0, as recorded on the target (-1: none yet)."""
    tp = TopicPartition("A.orders", 0)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_group_offsets(GROUP, [tp]).get(tp)
    return -1 if committed is None else committed.offset


def produce(bootstrap: str, first: int, last: int) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(first, last):
            p.send("orders", b"v%d" % i, partition=0)
        p.flush(10)


def test_flow_started_again_copies_its_topics(mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = BrokerProcess(SETTINGS), BrokerProcess(SETTINGS)
    a.start()
    try:
        b.start()
        try:
            produce(a.bootstrap_servers, 0, 50)
            # the target's producer gives records up after 2 s (delivery.timeout.ms), not 120 s
            m = mirrors(base_properties(a, b, **{
                "A->B.topics": "orders", "emit.checkpoints.enabled": "false",
                "B.producer.delivery.timeout.ms": "2000", "B.producer.request.timeout.ms": "1000",
            })).start()
            wait_until(lambda: end_offsets(b.bootstrap_servers, "A.orders").get(0, 0) >= 50, 60, "first copy", m.log)
            # nothing left to record when the target dies: what fails the flow is the copy below
            wait_until(lambda: recorded_position(b.bootstrap_servers) >= 50, 30, "the positions recorded", m.log)
            b.kill()
            produce(a.bootstrap_servers, 50, 100)  # records for the dead target
            wait_until(lambda: "retrying in" in m.log(), 60, "the flow failing", m.log)
            b.restart(same_port=True)
            produce(a.bootstrap_servers, 100, 150)
            wait_until(lambda: end_offsets(b.bootstrap_servers, "A.orders").get(0, 0) >= 150, 60, "the copy after the restart", m.log)
            assert m.terminate() == 0
        finally:
            b.close()
    finally:
        a.close()


def test_a_refused_record_is_never_dropped_without_exactly_once(clusters: tuple[BrokerProcess, BrokerProcess],
                                                                 mirrors: Callable[..., MirrorProcess]) -> None:
    """At least once, the remote topic refuses a record (max.message.bytes): the flow fails and
    starts again from positions that only ever cover acknowledged records, so once the target
    accepts it, every record is there (some perhaps twice), in order."""
    a, b = clusters
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("refused.events", 1, 1)])
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("A.refused.events", 1, 1, {"max.message.bytes": "2000"})])
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        p.send("refused.events", b"small-1").result(10)
        p.send("refused.events", b"x" * 5000).result(10)
        p.send("refused.events", b"small-2").result(10)
    m = mirrors(base_properties(a, b, **{"A->B.topics": r"refused\..*", "emit.checkpoints.enabled": "false"}))
    m.start()
    wait_until(lambda: m.log().count("retrying in") >= 2, 60, "two refused attempts", m.log)
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        admin.alter_configs({"A.refused.events": {"max.message.bytes": "100000"}})
    wait_until(lambda: b"small-2" in [r.value for r in read_topic(b.bootstrap_servers, "A.refused.events").get(0, [])], 60,
               "the records after the refused one", m.log)
    values = [r.value for r in read_topic(b.bootstrap_servers, "A.refused.events")[0]]
    assert b"x" * 5000 in values
    assert values.index(b"small-2") > values.index(b"x" * 5000)
    assert m.terminate() == 0
