"""Glue for the inter-broker APIs that kio does not know (odradek.protocol.inter_broker codecs):
a body decoder in ``ApiSpec.decoder``'s shape and an ``EncodedResponse`` for a body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.broker.api import Decoder, EncodedResponse

__all__ = ["decoder", "encoded"]


def decoder(decode: Callable[[bytes, int], Any]) -> Decoder:
    """``(frame, pos, version=v) -> (request, bytes read)`` over a whole-body decoder."""

    def read(frame: Any, pos: int, version: int) -> tuple[Any, int]:
        body = bytes(frame[pos:])
        return decode(body, version), len(body)

    return read


def encoded(body: bytes) -> EncodedResponse:
    return EncodedResponse((body,), len(body))
