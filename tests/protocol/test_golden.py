"""Request frames captured from real clients (capture_golden.py) decode as expected; fuzzed
frames yield a request or a ProtocolError, never anything else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ProtocolError, UnsupportedVersionError
from odradek.protocol.messages import decode_request, encode_request
from odradek.protocol.records import iter_batches

GOLDEN = Path(__file__).parent / "golden"
MANIFEST: dict[str, dict[str, Any]] = json.loads((GOLDEN / "manifest.json").read_text())
FRAMES = {name: (GOLDEN / name).read_bytes() for name in sorted(MANIFEST)}
CLIENT_IDS = {"ck": "golden-ck", "kp": "golden-kp", "ak": "golden-ak", "kcat": "golden-kcat"}
CODECS = {"none": "NONE", "gzip": "GZIP", "snappy": "SNAPPY", "lz4": "LZ4", "zstd": "ZSTD"}


def test_every_client_and_api_is_covered() -> None:
    runs = {e["run"].split("_")[0] for e in MANIFEST.values()}
    assert runs == {"ck", "kp", "ak", "kcat"}
    apis = {e["api_key"] for e in MANIFEST.values()}
    assert {0, 1, 2, 3, 8, 9, 10, 11, 13, 14, 18} <= apis
    codecs = {e["run"].split("_")[1] for e in MANIFEST.values() if "_" in e["run"]}
    assert codecs == set(CODECS)


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_golden_frame_decodes(name: str) -> None:
    expected = MANIFEST[name]
    frame = FRAMES[name]
    client_id = CLIENT_IDS[expected["run"].split("_")[0]]
    if expected.get("unsupported"):
        with pytest.raises(UnsupportedVersionError) as info:
            decode_request(frame)
        assert (info.value.api_key, info.value.version) == (
            expected["api_key"],
            expected["api_version"],
        )
        assert info.value.client_id == client_id
        return
    header, request = decode_request(memoryview(frame))
    assert header.api_key == expected["api_key"] == type(request).__api_key__
    assert header.api_version == expected["api_version"] == type(request).__version__
    assert header.correlation_id == expected["correlation_id"]
    assert header.client_id == client_id
    # kio writes back exactly what the client sent (no stray tagged fields, same layout).
    again = encode_request(request, correlation_id=header.correlation_id, client_id=client_id)
    assert again[4:] == frame
    _check_fields(expected, request)


def _check_fields(expected: dict[str, Any], request: Any) -> None:
    api_key = expected["api_key"]
    if api_key == 18 and expected["api_version"] >= 3:
        assert request.client_software_name
    elif api_key == 3:
        assert request.topics is None or [t.name for t in request.topics] in ([], ["golden"])
    elif api_key == 0:
        assert [t.name for t in request.topic_data] == ["golden"]
        codec = CODECS[expected["run"].split("_")[1]]
        records = []
        for topic in request.topic_data:
            for partition in topic.partition_data:
                for batch in iter_batches(partition.records):
                    batch.validate()
                    assert batch.compression.name == codec
                    for r in batch.records():
                        assert r.key is not None and r.value is not None
                        records.append((r.key.decode(), r.value.decode()))
        assert records == [(k, v) for k, v, _h, _c in expected["records"]]
        assert [k for k, _ in records] == ["key-0", "key-1", "key-2"]
        assert records[1][1] == "value-1|" * 40
        if expected["run"] == "kp_snappy":  # kafka-python writes xerial-framed snappy
            assert (
                bytes(request.topic_data[0].partition_data[0].records[61:69]) == b"\x82SNAPPY\x00"
            )
    elif api_key == 1:
        assert [t.topic for t in request.topics] == ["golden"]
    elif api_key in (11, 14, 12, 13, 8):
        assert request.group_id == "golden-group"
    elif api_key == 9 and expected["api_version"] >= 8:
        assert [g.group_id for g in request.groups] == ["golden-group"]
    elif api_key == 9:
        assert request.group_id == "golden-group"
    elif api_key == 2:
        assert [t.name for t in request.topics] == ["golden"]


def _outcome(frame: bytes) -> None:
    try:
        decode_request(frame)
    except ProtocolError:
        pass


golden_frames = st.sampled_from(sorted(FRAMES)).map(FRAMES.__getitem__)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(golden_frames))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["flip", "byte", "truncate", "insert", "delete"]))
        if not frame:
            break
        pos = draw(st.integers(min_value=0, max_value=len(frame) - 1))
        if kind == "flip":
            frame[pos] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif kind == "byte":
            frame[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01]))
        elif kind == "truncate":
            del frame[pos:]
        elif kind == "insert":
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            del frame[pos : pos + draw(st.integers(min_value=1, max_value=8))]
    return bytes(frame)


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(frame=mutated())
def test_fuzz_mutated_golden_frames(frame: bytes) -> None:
    _outcome(frame)


@FUZZ
@given(frame=st.binary(max_size=200))
def test_fuzz_random_frames(frame: bytes) -> None:
    _outcome(frame)


@FUZZ
@given(
    head=st.sampled_from([(18, 3), (18, 0), (3, 12), (3, 5), (0, 9), (0, 7), (1, 12), (1, 11)]),
    correlation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    rest=st.binary(max_size=200),
)
def test_fuzz_valid_header_random_body(
    head: tuple[int, int], correlation_id: int, rest: bytes
) -> None:
    api_key, version = head
    frame = api_key.to_bytes(2, "big") + version.to_bytes(2, "big")
    frame += correlation_id.to_bytes(4, "big", signed=True) + b"\xff\xff" + rest
    _outcome(frame)
