"""Request headers of the ZooKeeper-mode inter-broker APIs (not in kio): v2 for their
flexible versions (Kafka 3.9's flexibleVersions), v1 before, v0 for ControlledShutdown v0;
and a server decodes LeaderAndIsr / StopReplica frames through ``request_codec``."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol import inter_broker as ib
from odradek.protocol.headers import is_flexible, parse_request_header, request_header_version
from odradek.protocol.messages import decode_request, request_codec


@pytest.mark.parametrize(
    ("key", "version", "header"),
    [
        (4, 7, 2),
        (4, 4, 2),
        (4, 3, 1),
        (5, 4, 2),
        (5, 2, 2),
        (5, 1, 1),
        (6, 8, 2),
        (6, 6, 2),
        (6, 5, 1),
        (7, 3, 2),
        (7, 1, 1),
        (7, 0, 0),
    ],
)
def test_header_versions(key: int, version: int, header: int) -> None:
    assert request_header_version(key, version) == header


def test_unknown_versions_are_not_flexible() -> None:
    assert is_flexible(4, 8) is None and is_flexible(5, -1) is None


def test_controlled_shutdown_v0_header_has_no_client_id() -> None:
    frame = bytes.fromhex("0007 0000 0000002a") + b"\x00\x00\x00\x01"
    header, pos = parse_request_header(frame)
    assert (header.api_key, header.correlation_id, header.client_id, pos) == (7, 42, None, 8)


def test_leader_and_isr_frame_decodes_through_request_codec() -> None:
    state = ib.LeaderAndIsrPartitionState("t", 0, 3, 1, 5, (1, 2), 7, (1, 2, 3))
    request = ib.LeaderAndIsrRequest(
        9, 3, 100, (state,), (ib.LiveLeader(1, "h", 1),), {"t": uuid.uuid4()}
    )
    frame = ib.encode_request_frame(4, 7, ib.encode_leader_and_isr_request(request), 5, "c-9")
    header, decoded = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (4, 7, "c-9")
    assert decoded == request
    codec = request_codec(5, 4)
    assert codec is not None and codec.header_version == 2 and codec.response_header_version == 1
    assert request_codec(4, 5) is None  # older versions are not decoded
