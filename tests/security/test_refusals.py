"""What each API answers a principal the ACLs give nothing, on the wire: a broker whose every
resource is named by an ACL for someone else (User:alice), asked by User:ANONYMOUS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from tests.broker.wire import (
    Wire,
    create,
    create_topics_request,
    init_producer_id_request,
    metadata_request,
    ms,
    req,
)

from odradek.testing.process import BrokerProcess

TOPIC = "t"


@pytest.fixture(scope="module")
def locked() -> Iterator[BrokerProcess]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with BrokerProcess(settings) as broker:
        with Wire(broker.bootstrap_servers) as wire:
            create(wire, TOPIC)
            creations = tuple(
                req(
                    30,
                    3,
                    "AclCreation",
                    resource_type=rtype,
                    resource_name=name,
                    resource_pattern_type=3,
                    principal="User:alice",
                    host="*",
                    operation=2,
                    permission_type=3,
                )
                for rtype, name in ((2, "*"), (3, "*"), (5, "*"), (4, "kafka-cluster"))
            )
            answer = wire.call(req(30, 3, creations=creations))
            assert [r.error_code for r in answer.results] == [ErrorCode.none] * 4
        yield broker


@pytest.fixture
def wire(locked: BrokerProcess) -> Iterator[Wire]:
    with Wire(locked.bootstrap_servers) as w:
        yield w


def test_metadata(wire: Wire) -> None:
    assert wire.call(metadata_request(None, allow_auto=False)).topics == ()
    (topic,) = wire.call(metadata_request([TOPIC])).topics
    assert topic.error_code == ErrorCode.topic_authorization_failed and topic.partitions == ()
    (missing,) = wire.call(metadata_request(["nope"])).topics
    assert missing.error_code == ErrorCode.topic_authorization_failed


def test_topic_admin(wire: Wire) -> None:
    (created,) = wire.call(create_topics_request([("new", 1, 1, {})])).topics
    assert created.error_code == ErrorCode.topic_authorization_failed
    (deleted,) = wire.call(req(20, 4, topic_names=(TOPIC,), timeout=ms(5000))).responses
    assert deleted.error_code == ErrorCode.topic_authorization_failed
    resources = tuple(
        req(
            32,
            4,
            "DescribeConfigsResource",
            resource_type=t,
            resource_name=n,
            configuration_keys=None,
        )
        for t, n in ((2, TOPIC), (4, "0"))
    )
    described = wire.call(
        req(32, 4, resources=resources, include_synonyms=False, include_documentation=False)
    ).results
    assert [r.error_code for r in described] == [
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
    ]


def test_groups_and_transactions(wire: Wire) -> None:
    found: Any = wire.call(req(10, 3, key="g", key_type=0))
    assert found.error_code == ErrorCode.group_authorization_failed
    found = wire.call(req(10, 3, key="tx", key_type=1))
    assert found.error_code == ErrorCode.transactional_id_authorization_failed
    hb = wire.call(req(12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None))
    assert hb.error_code == ErrorCode.group_authorization_failed
    assert wire.call(req(16, 4, states_filter=())).groups == ()
    idempotent = wire.call(init_producer_id_request())
    assert idempotent.error_code == ErrorCode.cluster_authorization_failed


def test_inter_broker_and_cluster_apis(wire: Wire) -> None:
    alter = wire.call(req(56, 2, broker_id=1, broker_epoch=1, topics=()))
    assert alter.error_code == ErrorCode.cluster_authorization_failed
    elect = wire.call(req(43, 2, election_type=0, topic_partitions=None, timeout=ms(1000)))
    assert elect.error_code == ErrorCode.cluster_authorization_failed
    acls = wire.call(
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
    assert acls.error_code == ErrorCode.cluster_authorization_failed


def test_without_authorizer_everything_is_allowed(broker: BrokerProcess) -> None:
    with Wire(broker.bootstrap_servers) as w:
        (created,) = w.call(create_topics_request([("open", 1, 1, {})])).topics
        assert created.error_code == ErrorCode.none
        assert w.call(req(10, 3, key="g", key_type=0)).error_code == ErrorCode.none
