"""Producers and consumers refused by the ACLs, as librdkafka's 0115 (producer_auth) and 0119
(consumer_auth) check them: a real broker process with an authorizer, confluent-kafka clients.

Connections are unauthenticated here (User:ANONYMOUS) and the broker allows resources no ACL
names (``allow.everyone.if.no.acl.found``), so each test narrows with DENY ACLs on its own
topics and groups, and the others keep working."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from odradek.testing.process import BrokerProcess

TIMEOUT = 15.0
ANONYMOUS = "User:ANONYMOUS"




def acl(
    broker: BrokerProcess,
    name: str,
    op: AclOperation,
    rtype: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.DENY,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    binding = AclBinding(rtype, name, pattern, ANONYMOUS, "*", op, permission)
    for f in admin.create_acls([binding], request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def create_topic(broker: BrokerProcess, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(timeout=TIMEOUT)


def produce(broker: BrokerProcess, topic: str, n: int = 1) -> list[KafkaError | None]:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 10_000}
    )
    reports: list[KafkaError | None] = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: reports.append(err))
    assert producer.flush(TIMEOUT) == 0
    return reports


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_producer_without_write_gets_topic_authorization_failed(authorized_broker: BrokerProcess) -> None:
    topic = unique("no-write")
    create_topic(authorized_broker, topic)
    assert produce(authorized_broker, topic) == [None]  # allowed while no ACL names it
    # once an ACL names the topic, only what is allowed is: ALL, but WRITE denied
    acl(authorized_broker, topic, AclOperation.ALL, permission=AclPermissionType.ALLOW)
    acl(authorized_broker, topic, AclOperation.WRITE)
    (err,) = produce(authorized_broker, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DENY WRITE leaves DESCRIBE (implied by the ALLOW ALL): the topic is still listed
    md = Producer({"bootstrap.servers": authorized_broker.bootstrap_servers}).list_topics(timeout=TIMEOUT)
    assert topic in md.topics


def test_transactional_producer_without_write_on_its_id(authorized_broker: BrokerProcess) -> None:
    txn_id = unique("txn")
    acl(authorized_broker, txn_id, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID)
    producer = Producer(
        {"bootstrap.servers": authorized_broker.bootstrap_servers, "transactional.id": txn_id}
    )
    with pytest.raises(KafkaException) as err:
        producer.init_transactions(TIMEOUT)
    assert err.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_consumer_without_read_gets_topic_authorization_failed(authorized_broker: BrokerProcess) -> None:
    topic = unique("no-read")
    create_topic(authorized_broker, topic)
    assert produce(authorized_broker, topic, 3) == [None] * 3
    acl(authorized_broker, topic, AclOperation.ALL, permission=AclPermissionType.ALLOW)
    acl(authorized_broker, topic, AclOperation.READ)
    consumer = Consumer(
        {
            "bootstrap.servers": authorized_broker.bootstrap_servers,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is not None, "read a record the ACLs deny"
                error = msg.error()
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_consumer_group_denied(authorized_broker: BrokerProcess) -> None:
    topic = unique("grouped")
    create_topic(authorized_broker, topic)
    group = unique("denied-group")
    acl(authorized_broker, group, AclOperation.READ, ResourceType.GROUP)
    consumer = Consumer(
        {
            "bootstrap.servers": authorized_broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        error = None
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                error = msg.error()
        assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_metadata_lists_only_describable_topics(authorized_broker: BrokerProcess) -> None:
    hidden, shown = unique("hidden"), unique("shown")
    create_topic(authorized_broker, hidden)
    create_topic(authorized_broker, shown)
    acl(authorized_broker, "hidden-", AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED)
    md = Producer({"bootstrap.servers": authorized_broker.bootstrap_servers}).list_topics(timeout=TIMEOUT)
    assert shown in md.topics and hidden not in md.topics
    named = Producer({"bootstrap.servers": authorized_broker.bootstrap_servers}).list_topics(
        hidden, timeout=TIMEOUT
    )
    assert named.topics[hidden].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_auto_creation_needs_create(authorized_broker: BrokerProcess) -> None:
    acl(authorized_broker, "nocreate-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED)
    topic = unique("nocreate")
    md = Producer({"bootstrap.servers": authorized_broker.bootstrap_servers}).list_topics(
        topic, timeout=TIMEOUT
    )
    assert md.topics[topic].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin = AdminClient({"bootstrap.servers": authorized_broker.bootstrap_servers})
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics
