"""The hand-written Produce request decoder reads what kio reads, without copying records."""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import InvalidRequestError, ProtocolError
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import decode_request, encode_request, request_class
from odradek.protocol.produce_request import (
    PRODUCE_REQUEST_VERSIONS,
    ZERO_COPY_MIN,
    decode_produce_request,
    decode_produce_request_zero_copy,
)

GOLDEN = Path(__file__).parent / "golden"
MANIFEST: dict[str, dict[str, Any]] = json.loads((GOLDEN / "manifest.json").read_text())
FRAMES = {
    name: (GOLDEN / name).read_bytes() for name, entry in MANIFEST.items() if entry["api_key"] == 0
}


def _same(ours: Any, kio: Any) -> None:
    assert ours.acks == kio.acks
    assert ours.transactional_id == kio.transactional_id
    assert ours.timeout_ms == kio.timeout // datetime.timedelta(milliseconds=1)
    assert [t.name for t in ours.topic_data] == [t.name for t in kio.topic_data]
    for t_ours, t_kio in zip(ours.topic_data, kio.topic_data, strict=True):
        assert [p.index for p in t_ours.partition_data] == [p.index for p in t_kio.partition_data]
        for p_ours, p_kio in zip(t_ours.partition_data, t_kio.partition_data, strict=True):
            if p_kio.records is None:
                assert p_ours.records is None
            else:
                assert isinstance(p_ours.records, memoryview)
                assert bytes(p_ours.records) == p_kio.records


def _decode_both(frame: bytes | bytearray) -> tuple[Any, Any]:
    header, kio_request = decode_request(bytes(frame))
    _, pos = parse_request_header(frame)
    ours, size = decode_produce_request_zero_copy(memoryview(frame), pos, header.api_version)
    assert pos + size == len(frame)
    assert ours.api_version == header.api_version
    return ours, kio_request


@pytest.mark.parametrize(
    "name",
    [n for n in sorted(FRAMES) if MANIFEST[n]["api_key"] == 0 and "unsupported" not in MANIFEST[n]],
)
def test_golden_produce_frames(name: str) -> None:
    frame = bytearray(FRAMES[name])
    ours, kio_request = _decode_both(frame)
    _same(ours, kio_request)
    # zero-copy: the records are a writable view into the frame itself
    records = ours.topic_data[0].partition_data[0].records
    assert records is not None and not records.readonly
    records[0] ^= 0xFF
    assert bytes(frame).find(bytes(records)) >= 0


def _module(version: int) -> Any:
    cls = request_class(0, version)
    assert cls is not None
    return sys.modules[cls.__module__], cls


@st.composite
def produce_requests(draw: st.DrawFn) -> Any:
    version = draw(st.sampled_from(list(PRODUCE_REQUEST_VERSIONS)))
    module, cls = _module(version)
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = tuple(
            module.PartitionProduceData(
                index=draw(st.integers(-(2**31), 2**31 - 1)),
                records=draw(st.none() | st.binary(max_size=300)),
            )
            for _ in range(draw(st.integers(0, 3)))
        )
        topics.append(
            module.TopicProduceData(name=draw(st.text(max_size=20)), partition_data=parts)
        )
    fields = {f.name for f in dataclasses.fields(cls)}
    values = dict(
        transactional_id=draw(st.none() | st.text(max_size=10)),
        acks=draw(st.sampled_from([0, 1, -1, 5])),
        timeout=datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1))),
        topic_data=tuple(topics),
    )
    return cls(**{k: v for k, v in values.items() if k in fields})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(request=produce_requests(), client_id=st.none() | st.text(max_size=8))
def test_same_as_kio(request: Any, client_id: str | None) -> None:
    frame = encode_request(request, correlation_id=3, client_id=client_id)[4:]
    ours, kio_request = _decode_both(frame)
    _same(ours, kio_request)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    name=st.sampled_from(sorted(FRAMES)),
    cut=st.integers(min_value=0),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 7)), max_size=3),
)
def test_fuzz_only_invalid_request_error(name: str, cut: int, flips: list[tuple[int, int]]) -> None:
    frame = bytearray(FRAMES[name])
    for pos, bit in flips:
        frame[pos % len(frame)] ^= 1 << bit
    del frame[cut % (len(frame) + 1) :]
    try:
        _, pos = parse_request_header(frame, 2 if frame[3:4] >= b"\x09" else 1)
        decode_produce_request_zero_copy(memoryview(frame), pos, MANIFEST[name]["api_version"])
    except ProtocolError:
        pass


def test_truncated_and_bad_lengths() -> None:
    for decode in (decode_produce_request, decode_produce_request_zero_copy):
        with pytest.raises(InvalidRequestError):
            decode(b"\xff\xff\x00\x01", 0, 7)
        with pytest.raises(InvalidRequestError):  # topic count -5
            decode(b"\xff\xff\x00\x01\x00\x00\x00\x00\xff\xff\xff\xfb", 0, 7)
        with pytest.raises(InvalidRequestError):
            decode(b"", 0, 2)


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_small_bodies_go_to_kio_large_ones_are_zero_copy(version: int) -> None:
    module, cls = _module(version)
    for size, zero_copy in ((100, False), (ZERO_COPY_MIN, True)):
        request = cls(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=1),
            topic_data=(
                module.TopicProduceData(
                    name="t",
                    partition_data=(module.PartitionProduceData(index=0, records=b"r" * size),),
                ),
            ),
        )
        frame = bytearray(encode_request(request, correlation_id=1, client_id=None)[4:])
        _, pos = parse_request_header(frame)
        decoded, used = decode_produce_request(memoryview(frame), pos, version)
        assert pos + used == len(frame)
        assert decoded.__version__ == version
        records = decoded.topic_data[0].partition_data[0].records
        assert bytes(records) == b"r" * size
        assert isinstance(records, memoryview) is zero_copy
