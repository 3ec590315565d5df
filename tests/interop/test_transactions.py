"""Transactions (KIP-98 / KIP-447) with third-party clients against a real broker process.

confluent-kafka's transactional producer commits, aborts, is fenced by a second instance of
its transactional.id, and runs a consume-transform-produce loop with
``send_offsets_to_transaction``; aiokafka's and kafka-python's transactional producers commit
and abort;
confluent-kafka, kafka-python and aiokafka read_committed consumers never see an aborted or
an open transaction's records; a broker SIGKILLed in the middle of transactions restarts with
them still invisible, and its transaction coordinator aborts them (fencing by a new instance,
and transaction.timeout.ms).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from odradek.testing.helpers import create_topic
from odradek.testing.process import BrokerProcess

from .support import unique_topic, wait_for

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

BROKER_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    "offsets.topic.num.partitions": 5,
}
PARTITIONS = 2


def _txn_producer(bootstrap: str, txn_id: str, **config: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 5,
            **config,
        }
    )


def _send(p: Producer, topic: str, values: Iterable[bytes]) -> None:
    for i, v in enumerate(values):
        p.produce(topic, key=v, value=v, partition=i % PARTITIONS)
    p.flush(10)


def _read_confluent(
    bootstrap: str, topic: str, isolation: str, partitions: int = PARTITIONS
) -> list[bytes]:
    """Everything up to the end the consumer sees (the LSO for read_committed) per partition."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 20
        while len(at_end) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    continue
                raise KafkaException(m.error())
            at_end.discard(m.partition())
            values.append(m.value())
        assert len(at_end) == partitions, "the consumer did not reach the end"
        return sorted(values)
    finally:
        c.close()


def _read_kafka_python(bootstrap: str, topic: str, want: int) -> list[bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=500,
    )
    try:
        c.assign([KTP(topic, p) for p in range(PARTITIONS)])
        c.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < want and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                values += [r.value for r in records]
        # anything beyond `want` would arrive with the records read: poll once more
        for records in c.poll(timeout_ms=300).values():
            values += [r.value for r in records]
        return sorted(values)
    finally:
        c.close()


async def _read_aiokafka(bootstrap: str, topic: str, want: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await c.start()
    try:
        c.assign([ATP(topic, p) for p in range(PARTITIONS)])
        await c.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < want and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=200)
            values += [r.value for records in batch.values() for r in records]
        batch = await c.getmany(timeout_ms=300)
        values += [r.value for records in batch.values() for r in records]
        return sorted(values)
    finally:
        await c.stop()


def _vals(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}{i:03d}".encode() for i in range(n)]


def test_commit_abort_and_read_committed_consumers(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic = unique_topic("txn")
    create_topic(bootstrap, topic, PARTITIONS)
    p = _txn_producer(bootstrap, f"txn-{topic}")
    p.init_transactions(10)
    committed, aborted, later, open_ = _vals("c", 20), _vals("a", 20), _vals("d", 10), _vals("o", 6)
    p.begin_transaction()
    _send(p, topic, committed)
    p.commit_transaction(10)
    p.begin_transaction()
    _send(p, topic, aborted)  # written to the log, then aborted
    p.abort_transaction(10)
    p.begin_transaction()
    _send(p, topic, later)
    p.commit_transaction(10)
    p.begin_transaction()
    _send(p, topic, open_)  # left open: read_committed stops at its first offset (the LSO)

    visible = sorted(committed + later)
    assert _read_confluent(bootstrap, topic, "read_uncommitted") == sorted(
        committed + aborted + later + open_
    )
    assert _read_confluent(bootstrap, topic, "read_committed") == visible
    assert _read_kafka_python(bootstrap, topic, len(visible)) == visible
    assert asyncio.run(_read_aiokafka(bootstrap, topic, len(visible))) == visible

    p.commit_transaction(10)  # the LSO moves past it
    assert _read_confluent(bootstrap, topic, "read_committed") == sorted(visible + open_)


def test_second_instance_fences_the_first(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic = unique_topic("fence")
    create_topic(bootstrap, topic, PARTITIONS)
    txn_id = f"txn-{topic}"
    zombie = _txn_producer(bootstrap, txn_id)
    zombie.init_transactions(10)
    zombie.begin_transaction()
    _send(zombie, topic, _vals("z", 8))

    fresh = _txn_producer(bootstrap, txn_id)
    fresh.init_transactions(10)  # aborts the zombie's open transaction and fences it
    with pytest.raises(KafkaException) as failed:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(10)
    err = failed.value.args[0]
    assert err.fatal() or err.code() in (
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError._FENCED,
    ), err

    fresh.begin_transaction()
    _send(fresh, topic, _vals("f", 8))
    fresh.commit_transaction(10)
    assert _read_confluent(bootstrap, topic, "read_committed") == _vals("f", 8)


def test_consume_transform_produce_with_send_offsets(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    source, sink = unique_topic("src"), unique_topic("sink")
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, PARTITIONS)
    plain = Producer({"bootstrap.servers": bootstrap})
    for v in _vals("in", 40):
        plain.produce(source, value=v, partition=0)
    plain.flush(10)
    group = f"ctp-{source}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = _txn_producer(bootstrap, f"txn-{group}")
    producer.init_transactions(10)

    def committed_offset() -> int:
        tp = consumer.committed([TopicPartition(source, 0)], timeout=10)[0]
        return int(tp.offset)

    try:
        consumer.assign([TopicPartition(source, 0, 0)])

        def process(n: int, commit: bool) -> None:
            got: list[Any] = []
            deadline = time.monotonic() + 15
            while len(got) < n and time.monotonic() < deadline:
                got += [m for m in consumer.consume(n - len(got), 0.5) if not m.error()]
            assert len(got) == n
            producer.begin_transaction()
            for m in got:
                producer.produce(sink, value=b"out-" + m.value(), partition=m.offset() % 2)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 10
            )
            if commit:
                producer.commit_transaction(10)
            else:
                producer.abort_transaction(10)

        process(20, commit=True)
        assert committed_offset() == 20
        process(10, commit=False)  # aborted: neither its output nor its offsets count
        assert committed_offset() == 20
        consumer.seek(TopicPartition(source, 0, 20))
        process(20, commit=True)
        assert committed_offset() == 40
    finally:
        consumer.close()
    out = _read_confluent(bootstrap, sink, "read_committed")
    assert out == sorted(b"out-" + v for v in _vals("in", 40))


def test_aiokafka_transactional_producer(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer

    bootstrap = broker.bootstrap_servers
    topic = unique_topic("aiotxn")
    create_topic(bootstrap, topic, PARTITIONS)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"txn-{topic}")
        await p.start()
        try:
            async with p.transaction():
                for i, v in enumerate(_vals("c", 10)):
                    await p.send(topic, v, partition=i % PARTITIONS)
            await p.begin_transaction()
            for i, v in enumerate(_vals("a", 10)):
                await (await p.send(topic, v, partition=i % PARTITIONS))
            await p.abort_transaction()
            async with p.transaction():
                for i, v in enumerate(_vals("d", 4)):
                    await p.send(topic, v, partition=i % PARTITIONS)
        finally:
            await p.stop()

    asyncio.run(run())
    visible = sorted(_vals("c", 10) + _vals("d", 4))
    assert asyncio.run(_read_aiokafka(bootstrap, topic, len(visible))) == visible
    assert len(_read_confluent(bootstrap, topic, "read_uncommitted")) == 24


def test_kafka_python_transactional_producer(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    bootstrap = broker.bootstrap_servers
    topic = unique_topic("kptxn")
    create_topic(bootstrap, topic, PARTITIONS)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"txn-{topic}")
    try:
        p.init_transactions()
        for prefix, commit in (("c", True), ("a", False), ("d", True)):
            p.begin_transaction()
            for i, v in enumerate(_vals(prefix, 6)):
                p.send(topic, v, partition=i % PARTITIONS)
            p.flush()
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close()
    visible = sorted(_vals("c", 6) + _vals("d", 6))
    assert _read_kafka_python(bootstrap, topic, len(visible)) == visible
    assert len(_read_confluent(bootstrap, topic, "read_uncommitted")) == 18


def test_broker_killed_mid_transaction(fresh_broker: BrokerProcess) -> None:
    """SIGKILL with one aborted and two open transactions: after the restart none of them is
    visible; a new instance of one transactional id aborts its open transaction at once, the
    coordinator aborts the other after its transaction.timeout.ms, and read_committed then
    reads past both (the aborted ones come from the rebuilt producer state and .txnindex)."""
    bootstrap = fresh_broker.bootstrap_servers
    topic = unique_topic("crash")
    create_topic(bootstrap, topic, PARTITIONS)
    first = _txn_producer(bootstrap, f"a-{topic}")
    first.init_transactions(10)
    first.begin_transaction()
    _send(first, topic, _vals("c", 10))
    first.commit_transaction(10)
    first.begin_transaction()
    _send(first, topic, _vals("x", 10))
    first.abort_transaction(10)
    first.begin_transaction()
    _send(first, topic, _vals("open-a", 6))  # reopened by the same id after the restart
    second = _txn_producer(bootstrap, f"b-{topic}", **{"transaction.timeout.ms": 2000})
    second.init_transactions(10)
    second.begin_transaction()
    _send(second, topic, _vals("open-b", 6))  # aborted by its timeout after the restart

    fresh_broker.restart(kill=True)
    del first, second  # abandoned, as by a crashed application
    bootstrap = fresh_broker.bootstrap_servers
    assert _read_confluent(bootstrap, topic, "read_committed") == _vals("c", 10)

    again = _txn_producer(bootstrap, f"a-{topic}")
    again.init_transactions(15)  # fences and aborts open-a
    again.begin_transaction()
    _send(again, topic, _vals("d", 4))
    again.commit_transaction(10)

    want = sorted(_vals("c", 10) + _vals("d", 4))
    # open-b blocks the LSO until the coordinator aborts it (2 s after it started)
    wait_for(
        lambda: _read_confluent(bootstrap, topic, "read_committed") == want,
        20,
        "read_committed past the aborted transactions",
        interval=0.3,
    )
    fresh_broker.restart()  # a clean restart: from the snapshot and the .txnindex files
    assert _read_confluent(fresh_broker.bootstrap_servers, topic, "read_committed") == want
