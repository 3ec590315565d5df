"""Inter-broker codecs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown): golden bytes
written by hand from Kafka 3.9's message specs, and round trips of random messages."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import inter_broker as ib
from odradek.protocol.errors import InvalidRequestError, UnsupportedVersionError

TID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def cstr(s: str) -> bytes:  # compact string: length + 1 as a uvarint (short strings: one byte)
    return bytes([len(s) + 1]) + s.encode()


def carr(*items: bytes) -> bytes:  # compact array of already encoded items
    return bytes([len(items) + 1]) + b"".join(items)


def ints(*vs: int) -> bytes:
    return carr(*(i32(v) for v in vs))


NO_TAGS = b"\x00"


def test_leader_and_isr_v7_golden() -> None:
    req = ib.LeaderAndIsrRequest(
        controller_id=1, controller_epoch=3, broker_epoch=77,
        partition_states=(ib.LeaderAndIsrPartitionState("t", 0, 3, 2, 5, (2, 1), 9, (2, 1, 3), (3,), (), True, 0),),
        live_leaders=(ib.LiveLeader(2, "h", 9092),), topic_ids={"t": TID}, type=1,
    )
    golden = (
        i32(1) + b"\x00" + i32(3) + i64(77) + i8(1)
        + carr(cstr("t") + TID.bytes + carr(
            i32(0) + i32(3) + i32(2) + i32(5) + ints(2, 1) + i32(9) + ints(2, 1, 3) + ints(3) + ints()
            + b"\x01" + i8(0) + NO_TAGS) + NO_TAGS)
        + carr(i32(2) + cstr("h") + i32(9092) + NO_TAGS)
        + NO_TAGS
    )
    assert ib.encode_leader_and_isr_request(req, 7) == golden
    assert ib.decode_leader_and_isr_request(golden, 7) == req
    v6 = ib.encode_leader_and_isr_request(req, 6)
    assert v6 == golden[:4] + golden[5:]  # v6 has no isKRaftController
    assert ib.decode_leader_and_isr_request(v6, 6) == req


def test_leader_and_isr_response_golden() -> None:
    resp = ib.LeaderAndIsrResponse(0, (ib.LeaderAndIsrPartitionError("t", 0, 0), ib.LeaderAndIsrPartitionError("t", 1, 6)))
    golden = i16(0) + carr(TID.bytes + carr(i32(0) + i16(0) + NO_TAGS, i32(1) + i16(6) + NO_TAGS) + NO_TAGS) + NO_TAGS
    assert ib.encode_leader_and_isr_response(resp, {"t": TID}) == golden
    assert ib.decode_leader_and_isr_response(golden, {TID: "t"}) == resp


def test_stop_replica_v4_golden() -> None:
    req = ib.StopReplicaRequest(1, 3, 77, (ib.StopReplicaPartitionState("t", 0, -2, True),
                                           ib.StopReplicaPartitionState("t", 1, 4, False)))
    golden = (
        i32(1) + b"\x00" + i32(3) + i64(77)
        + carr(cstr("t") + carr(i32(0) + i32(-2) + b"\x01" + NO_TAGS, i32(1) + i32(4) + b"\x00" + NO_TAGS) + NO_TAGS)
        + NO_TAGS
    )
    assert ib.encode_stop_replica_request(req) == golden
    assert ib.decode_stop_replica_request(golden) == req
    resp = ib.StopReplicaResponse(0, (ib.StopReplicaPartitionError("t", 0, 0),))
    rgolden = i16(0) + carr(cstr("t") + i32(0) + i16(0) + NO_TAGS) + NO_TAGS
    assert ib.encode_stop_replica_response(resp) == rgolden
    assert ib.decode_stop_replica_response(rgolden) == resp


def test_update_metadata_v8_golden_with_tagged_type() -> None:
    req = ib.UpdateMetadataRequest(
        1, 3, 77,
        (ib.UpdateMetadataPartitionState("t", 0, 3, 2, 5, (2,), 9, (2, 1), (1,)),),
        (ib.UpdateMetadataBroker(2, (ib.UpdateMetadataEndpoint(9092, "h"),), None),),
        {"t": TID}, type=2,
    )
    body = (
        i32(1) + b"\x00" + i32(3) + i64(77)
        + carr(cstr("t") + TID.bytes + carr(
            i32(0) + i32(3) + i32(2) + i32(5) + ints(2) + i32(9) + ints(2, 1) + ints(1) + NO_TAGS) + NO_TAGS)
        + carr(i32(2) + carr(i32(9092) + cstr("h") + cstr("PLAINTEXT") + i16(0) + NO_TAGS) + b"\x00" + NO_TAGS)
    )
    golden = body + b"\x01" + b"\x00" + b"\x01" + i8(2)  # one tagged field: tag 0, size 1, Type
    assert ib.encode_update_metadata_request(req) == golden
    assert ib.decode_update_metadata_request(golden) == req
    default = ib.encode_update_metadata_request(ib.UpdateMetadataRequest(1, 3, 77, req.partition_states,
                                                                        req.live_brokers, {"t": TID}))
    assert default == body + NO_TAGS
    assert ib.encode_update_metadata_response(ib.UpdateMetadataResponse(0)) == i16(0) + NO_TAGS


def test_controlled_shutdown_v3_golden() -> None:
    assert ib.encode_controlled_shutdown_request(ib.ControlledShutdownRequest(2, 77)) == i32(2) + i64(77) + NO_TAGS
    resp = ib.ControlledShutdownResponse(0, (("t", 1),))
    golden = i16(0) + carr(cstr("t") + i32(1) + NO_TAGS) + NO_TAGS
    assert ib.encode_controlled_shutdown_response(resp) == golden
    assert ib.decode_controlled_shutdown_response(golden) == resp


def test_errors() -> None:
    with pytest.raises(UnsupportedVersionError):
        ib.encode_controlled_shutdown_request(ib.ControlledShutdownRequest(2, 77), 2)
    good = ib.encode_stop_replica_request(ib.StopReplicaRequest(1, 3, 77, ()))
    with pytest.raises(InvalidRequestError):
        ib.decode_stop_replica_request(good[:-2])
    with pytest.raises(InvalidRequestError):
        ib.decode_stop_replica_request(good + b"\x00")


def test_frames_have_flexible_headers() -> None:
    from odradek.protocol.headers import parse_request_header

    frame = ib.encode_request_frame(ib.CONTROLLED_SHUTDOWN, 3, b"body", 7, "broker-1")
    header, pos = parse_request_header(frame, header_version=2)
    assert header == (7, 3, 7, "broker-1") and frame[pos:] == b"body"
    assert ib.encode_response_frame(b"x", 7) == i32(7) + NO_TAGS + b"x"


def test_kio_has_alter_partition_and_the_admin_apis() -> None:
    """AlterPartition (56), ElectLeaders (43), AlterPartitionReassignments (45) and
    ListPartitionReassignments (46) come from kio, like every other API."""
    from odradek.protocol.messages import request_class

    for api_key, version in ((56, 3), (43, 2), (45, 0), (46, 0)):
        assert request_class(api_key, version) is not None
    for api_key in (4, 5, 6, 7):
        assert request_class(api_key, 0) is None


# -- round trips

ids = st.integers(-1, 2**31 - 1)
small = st.integers(-(2**31), 2**31 - 1)
names = st.text(min_size=1, max_size=12)
brokers = st.lists(st.integers(0, 1000), max_size=5).map(tuple)
uuids = st.uuids()


@st.composite
def leader_and_isr(draw: st.DrawFn) -> ib.LeaderAndIsrRequest:
    topics = draw(st.lists(names, min_size=0, max_size=3, unique=True))
    states = tuple(
        ib.LeaderAndIsrPartitionState(t, draw(ids), draw(small), draw(ids), draw(small), draw(brokers), draw(small),
                                      draw(brokers), draw(brokers), draw(brokers), draw(st.booleans()),
                                      draw(st.integers(0, 1)))
        for t in topics for _ in range(draw(st.integers(1, 3)))
    )
    leaders = tuple(ib.LiveLeader(draw(ids), draw(names), draw(small)) for _ in range(draw(st.integers(0, 3))))
    return ib.LeaderAndIsrRequest(draw(ids), draw(small), draw(st.integers(-1, 2**63 - 1)), states, leaders,
                                  {t: draw(uuids) for t in topics}, draw(st.integers(0, 2)), draw(st.booleans()))


@settings(max_examples=200)
@given(req=leader_and_isr(), version=st.sampled_from([6, 7]))
def test_leader_and_isr_round_trip(req: ib.LeaderAndIsrRequest, version: int) -> None:
    if version == 6:
        req = ib.LeaderAndIsrRequest(req.controller_id, req.controller_epoch, req.broker_epoch,
                                     req.partition_states, req.live_leaders, req.topic_ids, req.type, False)
    assert ib.decode_leader_and_isr_request(ib.encode_leader_and_isr_request(req, version), version) == req


@st.composite
def update_metadata(draw: st.DrawFn) -> ib.UpdateMetadataRequest:
    topics = draw(st.lists(names, max_size=3, unique=True))
    states = tuple(
        ib.UpdateMetadataPartitionState(t, draw(ids), draw(small), draw(ids), draw(small), draw(brokers), draw(small),
                                        draw(brokers), draw(brokers))
        for t in topics for _ in range(draw(st.integers(1, 3)))
    )
    live = tuple(
        ib.UpdateMetadataBroker(draw(ids), tuple(ib.UpdateMetadataEndpoint(draw(small), draw(names), draw(names),
                                                                           draw(st.integers(0, 3)))
                                                 for _ in range(draw(st.integers(0, 2)))),
                                draw(st.none() | names))
        for _ in range(draw(st.integers(0, 3)))
    )
    return ib.UpdateMetadataRequest(draw(ids), draw(small), draw(st.integers(-1, 2**63 - 1)), states, live,
                                    {t: draw(uuids) for t in topics}, draw(st.integers(0, 2)), draw(st.booleans()))


@settings(max_examples=200)
@given(req=update_metadata())
def test_update_metadata_round_trip(req: ib.UpdateMetadataRequest) -> None:
    assert ib.decode_update_metadata_request(ib.encode_update_metadata_request(req)) == req


@settings(max_examples=200)
@given(
    states=st.lists(st.tuples(names, ids, small, st.booleans()), max_size=6),
    epochs=st.tuples(ids, small, st.integers(-1, 2**63 - 1)),
    kraft=st.booleans(),
)
def test_stop_replica_round_trip(states, epochs, kraft) -> None:  # type: ignore[no-untyped-def]
    grouped = sorted(states, key=lambda s: [x[0] for x in states].index(s[0]))  # wire groups by topic
    req = ib.StopReplicaRequest(*epochs, tuple(ib.StopReplicaPartitionState(*s) for s in grouped), kraft)
    assert ib.decode_stop_replica_request(ib.encode_stop_replica_request(req)) == req
    resp = ib.StopReplicaResponse(3, tuple(ib.StopReplicaPartitionError(s[0], s[1], 6) for s in states))
    assert ib.decode_stop_replica_response(ib.encode_stop_replica_response(resp)) == resp


@given(broker_id=ids, epoch=st.integers(-1, 2**63 - 1),
       remaining=st.lists(st.tuples(names, ids), max_size=5))
def test_controlled_shutdown_round_trip(broker_id, epoch, remaining) -> None:  # type: ignore[no-untyped-def]
    req = ib.ControlledShutdownRequest(broker_id, epoch)
    assert ib.decode_controlled_shutdown_request(ib.encode_controlled_shutdown_request(req)) == req
    resp = ib.ControlledShutdownResponse(0, tuple(remaining))
    assert ib.decode_controlled_shutdown_response(ib.encode_controlled_shutdown_response(resp)) == resp
