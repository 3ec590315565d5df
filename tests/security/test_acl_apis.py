"""CreateAcls / DescribeAcls / DeleteAcls against a real broker process, with confluent-kafka's
AdminClient as the client; the ACLs survive a restart (the data directory's file). Connections
here are unauthenticated (User:ANONYMOUS): the broker allows everyone on resources that no ACL
names, so the test can grant itself the cluster before narrowing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode
from tests.broker.wire import Wire, req

from odradek.testing.process import BrokerProcess

TIMEOUT = 15
AUTHORIZER = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture(scope="module")
def secured() -> Iterator[BrokerProcess]:
    with BrokerProcess(AUTHORIZER) as broker:
        yield broker


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def acl(
    name: str,
    op: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    rtype: ResourceType = ResourceType.TOPIC,
    principal: str = "User:alice",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def create(client: AdminClient, bindings: list[AclBinding]) -> None:
    for f in client.create_acls(bindings, request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def describe(client: AdminClient, f: AclBindingFilter) -> set[AclBinding]:
    return set(client.describe_acls(f, request_timeout=TIMEOUT).result(timeout=TIMEOUT))


EVERYTHING = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def test_create_describe_delete_and_restart(secured: BrokerProcess) -> None:
    client = admin(secured)
    bindings = [
        acl("orders", AclOperation.READ),
        acl("pay-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        acl("*", AclOperation.DESCRIBE, principal="User:*"),
        acl("g1", AclOperation.READ, rtype=ResourceType.GROUP, perm=AclPermissionType.DENY),
    ]
    create(client, bindings)
    assert describe(client, EVERYTHING) == set(bindings)
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "pay-123",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert describe(client, match) == {bindings[1], bindings[2]}
    only_alice = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ALLOW,
    )
    assert describe(client, only_alice) == {bindings[0], bindings[1]}

    secured.restart()
    client = admin(secured)
    assert describe(client, EVERYTHING) == set(bindings)
    futures = client.delete_acls([only_alice], request_timeout=TIMEOUT)
    assert set(futures[only_alice].result(timeout=TIMEOUT)) == {bindings[0], bindings[1]}
    assert describe(client, EVERYTHING) == {bindings[2], bindings[3]}
    client.delete_acls([EVERYTHING], request_timeout=TIMEOUT)[EVERYTHING].result(timeout=TIMEOUT)
    assert describe(client, EVERYTHING) == set()


def test_invalid_binding_refused(secured: BrokerProcess) -> None:
    client = admin(secured)
    bad = AclBinding(
        ResourceType.BROKER,
        "not-the-cluster",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(KafkaException) as err:
        create(client, [bad])
    assert err.value.args[0].code() == 42  # INVALID_REQUEST


def test_acl_apis_need_the_cluster(secured: BrokerProcess) -> None:
    client = admin(secured)
    # an ACL on the cluster for someone else: ANONYMOUS no longer may ALTER or DESCRIBE it
    create(client, [acl("kafka-cluster", AclOperation.ALTER, rtype=ResourceType.BROKER)])
    try:
        with pytest.raises(KafkaException) as err:
            create(client, [acl("t", AclOperation.READ)])
        assert err.value.args[0].code() == 31  # CLUSTER_AUTHORIZATION_FAILED
        # librdkafka reports DescribeAcls' top-level error as an empty answer: read the wire
        with Wire(secured.bootstrap_servers) as wire:
            answer = wire.call(
                req(
                    29,
                    3,
                    resource_type_filter=1,
                    resource_name_filter=None,
                    pattern_type_filter=1,
                    principal_filter=None,
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                )
            )
        assert answer.error_code == ErrorCode.cluster_authorization_failed
        assert answer.resources == ()
    finally:
        # the file store is the broker's: remove the ACL the way an operator would, offline
        secured.stop()
        (secured.data_dir / "acls.json").unlink()
        secured.restart()
    assert describe(admin(secured), EVERYTHING) == set()


def test_without_authorizer_security_disabled(broker: BrokerProcess) -> None:
    with pytest.raises(KafkaException) as err:
        create(admin(broker), [acl("t", AclOperation.READ)])
    assert err.value.args[0].code() == 54  # SECURITY_DISABLED
