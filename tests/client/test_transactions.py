"""odradek.client's transactional producer and read_committed consumer against a real broker."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.client import (
    Admin,
    Consumer,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    ProducerFencedError,
    TopicPartition,
    TransactionStateError,
)

BROKER_SETTINGS = {"transaction.state.log.num.partitions": 3, "num.partitions": 1}

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bs(broker: Any) -> str:
    return str(broker.bootstrap_servers)


def _topic(bs: str, name: str, partitions: int) -> str:
    with Admin({"bootstrap.servers": bs}) as a:
        a.create_topics([NewTopic(name, partitions)])
    return name


def _read_all(bs: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every record (values) up to the end a consumer of that isolation level may read."""
    cfg = {"bootstrap.servers": bs, "isolation.level": isolation, "enable.auto.commit": False}
    with Consumer(cfg) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)  # read_committed: the LSO
        out: list[bytes] = []
        for _ in range(200):
            if all(c.position(tp) >= ends[tp] for tp in tps):
                return out
            out.extend(r.value for r in c.poll(0.5))
        raise AssertionError(f"did not reach {ends}")


def test_commit_and_abort_seen_by_isolation_level(bs: str) -> None:
    topic = _topic(bs, "tx-basic", 2)
    with Producer({"bootstrap.servers": bs, "transactional.id": "tx-basic-1", "linger.ms": 1}) as p:
        with pytest.raises(TransactionStateError):
            p.send(topic, b"outside")  # before init / begin
        p.init_transactions()
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.send(topic, b"outside")
        p.begin_transaction()
        for i in range(10):
            p.send(topic, b"c%d" % i, partition=i % 2)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(5):
            p.send(topic, b"a%d" % i, partition=i % 2)
        p.flush()  # written to the log, then aborted
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"c10", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.commit_transaction()  # an empty transaction: nothing to end
    committed = _read_all(bs, topic, 2, "read_committed")
    assert sorted(committed) == sorted([b"c%d" % i for i in range(11)])
    everything = _read_all(bs, topic, 2, "read_uncommitted")
    assert sorted(everything) == sorted([b"c%d" % i for i in range(11)] + [b"a%d" % i for i in range(5)])


def test_open_transaction_holds_back_read_committed_and_fencing(bs: str) -> None:
    topic = _topic(bs, "tx-fence", 1)
    cfg = {"bootstrap.servers": bs, "transactional.id": "tx-fence-1", "linger.ms": 1}
    old = Producer(cfg)
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie").result(10)
        with Admin({"bootstrap.servers": bs}) as a:
            lso = a.list_offsets({(topic, 0): "latest"}, read_committed=True)[TopicPartition(topic, 0)][0]
            hw = a.list_offsets({(topic, 0): "latest"})[TopicPartition(topic, 0)][0]
        assert (lso, hw) == (0, 1)  # the open transaction holds the LSO back
        with Producer(cfg) as new:
            new.init_transactions()  # fences `old` and aborts its transaction
            new.begin_transaction()
            new.send(topic, b"fresh")
            new.commit_transaction()
        with pytest.raises(ProducerFencedError, match="fenced"):
            old.commit_transaction()
        with pytest.raises(ProducerFencedError):  # fatal: every later call fails the same way
            old.begin_transaction()
    finally:
        old.close(5)
    assert _read_all(bs, topic, 1, "read_committed") == [b"fresh"]


def test_consume_transform_produce_offsets_commit_with_the_transaction(bs: str) -> None:
    src = _topic(bs, "tx-src", 1)
    dst = _topic(bs, "tx-dst", 1)
    with Producer({"bootstrap.servers": bs}) as p:
        for i in range(20):
            p.send(src, b"%d" % i)
    ccfg = {"bootstrap.servers": bs, "group.id": "ctp", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "isolation.level": "read_committed"}
    with Consumer(ccfg, src) as c, Producer({"bootstrap.servers": bs, "transactional.id": "ctp-1"}) as p:
        p.init_transactions()
        got: list[Any] = []
        for _ in range(100):
            got.extend(c.poll(0.5))
            if len(got) >= 10:
                break
        first = got[:10]
        # transaction 1: aborted -> neither the output nor the offsets count
        p.begin_transaction()
        for r in first:
            p.send(dst, b"out-" + r.value)
        p.send_offsets_to_transaction({TopicPartition(src, 0): first[-1].offset + 1}, c.consumer_group_metadata())
        p.abort_transaction()
        assert c.committed([TopicPartition(src, 0)])[TopicPartition(src, 0)] is None
        # transaction 2: committed -> output and offsets together
        p.begin_transaction()
        for r in first:
            p.send(dst, b"out-" + r.value)
        p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(first[-1].offset + 1)},
                                      c.consumer_group_metadata())
        p.commit_transaction()
        assert c.committed([TopicPartition(src, 0)])[TopicPartition(src, 0)].offset == 10
    assert _read_all(bs, dst, 1, "read_committed") == [b"out-%d" % i for i in range(10)]
