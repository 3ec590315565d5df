"""The replica fetcher's Fetch v12 body encoder writes exactly what kio writes."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.fetch.v12 import request as fetch_v12

from odradek.protocol.fetch_request_encoder import ReplicaFetchPartition, encode_replica_fetch_body
from odradek.protocol.messages import encode_body
from odradek.protocol.messages import make_entity as make

CASES: list[list[tuple[str, list[ReplicaFetchPartition]]]] = [
    [],
    [("t", [(0, 5, 1_234_567_890_123, 4, 7, 1_048_576)])],
    [
        ("orders", [(0, 0, 0, -1, 0, 1_048_576), (2, 7, 99, 6, 12, 10)]),
        ("ü" * 70, [(i, 1, i * 1000, 1, 0, 2**31 - 1) for i in range(130)]),
    ],
]


def _kio(replica_id: int, topics: list[tuple[str, list[ReplicaFetchPartition]]]) -> bytes:
    return encode_body(
        make(
            fetch_v12.FetchRequest,
            replica_id=replica_id,
            max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=1,
            max_bytes=10_485_760,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=tuple(
                make(
                    fetch_v12.FetchTopic,
                    topic=t,
                    partitions=tuple(
                        make(
                            fetch_v12.FetchPartition,
                            partition=p[0],
                            current_leader_epoch=p[1],
                            fetch_offset=p[2],
                            last_fetched_epoch=p[3],
                            log_start_offset=p[4],
                            partition_max_bytes=p[5],
                        )
                        for p in ps
                    ),
                )
                for t, ps in topics
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    )


@pytest.mark.parametrize("topics", CASES)
def test_same_bytes_as_kio(topics: list[tuple[str, list[ReplicaFetchPartition]]]) -> None:
    assert encode_replica_fetch_body(3, 500, 1, 10_485_760, topics) == _kio(3, topics)
