"""``request_percentage`` (KIP-124) and ``controller_mutation_rate`` (KIP-599) on a real broker
process, with real clients: a confluent-kafka producer over its request-time quota is told
``throttle_time_ms`` (librdkafka's throttle callback) while another client id is not; topic
creation over the mutation rate is refused per topic with THROTTLING_QUOTA_EXCEEDED for
kafka-python (CreateTopics v6+, strict) and accepted but throttled, its connection muted, for
confluent-kafka's admin client (CreateTopics v4, permissive), as Kafka does."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from tests.broker.wire import Wire, fetch_request, produce_request, req

from odradek.protocol.records import build_batch
from odradek.testing.helpers import create_topic
from odradek.testing.process import BrokerProcess

from .conftest import set_quota

THROTTLING_QUOTA_EXCEEDED = 89


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # two one-second samples: rates are measured over at least one second, and a mutation
    # bucket holds two seconds' worth of its quota
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "quota.window.num": "2",
        "quota.window.size.seconds": "1",
        "controller.quota.window.num": "2",
    }
    with BrokerProcess(settings) as b:
        yield b


def throttles_while_producing(broker: BrokerProcess, topic: str, client_id: str) -> list[int]:
    """Produce small records one request at a time for up to 8 s (stopping at the first
    throttle reported): the throttle times librdkafka reported, in ms."""
    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "linger.ms": 0,
            "acks": 1,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    deadline = time.monotonic() + 8
    sent = 0
    while time.monotonic() < deadline and sent < 100_000 and not any(throttles):
        try:
            producer.produce(topic, b"v")
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.poll(0.2)
    producer.purge()
    producer.flush(10)
    return throttles


def test_request_percentage_throttles_a_busy_client(broker: BrokerProcess) -> None:
    topic = f"rq-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, partitions=1)
    # 0.5 % of one thread: about 5 ms of handler time per second, a few dozen requests
    set_quota(broker, "busy", "request_percentage", 0.5)
    throttles = throttles_while_producing(broker, topic, "busy")
    assert throttles and 0 < max(throttles) <= 1000, throttles  # at most one window
    # another client id has no quota and is never told to wait
    free = time.monotonic()
    assert not any(throttles_while_producing_for(broker, topic, "relaxed", 1.5))
    assert time.monotonic() - free < 10


def test_fetch_over_request_percentage_gets_the_throttle_and_no_partition(
    broker: BrokerProcess,
) -> None:
    """Kafka's KafkaApis.handleFetchRequest: a consumer's Fetch over its request quota is
    answered with throttle_time_ms and no partition data (its records are fetched again)."""
    topic, client = f"rf-{uuid.uuid4().hex[:8]}", f"greedy-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic, partitions=1)
    with Wire(broker.bootstrap_servers) as w:
        batch = build_batch([(None, b"v" * 100, (), int(time.time() * 1000))] * 10)
        produced = w.call(produce_request(topic, 0, batch))
    assert int(produced.responses[0].partition_responses[0].error_code) == 0
    set_quota(broker, client, "request_percentage", 1.0)
    answers: list[tuple[int, int]] = []  # (throttle ms, topics answered)
    deadline = time.monotonic() + 15
    with ClientWire(broker.bootstrap_servers, client) as w:
        for _ in range(500):  # bounded: ends at the first throttled answer
            resp = w.call(fetch_request(topic, {0: 0}, version=12))
            throttle = int(resp.throttle_time.total_seconds() * 1000)
            answers.append((throttle, len(resp.responses)))
            if throttle > 0 or time.monotonic() > deadline:
                break
    assert answers[0] == (0, 1), answers  # within the quota: the records
    throttle, topics = answers[-1]
    assert 0 < throttle <= 1000, answers  # at most one window
    assert topics == 0, answers  # over it: the throttle, and no partition at all


def throttles_while_producing_for(
    broker: BrokerProcess, topic: str, client_id: str, seconds: float
) -> list[int]:
    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": client_id,
            "linger.ms": 0,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
        }
    )
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline and sent < 100_000:
        try:
            producer.produce(topic, b"v")
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(10) == 0
    return throttles


def test_strict_mutation_quota_refuses_topics_over_the_rate(
    broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    # 10 partitions per second, a bucket of 20: a 30-partition topic is taken (the bucket was
    # not empty), the next one in the same request is refused
    set_quota(broker, "kp-admin", "controller_mutation_rate", 10)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="kp-admin")
    try:
        big, small = f"big-{uuid.uuid4().hex[:6]}", f"small-{uuid.uuid4().hex[:6]}"
        with caplog.at_level(logging.WARNING, logger="kafka"):
            result = admin.create_topics(
                {big: {"num_partitions": 30}, small: {"num_partitions": 3}}, raise_errors=False
            )
        errors = {t["name"]: t["error_code"] for t in result["topics"]}
        assert errors == {big: 0, small: THROTTLING_QUOTA_EXCEEDED}
        # kafka-python (KIP-219) reports and honours the time until the bucket is back at
        # zero: at most 10 tokens at 10/s
        waits = [
            int(m)
            for m in re.findall(
                r"CreateTopicsResponse throttled by broker \((\d+) ms\)", caplog.text
            )
        ]
        assert waits and 0 < max(waits) <= 1000, caplog.text
        # (asked through another client: kafka-python's own stays paused for the throttle)
        topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(
            timeout=10
        )
        assert big in topics.topics and small not in topics.topics
    finally:
        admin.close()


def test_permissive_mutation_quota_for_older_versions_throttles(broker: BrokerProcess) -> None:
    set_quota(broker, "ck-admin", "controller_mutation_rate", 10)
    throttles: list[float] = []
    conf: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap_servers,
        "client.id": "ck-admin",
        "throttle_cb": lambda event: throttles.append(event.throttle_time),
    }
    admin = AdminClient(conf)
    first, second = f"ck-{uuid.uuid4().hex[:6]}", f"ck-{uuid.uuid4().hex[:6]}"
    # librdkafka sends CreateTopics v4: permissive, both topics are created
    for f in admin.create_topics([NewTopic(first, 30, 1), NewTopic(second, 3, 1)]).values():
        f.result(timeout=20)
    deadline = time.monotonic() + 5
    while not throttles and time.monotonic() < deadline:
        admin.poll(0.1)
    # 33 partitions from a bucket of 20: 13 tokens short at 10/s (1.3 s, less the time the
    # second topic's creation took)
    assert throttles and 0.5 < max(throttles) <= 1.3, throttles
    # the connection is muted meanwhile: the next request is answered only after it
    started = time.monotonic()
    third = f"ck-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(third, 1, 1)])[third].result(timeout=20)
    assert time.monotonic() - started > 0.5


class ClientWire(Wire):
    """A Wire whose requests carry ``client_id``."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        super().__init__(bootstrap)
        self.client_id = client_id

    def send(self, entity: Any) -> int:
        from odradek.protocol.messages import encode_request

        self.correlation_id += 1
        self.sock.sendall(
            encode_request(entity, correlation_id=self.correlation_id, client_id=self.client_id)
        )
        return self.correlation_id


def test_strict_quota_on_topic_deletion_and_partition_creation(broker: BrokerProcess) -> None:
    import datetime

    timeout = datetime.timedelta(seconds=15)
    names = [f"m{i}-{uuid.uuid4().hex[:6]}" for i in range(4)]
    for name, partitions in zip(names, (25, 2, 1, 1), strict=True):
        create_topic(broker, name, partitions=partitions)
    # DeleteTopics v6: 25 partitions empty the bucket of 20 and more, the next topic waits
    set_quota(broker, "deleter", "controller_mutation_rate", 10)
    topics = tuple(req(20, 6, "DeleteTopicState", name=n, topic_id=None) for n in names[:2])
    with ClientWire(broker.bootstrap_servers, "deleter") as w:
        deleted = w.call(req(20, 6, topics=topics, timeout=timeout))
    codes = {r.name: int(r.error_code) for r in deleted.responses}
    assert codes == {names[0]: 0, names[1]: THROTTLING_QUOTA_EXCEEDED}
    assert 0 < deleted.throttle_time.total_seconds() <= 0.5
    # CreatePartitions v3: 1 -> 26 partitions (25 added), then the next topic waits
    set_quota(broker, "grower", "controller_mutation_rate", 10)
    grow = tuple(
        req(37, 3, "CreatePartitionsTopic", name=n, count=c, assignments=None)
        for n, c in ((names[2], 26), (names[3], 3))
    )
    with ClientWire(broker.bootstrap_servers, "grower") as w:
        grown = w.call(req(37, 3, topics=grow, timeout=timeout, validate_only=False))
    codes = {r.name: int(r.error_code) for r in grown.results}
    assert codes == {names[2]: 0, names[3]: THROTTLING_QUOTA_EXCEEDED}
    assert 0 < grown.throttle_time.total_seconds() <= 0.5
    # an older version is permissive: CreatePartitions v2 adds them and is throttled
    with ClientWire(broker.bootstrap_servers, "grower") as w:
        old = w.call(req(37, 2, topics=grow[1:], timeout=timeout, validate_only=False))
    assert [int(r.error_code) for r in old.results] == [0]
    assert old.throttle_time.total_seconds() > 0
