"""ListClientMetricsResources (74, v0; KIP-714) against a real broker process. The requests are
built byte by byte from Kafka's ListClientMetricsResourcesRequest.json (flexible v0, request
header v2) and the answers parsed by hand (response header v1), independently of the broker's
codec; the client-metrics resources are made with IncrementalAlterConfigs."""

from __future__ import annotations

import struct

import pytest

from odradek.client.aio.admin import AsyncAdmin
from odradek.client.errors import KafkaError
from odradek.testing.process import BrokerProcess

from .wire import Wire, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"num.partitions": 1}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""The ``authorized_broker``'s authorizer (conftest)."""

NONE = 0
CLUSTER_AUTHORIZATION_FAILED = 31
CLIENT_METRICS = 16
SET, DELETE = 0, 1
API_KEY = 74


# -- the wire format, by hand ----------------------------------------------------------------


def request_frame(correlation_id: int, body: bytes = b"\x00", client_id: bytes = b"raw") -> bytes:
    """Size, request header v2 (api key, version 0, correlation id, INT16 client id, no tagged
    fields), then ``body`` (the empty request: no tagged fields)."""
    header = struct.pack(">hhih", API_KEY, 0, correlation_id, len(client_id)) + client_id + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def parse_response(frame: bytes, correlation_id: int) -> tuple[int, int, list[str]]:
    """(throttle_time_ms, error_code, names) of a response frame (after its size); every byte
    must be accounted for, and no tagged field may be written."""
    (got,) = struct.unpack_from(">i", frame, 0)
    assert got == correlation_id
    tags, pos = _uvarint(frame, 4)  # response header v1: tagged fields
    assert tags == 0
    throttle, error = struct.unpack_from(">ih", frame, pos)
    pos += 6
    count, pos = _uvarint(frame, pos)  # COMPACT_ARRAY: N + 1
    assert count >= 1
    names = []
    for _ in range(count - 1):
        length, pos = _uvarint(frame, pos)  # COMPACT_STRING: byte length + 1
        names.append(frame[pos : pos + length - 1].decode())
        pos += length - 1
        tags, pos = _uvarint(frame, pos)
        assert tags == 0
    tags, pos = _uvarint(frame, pos)
    assert tags == 0 and pos == len(frame), (pos, len(frame))
    return throttle, error, names


class Raw(Wire):
    """One socket speaking API 74 by hand (``Wire``'s connection, none of its kio codec)."""

    def send(self, body: bytes = b"\x00") -> int:  # type: ignore[override]
        self.correlation_id += 1
        self.send_raw(request_frame(self.correlation_id, body))
        return self.correlation_id

    def receive(self, correlation_id: int) -> tuple[int, int, list[str]]:  # type: ignore[override]
        return parse_response(self.read_frame(), correlation_id)

    def list(self) -> tuple[int, int, list[str]]:
        return self.receive(self.send())


def list_resources(bootstrap: str) -> tuple[int, int, list[str]]:
    raw = Raw(bootstrap)
    try:
        return raw.list()
    finally:
        raw.close()


# -- helpers over kio ------------------------------------------------------------------------


def alter(w: Wire, name: str, op: int, **configs: str) -> int:
    """IncrementalAlterConfigs on the client-metrics resource ``name``: ``op`` on each key."""
    ops = tuple(
        req(
            44,
            1,
            "AlterableConfig",
            name=k.replace("_", "."),
            config_operation=op,
            value=v if op == SET else None,
        )
        for k, v in configs.items()
    )
    res = req(
        44, 1, "AlterConfigsResource", resource_type=CLIENT_METRICS, resource_name=name, configs=ops
    )
    r = w.call(req(44, 1, resources=(res,), validate_only=False))
    return int(r.responses[0].error_code)


def create_acl(w: Wire, principal: str, operation: int) -> None:
    """ALLOW ``operation`` on the cluster to ``principal`` from any host."""
    creation = req(
        30,
        3,
        "AclCreation",
        resource_type=4,
        resource_name="kafka-cluster",
        resource_pattern_type=3,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=3,
    )
    answer = w.call(req(30, 3, creations=(creation,)))
    assert [int(r.error_code) for r in answer.results] == [NONE]


# -- tests -----------------------------------------------------------------------------------


def test_api_versions_advertises_v0_only(wire: Wire) -> None:
    r = wire.call(req(18, 3, client_software_name="wire", client_software_version="1"))
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert ranges[API_KEY] == (0, 0)


def test_lists_every_resource_and_forgets_deleted_ones(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    assert list_resources(bootstrap) == (0, NONE, [])
    with Wire(bootstrap) as w:
        assert alter(w, "payments", SET, metrics="org.apache.kafka.", interval_ms="10000") == NONE
        assert alter(w, "zahlungen-ü", SET, metrics="*", match="client_id=z.*") == NONE
        assert list_resources(bootstrap) == (0, NONE, ["payments", "zahlungen-ü"])
        # deleting every key removes the resource (kafka-client-metrics.sh --delete)
        assert alter(w, "payments", DELETE, metrics="", interval_ms="") == NONE
        assert list_resources(bootstrap) == (0, NONE, ["zahlungen-ü"])
        assert alter(w, "zahlungen-ü", DELETE, metrics="", match="") == NONE
    assert list_resources(bootstrap) == (0, NONE, [])


async def test_admin_client_lists_the_names(broker: BrokerProcess) -> None:
    with Wire(broker.bootstrap_servers) as w:
        assert alter(w, "admin-b", SET, metrics="*") == NONE
        assert alter(w, "admin-a", SET, interval_ms="5000") == NONE
    try:
        async with AsyncAdmin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            assert await admin.list_client_metrics_resources() == ["admin-a", "admin-b"]
    finally:
        with Wire(broker.bootstrap_servers) as w:
            assert alter(w, "admin-a", DELETE, interval_ms="") == NONE
            assert alter(w, "admin-b", DELETE, metrics="") == NONE


def test_requests_are_pipelined_in_order(broker: BrokerProcess) -> None:
    raw = Raw(broker.bootstrap_servers)
    try:
        ids = [raw.send() for _ in range(5)]
        assert [raw.receive(i)[1] for i in ids] == [NONE] * 5
    finally:
        raw.close()


@pytest.mark.parametrize(
    "body",
    [
        b"",  # the body's tagged-field count is missing
        b"\x01",  # one tagged field announced, none follows
        b"\x01\x05\x10ab",  # tag 5 of 16 bytes, only 2 follow
        b"\x80",  # an unfinished varint
    ],
    ids=["no-tag-buffer", "tag-missing", "tag-truncated", "varint-truncated"],
)
def test_a_malformed_request_closes_its_connection_only(broker: BrokerProcess, body: bytes) -> None:
    raw = Raw(broker.bootstrap_servers)
    try:
        raw.send(body)
        assert raw.is_closed_by_peer()
    finally:
        raw.close()
    assert list_resources(broker.bootstrap_servers)[1] == NONE


def test_trailing_bytes_after_the_request_are_ignored_as_kafka_does(
    broker: BrokerProcess,
) -> None:
    raw = Raw(broker.bootstrap_servers)
    try:
        assert raw.receive(raw.send(b"\x00garbage")) == (0, NONE, [])
        assert raw.list() == (0, NONE, [])  # the connection goes on
    finally:
        raw.close()


async def test_describe_configs_on_the_cluster_is_needed(authorized_broker: BrokerProcess) -> None:
    bootstrap = authorized_broker.bootstrap_servers
    with Wire(bootstrap) as w:
        assert alter(w, "secret", SET, metrics="*") == NONE  # no ACL yet: everyone may
        # ALTER (for CreateAcls) but not DESCRIBE_CONFIGS: the cluster now has an ACL
        create_acl(w, "User:ANONYMOUS", 7)
        assert list_resources(bootstrap) == (0, CLUSTER_AUTHORIZATION_FAILED, [])
        async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
            with pytest.raises(KafkaError) as refused:
                await admin.list_client_metrics_resources()
        assert refused.value.code == CLUSTER_AUTHORIZATION_FAILED
        create_acl(w, "User:ANONYMOUS", 10)  # DESCRIBE_CONFIGS
        assert list_resources(bootstrap) == (0, NONE, ["secret"])
