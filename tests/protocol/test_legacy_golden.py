"""Frames kafka-python (api_version (0, 9) and (0, 10)) and librdkafka (as to a 0.9 broker,
and with ApiVersions offering Produce <= 2 and Fetch <= 3) sent, captured by
capture_legacy_golden.py, decode through the legacy codecs; and live runs of both clients
against the tiny old-protocol broker built on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.headers import parse_request_header
from odradek.protocol.legacy_versions import legacy_codec
from odradek.protocol.records import iter_batches

GOLDEN = Path(__file__).parent / "golden" / "legacy"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
MESSAGES = [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in MANIFEST["messages"]]
CODECS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3}


def decode(name: str) -> tuple[dict[str, Any], Any]:
    meta = MANIFEST["frames"][name]
    frame = (GOLDEN / name).read_bytes()
    header, pos = parse_request_header(frame, 1)
    assert (header.api_key, header.api_version) == (meta["key"], meta["version"])
    codec = legacy_codec(header.api_key, header.api_version)
    assert codec is not None
    legacy, size = codec.decode(frame, pos)
    assert pos + size == len(frame)
    return meta, legacy


@pytest.mark.parametrize("name", sorted(n for n in MANIFEST["frames"] if "__produce_" in n))
def test_produce_frames_become_v2_batches(name: str) -> None:
    meta, legacy = decode(name)
    assert meta["version"] == (1 if meta["api_version"] == [0, 9] else 2)
    (partition,) = legacy.request.topic_data[0].partition_data
    assert legacy.partition_errors == {}
    (batch,) = list(iter_batches(partition.records))
    batch.validate()
    assert batch.compression == CODECS[meta["codec"]]
    records = list(batch.records())
    assert [(r.key, r.value) for r in records] == MESSAGES
    assert [r.offset for r in records] == [0, 1, 2]
    if meta["api_version"] == [0, 9]:  # magic 0: no timestamps
        assert {r.timestamp for r in records} == {-1}
    else:
        assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(3)]


@pytest.mark.parametrize("name", sorted(n for n in MANIFEST["frames"] if "__fetch_" in n))
def test_fetch_frames(name: str) -> None:
    _meta, legacy = decode(name)
    req = legacy.request
    assert req.__version__ == 4 and req.isolation_level == 0
    assert [(t.topic, [p.partition for p in t.partitions]) for t in req.topics] == [
        (MANIFEST["topic"], [0])
    ]


@pytest.mark.parametrize("name", sorted(n for n in MANIFEST["frames"] if "__list_offsets_" in n))
def test_list_offsets_frames(name: str) -> None:
    _meta, legacy = decode(name)
    (p,) = legacy.request.topics[0].partitions
    assert p.timestamp in (-1, -2)
    assert legacy.body["topics"][0]["partitions"][0]["max_num_offsets"] == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("api_version", "codec"), [((0, 9), "lz4"), ((0, 10), "snappy")])
def test_kafka_python_old_versions_round_trip(api_version: tuple[int, int], codec: str) -> None:
    from capture_legacy_golden import OldBroker, run_client

    with OldBroker() as broker:
        got = run_client(broker.port, api_version, codec)
        assert not broker.errors
    assert [(r.key, r.value) for r in got] == MESSAGES
    if api_version == (0, 10):
        assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(3)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("magic0", "codec"), [(True, "snappy"), (False, "lz4"), (False, "none")])
def test_librdkafka_old_versions_round_trip(magic0: bool, codec: str) -> None:
    from capture_legacy_golden import OldBroker, run_librdkafka

    with OldBroker() as broker:
        got = run_librdkafka(broker.port, magic0, codec)
        assert not broker.errors
        seen = set(broker.frames)
    assert [(m.key(), m.value()) for m in got] == MESSAGES
    assert {(0, 1), (1, 1)} <= seen if magic0 else {(0, 2), (1, 3)} <= seen
    if not magic0:
        assert [m.timestamp()[1] for m in got] == [1_700_000_000_000 + i for i in range(3)]
