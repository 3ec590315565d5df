"""Topic ACL sync (MM2's ``sync.topic.acls.enabled``) between two brokers with an authorizer.

The source's ACLs are written and the target's read with confluent-kafka's admin client (a
third-party oracle); the mirror itself reads and creates them with odradek.client's admin.
Both brokers let the mirror (User:ANONYMOUS on PLAINTEXT) do anything: ``super.users``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from odradek.client import Admin, NewTopic, Producer
from odradek.client.aio.admin import AclBinding, AclBindingFilter
from odradek.mirror import load_config
from odradek.mirror.acls import target_acl_bindings
from odradek.testing.process import BrokerProcess

from .conftest import MirrorProcess, base_properties, end_offsets, wait_until

SECURED = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "group.initial.rebalance.delay.ms": 0,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
TOPIC, GROUP, LITERAL, PREFIXED = 2, 3, 3, 4
ALL, READ, WRITE, DESCRIBE = 2, 3, 4, 8
DENY, ALLOW = 2, 3


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    a, b = BrokerProcess(SECURED), BrokerProcess(SECURED)
    a.start()
    try:
        b.start()
        try:
            yield a, b
        finally:
            b.close()
    finally:
        a.close()


def ck_admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def ck_create(bootstrap: str, bindings: list[tuple[int, str, int, str, str, int, int]]) -> None:
    from confluent_kafka.admin import (
        AclBinding as CkBinding,
    )
    from confluent_kafka.admin import (
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    made = [
        CkBinding(ResourceType(rt), name, ResourcePatternType(pt), principal, host, AclOperation(op),
                  AclPermissionType(perm))
        for rt, name, pt, principal, host, op, perm in bindings
    ]
    admin = ck_admin(bootstrap)  # kept: the futures fail once the client is destroyed
    for fut in admin.create_acls(made, request_timeout=15).values():
        fut.result(15)


def ck_topic_acls(bootstrap: str) -> set[tuple[str, int, str, str, int, int]]:
    """(topic, pattern type, principal, host, operation, permission) of every topic ACL."""
    from confluent_kafka.admin import (
        AclBindingFilter as CkFilter,
    )
    from confluent_kafka.admin import (
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    flt = CkFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                   AclPermissionType.ANY)
    admin = ck_admin(bootstrap)
    found = admin.describe_acls(flt, request_timeout=15).result(15)
    return {(b.name, b.resource_pattern_type.value, b.principal, b.host, b.operation.value, b.permission_type.value)
            for b in found}


def test_topic_acls_copied_with_mm2_rules(secured: tuple[BrokerProcess, BrokerProcess],
                                          mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = secured
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("orders", 1, 1), NewTopic("private", 1, 1)])
    ck_create(a.bootstrap_servers, [
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "orders", LITERAL, "User:alice", "*", WRITE, ALLOW),  # never copied
        (TOPIC, "orders", LITERAL, "User:bob", "*", ALL, ALLOW),  # copied as ALLOW READ
        (TOPIC, "orders", LITERAL, "User:eve", "10.0.0.9", READ, DENY),  # copied as it is
        (TOPIC, "orders", LITERAL, "User:mallory", "*", WRITE, DENY),  # DENY WRITE: copied
        (TOPIC, "pay-", PREFIXED, "User:carol", "*", READ, ALLOW),  # prefixed: not copied
        (TOPIC, "private", LITERAL, "User:dan", "*", READ, ALLOW),  # topics.exclude
        (GROUP, "g", LITERAL, "User:alice", "*", READ, ALLOW),  # not a topic
    ])
    m = mirrors(base_properties(a, b, **{"topics.exclude": "private", "sync.topic.acls.interval.seconds": 1}))
    m.start()
    expected = {
        ("A.orders", LITERAL, "User:alice", "*", READ, ALLOW),
        ("A.orders", LITERAL, "User:bob", "*", READ, ALLOW),
        ("A.orders", LITERAL, "User:eve", "10.0.0.9", READ, DENY),
        ("A.orders", LITERAL, "User:mallory", "*", WRITE, DENY),
    }
    wait_until(lambda: ck_topic_acls(b.bootstrap_servers) == expected, 40, "the source's ACLs on B", m.log)
    # a new ACL on the source is on the target within sync.topic.acls.interval.seconds
    ck_create(a.bootstrap_servers, [(TOPIC, "orders", LITERAL, "User:frank", "*", DESCRIBE, ALLOW)])
    expected.add(("A.orders", LITERAL, "User:frank", "*", DESCRIBE, ALLOW))
    wait_until(lambda: ck_topic_acls(b.bootstrap_servers) == expected, 20, "the new ACL on B", m.log)
    assert "topic ACLs synced to B" in m.log()
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:  # created every round, held once
        assert len(admin.describe_acls(AclBindingFilter(TOPIC))) == len(expected)
    assert m.terminate() == 0


def test_admin_acl_calls_round_trip(secured: tuple[BrokerProcess, BrokerProcess]) -> None:
    """odradek.client's describe_acls / create_acls / delete_acls, checked with confluent-kafka."""
    _a, b = secured
    binding = AclBinding(TOPIC, "rt", PREFIXED, "User:zed", "*", DESCRIBE, ALLOW)
    with Admin({"bootstrap.servers": b.bootstrap_servers}) as admin:
        created = admin.create_acls([binding, binding._replace(operation=0)])
        assert created[0] == (0, None) and created[1][0] != 0  # UNKNOWN operation: refused
        assert ("rt", PREFIXED, "User:zed", "*", DESCRIBE, ALLOW) in ck_topic_acls(b.bootstrap_servers)
        assert admin.describe_acls(AclBindingFilter(TOPIC, "rt", PREFIXED)) == [binding]
        assert admin.describe_acls(AclBindingFilter(principal="User:nobody")) == []
        assert admin.delete_acls([AclBindingFilter(TOPIC, "rt", PREFIXED, "User:zed")]) == [binding]
        assert admin.describe_acls(AclBindingFilter(TOPIC, "rt", PREFIXED)) == []


def test_source_without_authorizer_is_said_once(clusters: tuple[BrokerProcess, BrokerProcess],
                                                mirrors: Callable[..., MirrorProcess]) -> None:
    a, b = clusters
    m = mirrors(base_properties(a, b, **{"topics": "none-such", "sync.topic.acls.interval.seconds": 1}))
    m.start()
    wait_until(lambda: "A has no authorizer: no topic ACLs to sync" in m.log(), 30, "the line", m.log)
    wait_until(lambda: "flow A->B: 0 records/s" in m.log(), 30, "a progress line", m.log)
    assert m.terminate() == 0
    log = m.log()
    assert log.count("has no authorizer") == 1 and "_sync_acls failed" not in log


def test_target_without_authorizer_is_said_once(secured: tuple[BrokerProcess, BrokerProcess],
                                                clusters: tuple[BrokerProcess, BrokerProcess],
                                                mirrors: Callable[..., MirrorProcess]) -> None:
    """ACLs on the source, none possible on the target: one line; records still copied."""
    a, b = secured[0], clusters[1]
    with Admin({"bootstrap.servers": a.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic("lonely", 1, 1)])
    ck_create(a.bootstrap_servers, [(TOPIC, "lonely", LITERAL, "User:alice", "*", READ, ALLOW)])
    with Producer({"bootstrap.servers": a.bootstrap_servers}) as p:
        p.send("lonely", b"v").result(10)
    m = mirrors(base_properties(a, b, **{"topics": "lonely", "sync.topic.acls.interval.seconds": 1}))
    m.start()
    wait_until(lambda: end_offsets(b.bootstrap_servers, "A.lonely").get(0) == 1, 30, "the record on B", m.log)
    wait_until(lambda: "B has no authorizer: 1 topic ACLs of A not created" in m.log(), 30, "the line", m.log)
    wait_until(lambda: m.log().count("A->B: 0 records/s") >= 2, 30, "two more sync rounds", m.log)
    assert m.terminate() == 0
    assert m.log().count("has no authorizer") == 1


def _flow(**extra: str) -> Any:
    text = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    text += "".join(f"{k} = {v}\n" for k, v in extra.items())
    return load_config(text).flows[0]


def test_target_bindings_rules() -> None:
    src = [
        AclBinding(TOPIC, "*", LITERAL, "User:all", "*", READ, ALLOW),
        AclBinding(TOPIC, "t", LITERAL, "User:w", "*", WRITE, ALLOW),
        AclBinding(TOPIC, "t", LITERAL, "User:x", "*", ALL, ALLOW),
        AclBinding(TOPIC, "t", LITERAL, "User:x", "*", ALL, DENY),
        AclBinding(TOPIC, "B.t", LITERAL, "User:y", "*", READ, ALLOW),  # came from B: a cycle
        AclBinding(TOPIC, "__consumer_offsets", LITERAL, "User:y", "*", READ, ALLOW),
    ]
    assert target_acl_bindings(_flow(), src) == [
        AclBinding(TOPIC, "A.t", LITERAL, "User:x", "*", READ, ALLOW),
        AclBinding(TOPIC, "A.t", LITERAL, "User:x", "*", ALL, DENY),
    ]
    identity = _flow(**{"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    assert [(x.resource_name, x.operation) for x in target_acl_bindings(identity, src)] == [
        ("*", READ), ("t", READ), ("t", ALL), ("B.t", READ)]
    with pytest.raises(ValueError, match=r"sync\.topic\.acls\.interval\.seconds"):
        _flow(**{"sync.topic.acls.interval.seconds": "0"})
