"""Hand-written Produce/Fetch response encoders, checked byte for byte against kio's."""

from __future__ import annotations

import dataclasses
import datetime
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i32Timedelta, i64

from odradek.protocol.fetch_response import (
    FETCH_VERSIONS,
    FetchPartitionResponse,
    encode_fetch_response,
)
from odradek.protocol.messages import decode_response, encode_body, response_class
from odradek.protocol.produce_response import (
    PRODUCE_VERSIONS,
    ProducePartitionResponse,
    encode_produce_response,
)


def _make(cls: type, **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _kio_module(api_key: int, version: int) -> Any:
    cls = response_class(api_key, version)
    assert cls is not None
    return sys.modules[cls.__module__]


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


int32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
error_codes = st.sampled_from([0, 1, 2, 3, 6, 10, 87])
names = st.text(min_size=1, max_size=30)
messages = st.none() | st.text(max_size=30)

produce_partitions = st.builds(
    ProducePartitionResponse,
    index=int32,
    error_code=error_codes,
    base_offset=int64,
    log_append_time_ms=st.just(-1) | st.integers(min_value=0, max_value=2**41),
    log_start_offset=int64,
    record_errors=st.lists(st.tuples(int32, messages), max_size=3).map(tuple),
    error_message=messages,
)


def _kio_produce(version: int, responses: list, throttle: int) -> Any:
    m = _kio_module(0, version)
    topics = []
    for name, partitions in responses:
        parts = []
        for p in partitions:
            parts.append(
                _make(
                    m.PartitionProduceResponse,
                    index=p.index,
                    error_code=ErrorCode(p.error_code),
                    base_offset=p.base_offset,
                    log_append_time=None
                    if p.log_append_time_ms == -1
                    else tz_aware_from_i64(i64(p.log_append_time_ms)),
                    log_start_offset=p.log_start_offset,
                    record_errors=tuple(
                        m.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=msg)
                        for i, msg in p.record_errors
                    )
                    if hasattr(m, "BatchIndexAndErrorMessage")
                    else (),
                    error_message=p.error_message,
                )
            )
        topics.append(m.TopicProduceResponse(name=name, partition_responses=tuple(parts)))
    return m.ProduceResponse(responses=tuple(topics), throttle_time=_ms(throttle))


@settings(max_examples=40, deadline=None)
@given(
    version=st.sampled_from(list(PRODUCE_VERSIONS)),
    responses=st.lists(st.tuples(names, st.lists(produce_partitions, max_size=4)), max_size=3),
    throttle=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_produce_response_matches_kio(version: int, responses: list, throttle: int) -> None:
    if version < 8:  # record_errors/error_message do not exist before v8
        responses = [
            (name, [p._replace(record_errors=(), error_message=None) for p in partitions])
            for name, partitions in responses
        ]
    ours = encode_produce_response(version, responses, throttle_time_ms=throttle)
    expected = _kio_produce(version, responses, throttle)
    assert ours == encode_body(expected)
    assert decode_response(0, version, ours) == expected


@pytest.mark.parametrize("version", list(PRODUCE_VERSIONS))
@pytest.mark.parametrize(
    "responses",
    [
        # the cached one-partition fast path (twice: the second call hits the cache)
        [("topic-a", [ProducePartitionResponse(0, 0, 123, -1, 0)])],
        [("topic-a", [ProducePartitionResponse(7, 0, 2**40, 1_700_000_000_000, 5)])],
        [("ü", [ProducePartitionResponse(1, 10, -1, -1, -1)])],
        # the general loop
        [
            ("t", [ProducePartitionResponse(0, 2, error_message="corrupt")]),
            ("t2", [ProducePartitionResponse(0), ProducePartitionResponse(1, 0, 5, -1, 3)]),
        ],
        [],
    ],
)
def test_produce_response_fast_path_matches_kio(version: int, responses: list) -> None:
    if version < 8:
        responses = [
            (name, [p._replace(error_message=None) for p in partitions])
            for name, partitions in responses
        ]
    for throttle in (0, 0, 25):
        ours = encode_produce_response(version, responses, throttle_time_ms=throttle)
        assert ours == encode_body(_kio_produce(version, responses, throttle))


fetch_partitions = st.builds(
    FetchPartitionResponse,
    partition_index=int32,
    error_code=error_codes,
    high_watermark=int64,
    last_stable_offset=int64,
    log_start_offset=int64,
    records=st.none() | st.binary(max_size=300),
    aborted_transactions=st.none() | st.lists(st.tuples(int64, int64), max_size=3).map(tuple),
    preferred_read_replica=int32,
    diverging_epoch=st.none() | st.tuples(int32, int64),
    current_leader=st.none() | st.tuples(int32, int32),
)
node_endpoints = st.lists(
    st.tuples(int32, st.text(min_size=1, max_size=20), int32, st.none() | st.text(max_size=10)),
    max_size=3,
)


def _kio_fetch(
    version: int,
    responses: list,
    throttle: int,
    error: int,
    session: int,
    nodes: Sequence[Any] = (),
) -> Any:
    m = _kio_module(1, version)
    topics = []
    for name, partitions in responses:
        parts = []
        for p in partitions:
            parts.append(
                _make(
                    m.PartitionData,
                    partition_index=p.partition_index,
                    error_code=ErrorCode(p.error_code),
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=p.log_start_offset,
                    aborted_transactions=None
                    if p.aborted_transactions is None
                    else tuple(
                        m.AbortedTransaction(producer_id=pid, first_offset=first)
                        for pid, first in p.aborted_transactions
                    ),
                    preferred_read_replica=p.preferred_read_replica,
                    records=b"" if p.records is None else bytes(p.records),
                    **(
                        {}
                        if p.diverging_epoch is None or version < 12
                        else {
                            "diverging_epoch": m.EpochEndOffset(
                                epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1]
                            )
                        }
                    ),
                    **(
                        {}
                        if p.current_leader is None or version < 16
                        else {
                            "current_leader": m.LeaderIdAndEpoch(
                                leader_id=p.current_leader[0], leader_epoch=p.current_leader[1]
                            )
                        }
                    ),
                )
            )
        topics.append(
            m.FetchableTopicResponse(topic_id=name, partitions=tuple(parts))
            if version >= 13
            else m.FetchableTopicResponse(topic=name, partitions=tuple(parts))
        )
    return _make(
        m.FetchResponse,
        throttle_time=_ms(throttle),
        error_code=ErrorCode(error),
        session_id=session,
        responses=tuple(topics),
        node_endpoints=tuple(
            m.NodeEndpoint(node_id=n, host=h, port=port, rack=r) for n, h, port, r in nodes
        )
        if version >= 16
        else (),
    )


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(list(FETCH_VERSIONS)),
    responses=st.lists(st.tuples(names, st.lists(fetch_partitions, max_size=4)), max_size=3),
    throttle=st.integers(min_value=0, max_value=2**31 - 1),
    error=error_codes,
    session=int32,
    nodes=node_endpoints,
    ids=st.lists(st.uuids(), min_size=3, max_size=3),
)
def test_fetch_response_matches_kio(
    version: int,
    responses: list,
    throttle: int,
    error: int,
    session: int,
    nodes: list,
    ids: list,
) -> None:
    if version >= 13:  # topics by id (KIP-516)
        responses = [(ids[i], ps) for i, (_, ps) in enumerate(responses)]
    if version < 16:  # current_leader is written from v16 only, node_endpoints too
        nodes = []
    if version < 11:
        responses = [
            (n, [p._replace(preferred_read_replica=-1) for p in ps]) for n, ps in responses
        ]
    if version < 7:
        error, session = 0, 0
    if version < 5:
        responses = [(n, [p._replace(log_start_offset=-1) for p in ps]) for n, ps in responses]
    parts, size = encode_fetch_response(
        version,
        responses,
        throttle_time_ms=throttle,
        error_code=error,
        session_id=session,
        node_endpoints=nodes,
    )
    ours = b"".join(bytes(part) for part in parts)
    assert size == len(ours)
    if version < 16:
        responses = [(n, [p._replace(current_leader=None) for p in ps]) for n, ps in responses]
    expected = _kio_fetch(version, responses, throttle, error, session, nodes)
    assert ours == encode_body(expected)
    assert decode_response(1, version, ours) == expected


class FakeRegion:
    """Stands in for storage's FileRegion: only __len__ is used."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length


def test_fetch_records_pass_through_untouched() -> None:
    region = FakeRegion(1000)
    view = memoryview(b"x" * 50)
    parts, size = encode_fetch_response(
        12,
        [
            ("a", [FetchPartitionResponse(0, records=region), FetchPartitionResponse(1)]),
            ("b", [FetchPartitionResponse(2, records=view)]),
        ],
    )
    assert parts[1] is region
    assert parts[3] is view
    assert sum(len(p) for p in parts) == size
    assert all(isinstance(p, bytes) for i, p in enumerate(parts) if i not in (1, 3))


@pytest.mark.parametrize("length", [126, 127, 128, 16382, 16383, 16384, 2097150, 2097151, 2097152])
def test_fetch_v12_record_length_varint_boundaries(length: int) -> None:
    partition = FetchPartitionResponse(0, 0, 5, 5, 0, bytes(length))
    parts, size = encode_fetch_response(12, [("t", [partition])])
    ours = b"".join(bytes(p) for p in parts)
    assert size == len(ours)
    assert ours == encode_body(_kio_fetch(12, [("t", [partition])], 0, 0, 0))
