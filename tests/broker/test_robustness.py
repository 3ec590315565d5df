"""A misbehaving client never takes the broker down or affects other connections."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator

import pytest

from odradek.testing.process import BrokerProcess

from .wire import Wire, metadata_request, req

pytestmark = pytest.mark.timeout(60)

BROKER_SETTINGS = {"socket.request.max.bytes": 1_000_000}


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[Wire]:
    """A well-behaved connection open across the misbehaviour."""
    with Wire(broker.bootstrap_servers) as w:
        assert (
            int(
                w.call(req(18, 3, client_software_name="b", client_software_version="1")).error_code
            )
            == 0
        )
        yield w
    assert broker.running


def _still_fine(broker: BrokerProcess, bystander: Wire) -> None:
    assert int(bystander.call(req(18, 0)).error_code) == 0
    with Wire(broker.bootstrap_servers) as fresh:
        assert fresh.call(metadata_request(None)).brokers


def _closed(broker: BrokerProcess, payload: bytes) -> bool:
    with Wire(broker.bootstrap_servers) as w:
        try:
            w.send_raw(payload)
        except OSError:
            return True
        return w.is_closed_by_peer(5)


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">i", -1),
        struct.pack(">i", 1_000_001),
        struct.pack(">i", 2**31 - 1) + b"x" * 100,
        struct.pack(">i", 2) + b"\x00\x12",  # too short for a header
        struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, 0),  # unknown api key
        struct.pack(">i", 10) + struct.pack(">hhih", 0, 1, 1, 0),  # Produce v1 without a body
        struct.pack(">i", 10) + struct.pack(">hhih", 1, 99, 1, 0),  # Fetch v99
        struct.pack(">i", 12) + struct.pack(">hhih", 3, 12, 1, 0) + b"\xff\xff",  # truncated body
        struct.pack(">i", 20)
        + struct.pack(">hhih", 0, 9, 1, 50)
        + b"\x00" * 10,  # client_id overrun
    ],
    ids=[
        "negative",
        "too-big",
        "huge",
        "short",
        "unknown-api",
        "old-produce",
        "fetch-v99",
        "truncated",
        "client-id",
    ],
)
def test_malformed_frames_close_only_that_connection(
    broker: BrokerProcess, bystander: Wire, payload: bytes
) -> None:
    assert _closed(broker, payload)
    _still_fine(broker, bystander)


def test_random_garbage(broker: BrokerProcess, bystander: Wire) -> None:
    rng = __import__("random").Random(1234)
    for _ in range(30):
        size = rng.randrange(1, 300)
        body = bytes(rng.randrange(256) for _ in range(size))
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            try:
                s.sendall(struct.pack(">i", len(body)) + body)
                s.settimeout(2)
                s.recv(65536)
            except OSError:
                pass
    for _ in range(10):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            try:
                s.sendall(os.urandom(rng.randrange(1, 2000)))
            except OSError:
                pass
    _still_fine(broker, bystander)


def test_mutated_valid_requests(broker: BrokerProcess, bystander: Wire) -> None:
    from odradek.protocol.messages import encode_request

    good = encode_request(metadata_request(["mutated"], version=9), correlation_id=1, client_id="m")
    rng = __import__("random").Random(99)
    for _ in range(40):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(4, len(data))
            data[pos] = rng.randrange(256)
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
            s.sendall(bytes(data))
            s.settimeout(2)
            try:
                s.recv(65536)
            except OSError:
                pass
    _still_fine(broker, bystander)


def test_client_disconnects_mid_request_and_mid_long_poll(
    broker: BrokerProcess, bystander: Wire
) -> None:
    from .wire import create, fetch_request

    with Wire(broker.bootstrap_servers) as w:
        create(w, "disconnect-test")
        w.send(fetch_request("disconnect-test", {0: 0}, max_wait_ms=5000))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(struct.pack(">i", 1000) + b"partial")
    _still_fine(broker, bystander)


def test_client_that_never_reads_is_throttled_not_fatal(
    broker: BrokerProcess, bystander: Wire
) -> None:
    from odradek.protocol.messages import encode_request
    from odradek.protocol.records import build_batch

    from .wire import create, fetch_request, produce_request

    with Wire(broker.bootstrap_servers) as w:
        create(w, "never-reads")
        w.call(produce_request("never-reads", 0, build_batch([(None, b"x" * 200_000, (), None)])))
        frame = encode_request(
            fetch_request("never-reads", {0: 0}), correlation_id=1, client_id="greedy"
        )
        w.sock.setblocking(False)
        sent = 0
        try:
            for _ in range(2000):  # ~400 MB of responses if the broker buffered them all
                w.sock.send(frame)
                sent += 1
        except BlockingIOError:
            pass
        assert sent > 10
        _still_fine(broker, bystander)
