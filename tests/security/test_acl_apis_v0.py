"""CreateAcls, DescribeAcls and DeleteAcls v0 (Kafka 3.9 serves them, kio has no v0), encoded
and decoded by kafka-python's message classes over a raw socket."""

from __future__ import annotations

from kafka.protocol import admin as kp_admin
from tests.broker.test_legacy_wire import OldWire

from odradek.testing.process import BrokerProcess


def test_v0_round_trip(authorized_broker: BrokerProcess) -> None:
    old = OldWire(authorized_broker.bootstrap_servers)
    try:
        acl = {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
        created = old.call(
            kp_admin.CreateAclsRequest,
            kp_admin.CreateAclsResponse,
            0,
            {"creations": [{"resource_type": 2, "resource_name": "orders", **acl}]},
        )
        assert [r["error_code"] for r in created["results"]] == [0]
        everything = {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        }
        described = old.call(
            kp_admin.DescribeAclsRequest, kp_admin.DescribeAclsResponse, 0, everything
        )
        assert described["error_code"] == 0
        (resource,) = described["resources"]
        assert (resource["resource_type"], resource["resource_name"]) == (2, "orders")
        assert resource["acls"] == [acl]
        deleted = old.call(
            kp_admin.DeleteAclsRequest,
            kp_admin.DeleteAclsResponse,
            0,
            {"filters": [everything]},
        )
        (result,) = deleted["filter_results"]
        assert result["error_code"] == 0
        assert [m["resource_name"] for m in result["matching_acls"]] == ["orders"]
    finally:
        old.close()
