"""Headers and kio-backed message codec: round trips, header versions, errors, tagged fields."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v3.response import ApiVersion
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch_v12
from kio.schema.metadata.v5.request import MetadataRequest as MetadataRequestV5
from kio.schema.metadata.v5.request import MetadataRequestTopic as MetadataRequestTopicV5
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.produce.v10 import response as produce_v10
from kio.static.primitive import i16, i32, i32Timedelta, i64

from odradek.protocol.errors import (
    InvalidRequestError,
    InvalidResponseError,
    ProtocolError,
    UnsupportedVersionError,
)
from odradek.protocol.headers import (
    RequestHeaderInfo,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from odradek.protocol.messages import (
    decode_request,
    decode_response,
    encode_api_versions_error,
    encode_body,
    encode_request,
    encode_response,
    read_correlation_id,
)

ZERO = i32Timedelta.parse(datetime.timedelta(0))


def test_header_versions() -> None:
    assert request_header_version(18, 2) == 1
    assert request_header_version(18, 3) == 2
    assert request_header_version(3, 8) == 1
    assert request_header_version(3, 9) == 2
    assert request_header_version(1, 12) == 2
    assert request_header_version(9999, 0) == 1
    assert response_header_version(18, 3) == 0  # ApiVersions: always v0
    assert response_header_version(3, 9) == 1
    assert response_header_version(3, 8) == 0
    assert response_header_version(0, 9) == 1


def test_request_header_v2_keeps_legacy_client_id_and_skips_tags() -> None:
    raw = struct.pack(">hhih", 3, 12, 77, 3) + b"abc" + b"\x02" + b"\x00\x01x" + b"\x05\x02yz"
    header, pos = parse_request_header(raw + b"BODY")
    assert header == RequestHeaderInfo(3, 12, 77, "abc")
    assert pos == len(raw)
    assert encode_request_header(3, 12, 77, "abc") == raw[:13] + b"\x00"
    assert encode_request_header(3, 5, 1, None) == struct.pack(">hhih", 3, 5, 1, -1)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\x03\x00\x0c",
        struct.pack(">hhih", 3, 5, 1, 10) + b"abc",
        struct.pack(">hhih", 3, 5, 1, -2),
        struct.pack(">hhih", 3, 5, 1, 2) + b"\xff\xfe",
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x01\x00\x05",
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x80",
    ],
)
def test_bad_request_headers(raw: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        parse_request_header(raw)
    with pytest.raises(InvalidRequestError):
        decode_request(raw)


def test_response_headers() -> None:
    assert encode_response_header(5, 0) == b"\x00\x00\x00\x05"
    assert encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
    assert parse_response_header(b"\x00\x00\x00\x05\x00rest", 1) == (5, 5)
    assert parse_response_header(b"\x00\x00\x00\x05\x00rest", 0) == (5, 4)
    with pytest.raises(InvalidResponseError):
        parse_response_header(b"\x00\x00", 0)


@pytest.mark.parametrize(
    "request_entity",
    [
        ApiVersionsRequestV3(client_software_name="odradek", client_software_version="0.1"),
        MetadataRequestV5(
            topics=(MetadataRequestTopicV5(name="t"),), allow_auto_topic_creation=True
        ),
        MetadataRequestV12(
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    ],
)
@pytest.mark.parametrize("client_id", ["client-1", None, ""])
def test_request_round_trip(request_entity: object, client_id: str | None) -> None:
    data = encode_request(request_entity, correlation_id=42, client_id=client_id)
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    header, decoded = decode_request(memoryview(data)[4:])
    cls = type(request_entity)
    assert header == RequestHeaderInfo(cls.__api_key__, cls.__version__, 42, client_id)  # type: ignore[attr-defined]
    assert decoded == request_entity


def test_unknown_api_and_version() -> None:
    raw = struct.pack(">hhih", 18, 99, 12, 2) + b"cl" + b"\x00whatever"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(raw)
    err = info.value
    assert (err.api_key, err.version, err.correlation_id, err.client_id) == (18, 99, 12, "cl")
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(struct.pack(">hhih", 7, 0, 3, -1))
    assert info.value.api_key == 7 and info.value.correlation_id == 3
    # Produce v0-v2 are below what kio decodes.
    with pytest.raises(UnsupportedVersionError):
        decode_request(struct.pack(">hhih", 0, 2, 3, -1) + b"\x00" * 20)


def test_trailing_bytes_and_truncation() -> None:
    req = ApiVersionsRequestV3(client_software_name="a", client_software_version="b")
    data = encode_request(req, correlation_id=1, client_id="c")[4:]
    with pytest.raises(InvalidRequestError) as info:
        decode_request(data + b"\x00")
    assert info.value.correlation_id == 1
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            decode_request(data[:cut])


def test_encode_response_header_versions() -> None:
    response = ApiVersionsResponseV3(
        error_code=ErrorCode.none,
        api_keys=(ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(3)),),
        throttle_time=ZERO,
    )
    data = encode_response(response, 9, api_key=18, api_version=3)
    body = encode_body(response)
    assert data == struct.pack(">ii", 4 + len(body), 9) + body  # header v0
    # default-valued tagged fields are not written: the body ends with an empty tag section
    assert body == bytes.fromhex("000002001200000003000000000000")
    assert decode_response(18, 3, memoryview(data)[4:], header=True) == response
    assert decode_response(18, 3, body) == response
    assert read_correlation_id(memoryview(data)[4:]) == 9
    with pytest.raises(ValueError):
        encode_response(response, 9, api_key=18, api_version=2)


def test_flexible_response_has_header_v1_and_no_default_tags() -> None:
    response = produce_v10.ProduceResponse(
        responses=(
            produce_v10.TopicProduceResponse(
                name="t",
                partition_responses=(
                    produce_v10.PartitionProduceResponse(
                        index=i32(0),
                        error_code=ErrorCode.none,
                        base_offset=i64(5),
                        log_append_time=None,
                        log_start_offset=i64(0),
                        record_errors=(),
                    ),
                ),
            ),
        ),
        throttle_time=ZERO,
    )
    data = encode_response(response, 3, api_key=0, api_version=10)
    body = encode_body(response)
    assert data == struct.pack(">ii", 5 + len(body), 3) + b"\x00" + body
    # partition: index, error, base_offset, log_append_time, log_start_offset, record_errors,
    # error_message, tags (none: current_leader is at its default)
    # record_errors [] · error_message null · partition tags · topic tags · throttle · tags
    assert body.endswith(b"\x01" + b"\x00" + b"\x00" + b"\x00" + b"\x00\x00\x00\x00" + b"\x00")
    partition = fetch_v12.PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        high_watermark=i64(10),
        aborted_transactions=None,
        records=None,
    )
    # aborted_transactions null · preferred_read_replica -1 · records null · no tags
    assert encode_body(partition).endswith(b"\x00" + b"\xff\xff\xff\xff" + b"\x00" + b"\x00")


def test_api_versions_error_is_a_v0_response() -> None:
    data = encode_api_versions_error(11, [(18, 0, 4)])
    assert struct.unpack_from(">i", data)[0] == len(data) - 4
    frame = memoryview(data)[4:]
    assert read_correlation_id(frame) == 11
    decoded = decode_response(18, 0, frame, header=True)
    assert isinstance(decoded, ApiVersionsResponseV0)
    assert decoded.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]


def test_decode_response_errors() -> None:
    with pytest.raises(UnsupportedVersionError):
        decode_response(9999, 0, b"")
    with pytest.raises(InvalidResponseError):
        decode_response(18, 3, b"\x00")
    with pytest.raises(InvalidResponseError):
        decode_response(18, 0, b"\x00\x00\x00\x00\x00\x00" + b"x")


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_request_encoder_matches_kio(version: int) -> None:
    """The zero-copy Produce encoder writes what kio writes for the same request."""
    from odradek.client._protocol import build, nested, request_module
    from odradek.protocol.produce_request_encoder import encode_produce_request
    from odradek.protocol.records import build_batch

    one = build_batch([(b"k", b"v", (), 1)])
    two = build_batch([(None, b"x" * 300, (("h", b"1"),), 2)], base_offset=5)
    topic_data: dict[str, list[tuple[int, bytes | memoryview]]] = {
        "alpha": [(0, one), (3, memoryview(two))],
        "b": [(1, one + two)],
    }
    parts = encode_produce_request(version, 77, "cid", -1, 1500, topic_data)
    assert any(isinstance(p, memoryview) for p in parts)  # records are not copied
    mod = request_module(0, version)
    request = build(
        mod.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=1500,
        topic_data=[
            nested(
                mod,
                "TopicProduceData",
                name=topic,
                partition_data=[
                    nested(mod, "PartitionProduceData", index=index, records=bytes(records))
                    for index, records in partitions
                ],
            )
            for topic, partitions in topic_data.items()
        ],
    )
    assert b"".join(parts) == encode_request(request, correlation_id=77, client_id="cid")
    header, decoded = decode_request(b"".join(parts)[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (0, version, 77)
    assert [bytes(p.records) for t in decoded.topic_data for p in t.partition_data] == [
        one,
        two,
        one + two,
    ]


def test_produce_request_encoder_rejects_other_versions() -> None:
    from odradek.protocol.produce_request_encoder import encode_produce_request

    with pytest.raises(ValueError):
        encode_produce_request(10, 1, None, 1, 100, {})
