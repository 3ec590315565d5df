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


@pytest.mark.interop
def test_our_transactions_read_by_confluent_kafka_read_committed(bs: str) -> None:
    from confluent_kafka import Consumer as CkConsumer
    from confluent_kafka import TopicPartition as CkTopicPartition

    topic = _topic(bs, "tx-to-ck", 1)
    with Producer({"bootstrap.servers": bs, "transactional.id": "tx-to-ck-1", "linger.ms": 1}) as p:
        p.init_transactions()
        for n, commit in enumerate([True, False, True, False]):
            p.begin_transaction()
            for i in range(3):
                p.send(topic, b"%s-%d-%d" % (b"c" if commit else b"a", n, i))
            p.flush()
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    c = CkConsumer({"bootstrap.servers": bs, "group.id": "ck-rc", "isolation.level": "read_committed",
                    "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([CkTopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        for _ in range(100):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break  # partition EOF: at the last stable offset
            got.append(m.value())
        assert got == [b"c-%d-%d" % (n, i) for n in (0, 2) for i in range(3)]
        _lo, hi = c.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=10)
        assert hi == 16  # 12 records + 4 markers
    finally:
        c.close()


@pytest.mark.interop
def test_confluent_kafka_transactions_read_by_our_read_committed(bs: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka import Producer as CkProducer

    topic = _topic(bs, "ck-to-tx", 2)
    p = CkProducer({"bootstrap.servers": bs, "transactional.id": "ck-to-tx-1", "linger.ms": 1})
    p.init_transactions(30)
    for n, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, b"%s-%d-%d" % (b"c" if commit else b"a", n, i), partition=i % 2)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # a second instance with the same id fences the first (confluent-kafka against our broker)
    p2 = CkProducer({"bootstrap.servers": bs, "transactional.id": "ck-to-tx-1"})
    p2.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"zombie", partition=0)
    with pytest.raises(KafkaException) as info:
        p.commit_transaction(30)
    assert info.value.args[0].fatal() or info.value.args[0].txn_requires_abort()
    assert sorted(_read_all(bs, topic, 2, "read_committed")) == sorted(
        b"c-%d-%d" % (n, i) for n in (0, 2) for i in range(4))
    assert len(_read_all(bs, topic, 2, "read_uncommitted")) >= 12
