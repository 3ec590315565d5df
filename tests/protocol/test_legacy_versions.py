"""Old request versions (kio lacks them): decode into kio's target version, encode back.

kafka-python 3.0 generates its message classes from the same Kafka JSON specs, independently
of kio and of odradek: it encodes the old requests and decodes odradek's old responses here.
"""

from __future__ import annotations

import datetime
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from kafka.protocol import admin as kp_admin
from kafka.protocol.consumer import fetch as kp_fetch
from kafka.protocol.consumer import group as kp_group
from kafka.protocol.consumer import offsets as kp_offsets
from kafka.protocol.producer import produce as kp_produce
from kio.index import load_response_schema

from broker.wire import kp_build
from odradek.protocol.errors import InvalidRequestError
from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response
from odradek.protocol.legacy_records import down_convert, encode_message, iter_messages
from odradek.protocol.legacy_versions import (
    LEGACY,
    LEGACY_VERSIONS,
    Array,
    LazyDownConversion,
    build_entity,
    legacy_codec,
    read_body,
    write_body,
)
from odradek.protocol.records import build_batch, iter_batches

KP = {
    0: (kp_produce.ProduceRequest, kp_produce.ProduceResponse),
    1: (kp_fetch.FetchRequest, kp_fetch.FetchResponse),
    2: (kp_offsets.ListOffsetsRequest, kp_offsets.ListOffsetsResponse),
    8: (kp_group.OffsetCommitRequest, kp_group.OffsetCommitResponse),
    9: (kp_group.OffsetFetchRequest, kp_group.OffsetFetchResponse),
    19: (kp_admin.CreateTopicsRequest, kp_admin.CreateTopicsResponse),
    20: (kp_admin.DeleteTopicsRequest, kp_admin.DeleteTopicsResponse),
    23: (kp_offsets.OffsetForLeaderEpochRequest, kp_offsets.OffsetForLeaderEpochResponse),
    29: (kp_admin.DescribeAclsRequest, kp_admin.DescribeAclsResponse),
    30: (kp_admin.CreateAclsRequest, kp_admin.CreateAclsResponse),
    31: (kp_admin.DeleteAclsRequest, kp_admin.DeleteAclsResponse),
    32: (kp_admin.DescribeConfigsRequest, kp_admin.DescribeConfigsResponse),
    34: (kp_admin.AlterReplicaLogDirsRequest, kp_admin.AlterReplicaLogDirsResponse),
    35: (kp_admin.DescribeLogDirsRequest, kp_admin.DescribeLogDirsResponse),
}


def kp_request(api_key: int, version: int, values: dict[str, Any]) -> bytes:
    return bytes(kp_build(KP[api_key][0][version], values).encode())


def kp_response(api_key: int, version: int, body: bytes) -> dict[str, Any]:
    return dict(KP[api_key][1][version].decode(body).to_dict())


def roundtrip(api_key: int, version: int, values: dict[str, Any]) -> Any:
    codec = legacy_codec(api_key, version)
    assert codec is not None
    body = kp_request(api_key, version, values)
    legacy, size = codec.decode(body, 0)
    assert size == len(body)
    assert legacy.request.__version__ == LEGACY[(api_key, version)].target_version
    return codec, legacy


def response(api_key: int, target: int, values: dict[str, Any]) -> Any:
    return build_entity(load_response_schema(api_key, target), values)


def test_table_covers_every_version_below_kio() -> None:
    expected = {
        **{0: 3, 1: 4, 2: 1, 8: 2, 9: 1, 19: 2, 20: 1, 23: 2, 29: 1, 30: 1, 31: 1, 32: 1},
        **{34: 1, 35: 1},
    }
    assert {k: r.stop for k, r in LEGACY_VERSIONS.items()} == expected
    for (key, _v), entry in LEGACY.items():
        assert entry.target_version == expected[key]


@pytest.mark.parametrize("version", [0])
def test_list_offsets_v0(version: int) -> None:
    codec, legacy = roundtrip(
        2,
        version,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "timestamp": -1, "max_num_offsets": 1},
                        {"partition_index": 1, "timestamp": -2, "max_num_offsets": 0},
                        {"partition_index": 2, "timestamp": 5, "max_num_offsets": 3},
                    ],
                }
            ],
        },
    )
    req = legacy.request
    assert [(p.partition_index, p.timestamp) for p in req.topics[0].partitions] == [
        (0, -1),
        (1, -2),
        (2, 5),
    ]
    resp = response(
        2,
        1,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 42},
                        {"partition_index": 1, "error_code": 0, "timestamp": -1, "offset": 0},
                        {"partition_index": 2, "error_code": 3, "timestamp": -1, "offset": -1},
                    ],
                }
            ]
        },
    )
    parts, size = codec.encode_response(resp, legacy)
    body = b"".join(parts)
    assert len(body) == size
    decoded = kp_response(2, 0, body)
    partitions = decoded["topics"][0]["partitions"]
    assert [(p["error_code"], p["old_style_offsets"]) for p in partitions] == [
        (0, [42]),
        (0, []),  # max_num_offsets 0
        (3, []),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_v0_v1(version: int) -> None:
    partition: dict[str, Any] = {
        "partition_index": 3,
        "committed_offset": 17,
        "committed_metadata": "m",
    }
    values: dict[str, Any] = {"group_id": "g", "topics": [{"name": "t", "partitions": [partition]}]}
    if version == 1:
        values.update(generation_id_or_member_epoch=5, member_id="member-1")
        partition["commit_timestamp"] = 123
    codec, legacy = roundtrip(8, version, values)
    req = legacy.request
    assert req.group_id == "g"
    assert req.generation_id_or_member_epoch == (5 if version else -1)
    assert req.member_id == ("member-1" if version else "")
    assert req.retention_time == datetime.timedelta(milliseconds=-1)
    p = req.topics[0].partitions[0]
    assert (p.partition_index, p.committed_offset, p.committed_metadata) == (3, 17, "m")
    resp = response(
        8,
        2,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 3, "error_code": 25}]}]},
    )
    body = b"".join(codec.encode_response(resp, legacy)[0])
    assert kp_response(8, version, body)["topics"][0]["partitions"][0]["error_code"] == 25


def test_offset_fetch_v0() -> None:
    codec, legacy = roundtrip(
        9, 0, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    )
    assert legacy.request.topics[0].partition_indexes == (0, 1)
    resp = response(
        9,
        1,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 9,
                            "metadata": None,
                            "error_code": 0,
                        },
                        {
                            "partition_index": 1,
                            "committed_offset": -1,
                            "metadata": "",
                            "error_code": 16,
                        },
                    ],
                }
            ]
        },
    )
    body = b"".join(codec.encode_response(resp, legacy)[0])
    parts = kp_response(9, 0, body)["topics"][0]["partitions"]
    assert [(p["committed_offset"], p["error_code"]) for p in parts] == [(9, 0), (-1, 16)]


@pytest.mark.parametrize("version", [0, 1])
def test_create_topics_v0_v1(version: int) -> None:
    values: dict[str, Any] = {
        "topics": [
            {
                "name": "t",
                "num_partitions": 3,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "retention.ms", "value": "1000"}],
            }
        ],
        "timeout_ms": 5000,
    }
    if version:
        values["validate_only"] = True
    codec, legacy = roundtrip(19, version, values)
    req = legacy.request
    assert req.timeout == datetime.timedelta(seconds=5)
    assert req.validate_only is bool(version)
    assert req.topics[0].configs[0].value == "1000"
    resp = response(
        19,
        2,
        {
            "throttle_time": 0,
            "topics": [{"name": "t", "error_code": 36, "error_message": "exists"}],
        },
    )
    body = b"".join(codec.encode_response(resp, legacy)[0])
    topic = kp_response(19, version, body)["topics"][0]
    assert topic["error_code"] == 36
    assert topic.get("error_message") == ("exists" if version else None)


def test_delete_topics_v0() -> None:
    codec, legacy = roundtrip(20, 0, {"topic_names": ["a", "b"], "timeout_ms": 100})
    assert legacy.request.topic_names == ("a", "b")
    resp = response(20, 1, {"throttle_time": 0, "responses": [{"name": "a", "error_code": 0}]})
    body = b"".join(codec.encode_response(resp, legacy)[0])
    assert kp_response(20, 0, body)["responses"] == [{"name": "a", "error_code": 0}]


def test_describe_configs_v0() -> None:
    codec, legacy = roundtrip(
        32,
        0,
        {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
    )
    assert legacy.request.resources[0].configuration_keys is None
    assert legacy.request.include_synonyms is False
    config = {"name": "retention.ms", "value": "1", "read_only": False, "is_sensitive": False}
    resp = response(
        32,
        1,
        {
            "throttle_time": 0,
            "results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": 2,
                    "resource_name": "t",
                    "configs": [
                        {**config, "config_source": 5, "synonyms": []},
                        {**config, "name": "x", "config_source": 1, "synonyms": []},
                    ],
                }
            ],
        },
    )
    body = b"".join(codec.encode_response(resp, legacy)[0])
    configs = kp_response(32, 0, body)["results"][0]["configs"]
    assert [(c["name"], c["is_default"]) for c in configs] == [("retention.ms", True), ("x", False)]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_v2_converts_message_sets(version: int) -> None:
    magic = 0 if version < 2 else 1
    good = encode_message(0, magic, b"k", b"v", timestamp=1234) + encode_message(
        1, magic, None, b"w", timestamp=1235
    )
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    values = {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [
            {
                "name": "t",
                "partition_data": [
                    {"index": 0, "records": good},
                    {"index": 1, "records": bytes(corrupt)},
                ],
            }
        ],
    }
    codec, legacy = roundtrip(0, version, values)
    req = legacy.request
    assert req.transactional_id is None and req.acks == -1
    p0, p1 = req.topic_data[0].partition_data
    records = [r for b in iter_batches(p0.records) for r in b.records()]
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k", b"v"), (1, None, b"w")]
    assert [r.timestamp for r in records] == ([-1, -1] if magic == 0 else [1234, 1235])
    assert p1.records is None
    assert legacy.partition_errors == {("t", 1): 2}  # CORRUPT_MESSAGE
    resp = response(
        0,
        3,
        {
            "responses": [
                {
                    "name": "t",
                    "partition_responses": [
                        {"index": 0, "error_code": 0, "base_offset": 10, "log_append_time": -1},
                        {"index": 1, "error_code": 87, "base_offset": -1, "log_append_time": -1},
                    ],
                }
            ],
            "throttle_time": 0,
        },
    )
    body = b"".join(codec.encode_response(resp, legacy)[0])
    parts = kp_response(0, version, body)["responses"][0]["partition_responses"]
    assert [(p["index"], p["error_code"], p["base_offset"]) for p in parts] == [
        (0, 0, 10),
        (1, 2, -1),
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_v0_v3_down_converts(version: int) -> None:
    values: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 100,
        "min_bytes": 1,
        "topics": [
            {
                "topic": "t",
                "partitions": [
                    {"partition": 0, "fetch_offset": 11, "partition_max_bytes": 1 << 20},
                    {"partition": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20},
                ],
            }
        ],
    }
    if version >= 3:
        values["max_bytes"] = 1 << 20
    codec, legacy = roundtrip(1, version, values)
    req = legacy.request
    assert req.max_bytes == (1 << 20 if version >= 3 else 0x7FFFFFFF)
    assert req.isolation_level == 0
    v2 = build_batch(
        [(b"k%d" % i, b"v%d" % i, [("h", b"x")], 1000 + i) for i in range(4)], base_offset=10
    )
    parts, size = encode_fetch_response(
        4,
        [
            (
                "t",
                [
                    FetchPartitionResponse(0, 0, 14, 14, records=v2),
                    FetchPartitionResponse(1, 56, -1, -1),  # KAFKA_STORAGE_ERROR
                ],
            )
        ],
    )
    out, out_size = codec.encode_response((parts, size), legacy)
    body = b"".join(b"".join(p.chunks()) if isinstance(p, LazyDownConversion) else p for p in out)
    assert len(body) == out_size
    decoded = KP[1][1][version].decode(body)
    p0, p1 = decoded.responses[0].partitions
    assert p1.error_code == 6  # NOT_LEADER_OR_FOLLOWER
    records = p0.records if isinstance(p0.records, bytes) else bytes(p0.records.buffer())
    messages = list(iter_messages(records, partial_ok=True))
    assert [m.offset for m in messages] == [11, 12, 13]  # cut before the fetch offset
    assert {m.magic for m in messages} == {0 if version <= 1 else 1}
    if version >= 2:
        assert [m.timestamp for m in messages] == [1001, 1002, 1003]
    expected = down_convert(v2, messages[0].magic, 11)
    assert records[: len(expected)] == expected


def test_trailing_bytes_and_truncation_are_invalid() -> None:
    codec = legacy_codec(20, 0)
    assert codec is not None
    body = kp_request(20, 0, {"topic_names": ["a"], "timeout_ms": 1})
    with pytest.raises(InvalidRequestError):
        codec.decode(body + b"\x00", 0)
    with pytest.raises(InvalidRequestError):
        codec.decode(body[:-1], 0)


LAYOUT = (
    ("a", "int8"),
    ("b", "int64"),
    ("s", "nullable_string"),
    ("xs", Array((("n", "string"), ("ids", Array("int32"))), nullable=True)),
    ("r", "records"),
    ("f", "bool"),
)


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "a": st.integers(-128, 127),
            "b": st.integers(-(2**63), 2**63 - 1),
            "s": st.none() | st.text(max_size=20),
            "xs": st.none()
            | st.lists(
                st.fixed_dictionaries(
                    {
                        "n": st.text(max_size=5),
                        "ids": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
                    }
                ),
                max_size=4,
            ),
            "r": st.none() | st.binary(max_size=40),
            "f": st.booleans(),
        }
    )
)
def test_layout_roundtrip(value: dict[str, Any]) -> None:
    data = write_body(LAYOUT, value)
    back, end = read_body(LAYOUT, data)
    assert end == len(data)
    assert back == value


# --- every layout against kafka-python's reading of the same bytes ------------------------

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
# kafka-python names fields after the JSON specs; kio (and these layouts) differ in a few
_KP_NAMES = {
    "timeout": "timeout_ms",
    "throttle_time": "throttle_time_ms",
    "max_wait": "max_wait_ms",
    "log_append_time": "log_append_time_ms",
}


def layout_values(kind: Any) -> st.SearchStrategy[Any]:
    """Values for a layout (records: null or a few bytes; nothing the layouts cannot hold)."""
    if isinstance(kind, str):
        if kind in _INTS:
            bits = _INTS[kind]
            return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        if kind == "bool":
            return st.booleans()
        if kind == "string":
            return st.text(max_size=8)
        if kind == "nullable_string":
            return st.none() | st.text(max_size=8)
        if kind == "records":
            return st.none() | st.binary(max_size=8)
        raise AssertionError(kind)
    if isinstance(kind, Array):
        items = st.lists(layout_values(kind.of), max_size=3)
        return (st.none() | items) if kind.nullable else items
    return st.fixed_dictionaries({name: layout_values(sub) for name, sub in kind})


def kp_plain(value: Any) -> Any:
    """kafka-python's to_dict() with our names, records as bytes."""
    if isinstance(value, dict):
        names = {v: k for k, v in _KP_NAMES.items()}
        return {names.get(k, k): kp_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [kp_plain(v) for v in value]
    return value


def _without_records(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_records(v) for k, v in value.items() if k != "records"}
    if isinstance(value, list):
        return [_without_records(v) for v in value]
    return value


@pytest.mark.parametrize(("key", "version"), sorted(LEGACY))
@pytest.mark.parametrize("side", ["request", "response"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_layouts_match_kafka_python(key: int, version: int, side: str, data: st.DataObject) -> None:
    entry = LEGACY[(key, version)]
    layout = entry.request if side == "request" else entry.response
    value = data.draw(layout_values(layout))
    body = write_body(layout, value)
    kp_cls = KP[key][0 if side == "request" else 1][version]
    decoded = kp_plain(kp_cls.decode(body).to_dict())
    assert _without_records(decoded) == _without_records(value)


def _shared(sent: Any, got: Any) -> None:
    """Every field the old request carried reaches the kio request unchanged (by name)."""
    if isinstance(sent, dict):
        for name, value in sent.items():
            if name in got and name != "records":
                _shared(value, got[name])
    elif isinstance(sent, list):
        assert len(sent) == len(got)
        for a, b in zip(sent, got, strict=True):
            _shared(a, b)
    else:
        assert sent == got


@pytest.mark.parametrize(("key", "version"), sorted(LEGACY))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_requests_reach_the_target_version(key: int, version: int, data: st.DataObject) -> None:
    from odradek.protocol.legacy_versions import entity_to_dict

    entry = LEGACY[(key, version)]
    value = data.draw(layout_values(entry.request))
    codec = legacy_codec(key, version)
    assert codec is not None
    legacy, _size = codec.decode(write_body(entry.request, value), 0)
    assert legacy.request.__version__ == entry.target_version
    _shared(value, entity_to_dict(legacy.request))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_response_from_the_hand_written_v3_encoder(version: int) -> None:
    from odradek.protocol.produce_response import encode_produce_response

    codec = legacy_codec(0, version)
    assert codec is not None
    legacy, _ = codec.decode(
        kp_request(0, version, {"acks": 1, "timeout_ms": 1, "topic_data": []}), 0
    )
    body = encode_produce_response(3, [("t", [(0, 0, 42, 1_700_000_000_123, -1, (), None)])])

    class Encoded:  # what odradek.broker.registry.EncodedResponse looks like
        parts = (body,)
        size = len(body)

    for response in (body, Encoded(), ([body], len(body))):
        out = b"".join(codec.encode_response(response, legacy)[0])
        (p,) = kp_response(0, version, out)["responses"][0]["partition_responses"]
        assert (p["index"], p["error_code"], p["base_offset"]) == (0, 0, 42)
        assert p.get("log_append_time_ms", -1) == (1_700_000_000_123 if version == 2 else -1)


def test_offset_commit_response_from_encoded_v2_bytes() -> None:
    from odradek.protocol.messages import encode_body

    codec = legacy_codec(8, 1)
    assert codec is not None
    legacy, _ = codec.decode(
        kp_request(
            8,
            1,
            {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "topics": []},
        ),
        0,
    )
    v2 = response(
        8,
        2,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 22}]}]},
    )
    out = b"".join(codec.encode_response(encode_body(v2), legacy)[0])
    assert kp_response(8, 1, out)["topics"][0]["partitions"][0]["error_code"] == 22
