"""The broker's Produce response encoder writes exactly what protocol.produce_response writes."""

from __future__ import annotations

import pytest

from odradek.broker.apis._encoders import encode_produce_response
from odradek.protocol.produce_response import ProducePartitionResponse
from odradek.protocol.produce_response import encode_produce_response as reference


class _Req:
    def __init__(self, version: int) -> None:
        self.__version__ = version


@pytest.mark.parametrize("version", range(3, 11))
@pytest.mark.parametrize(
    "results",
    [
        [("topic-a", [(0, 0, 123, -1, 0, None)])],
        [
            ("t", [(0, 2, -1, -1, -1, "corrupt"), (1, 0, 5, 1_700_000_000_000, 3, None)]),
            ("ü", [(4, 10, -1, -1, -1, None)]),
        ],
        [],
    ],
)
def test_same_bytes_as_protocol_encoder(version: int, results: list) -> None:  # type: ignore[type-arg]
    ours = encode_produce_response(_Req(version), results)
    body = b"".join(ours.parts)
    assert len(body) == ours.size
    expected = reference(
        version,
        [
            (name, [ProducePartitionResponse(i, c, b, t, s, (), m) for i, c, b, t, s, m in parts])
            for name, parts in results
        ],
    )
    assert body == expected
