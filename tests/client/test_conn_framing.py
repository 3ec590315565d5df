"""BrokerConnection.data_received: response frames split across reads or packed into one read
(protocol.framing.FrameDecoder underneath) reach the right futures, decoded or raw."""

from __future__ import annotations

import asyncio
import datetime
import struct

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4 import response as heartbeat_v4
from kio.static.primitive import i32Timedelta

from odradek.client._conn import BrokerConnection
from odradek.protocol.messages import encode_response


def _heartbeat_response(corr: int) -> bytes:
    resp = heartbeat_v4.HeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode.none
    )
    return encode_response(resp, corr, api_key=12, api_version=4)


def test_frames_split_and_packed() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        conn = BrokerConnection(1, "127.0.0.1", 9, "t", 1000)
        futs = {corr: loop.create_future() for corr in (1, 2, 3)}
        conn._pending[1] = (12, 4, futs[1], False)
        conn._pending[2] = (18, 0, futs[2], True)
        conn._pending[3] = (12, 4, futs[3], False)
        raw = struct.pack(">ii", 6, 2) + b"\x00\x23"  # size, correlation id 2, error 35
        late = _heartbeat_response(99)  # no longer pending: dropped
        stream = _heartbeat_response(1) + late + raw + _heartbeat_response(3)
        for i in range(0, 7):  # byte-sized reads first, then the rest at once
            conn.data_received(stream[i : i + 1])
        conn.data_received(stream[7:])
        assert int(futs[1].result().error_code) == 0
        assert futs[2].result() == raw[4:]
        assert isinstance(futs[2].result(), bytes)
        assert int(futs[3].result().error_code) == 0
        assert not conn._pending

    asyncio.run(run())
