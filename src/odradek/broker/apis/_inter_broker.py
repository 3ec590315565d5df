"""Glue for the inter-broker APIs that kio does not know (odradek.protocol.inter_broker codecs):
a body decoder in ``ApiSpec.decoder``'s shape, an ``EncodedResponse`` for a body, an ``ApiSpec``
with the versions the codecs serve, and the checks every request from the controller
(LeaderAndIsr, StopReplica) passes before it is applied."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from odradek.broker.api import (
    ApiSpec,
    Authorize,
    Decoder,
    EncodedResponse,
    ErrorResponse,
    Handler,
    Req,
    RequestContext,
    Resp,
)
from odradek.protocol import inter_broker as ib

__all__ = ["api_spec", "decoder", "encoded", "every_partition", "stale_request"]


def decoder(decode: Callable[[bytes, int], Any]) -> Decoder:
    """``(frame, pos, version=v) -> (request, bytes read)`` over a whole-body decoder."""

    def read(frame: Any, pos: int, version: int) -> tuple[Any, int]:
        body = bytes(frame[pos:])
        return decode(body, version), len(body)

    return read


def encoded(body: bytes) -> EncodedResponse:
    return EncodedResponse((body,), len(body))


def api_spec(
    key: int,
    name: str,
    handler: Handler[Req, Resp],
    *,
    decode: Callable[[bytes, int], Any] | None = None,
    error_response: ErrorResponse[Req, Resp] | None = None,
    authorize: Authorize[Req, Resp] | None = None,
) -> ApiSpec[Req, Resp]:
    """The ``ApiSpec`` of inter-broker API ``key``: the versions ``ib.SUPPORTED_VERSIONS`` lists,
    with ``decode`` (a whole-body decoder) as its ``decoder`` when given."""
    lo, hi = ib.SUPPORTED_VERSIONS[key]
    return ApiSpec(
        key=key,
        name=name,
        min_version=lo,
        max_version=hi,
        handler=handler,
        error_response=error_response,
        decoder=None if decode is None else decoder(decode),
        authorize=authorize,
    )


def _stale_broker_epoch(ctx: RequestContext, broker_epoch: int) -> bool:
    """Kafka's isBrokerEpochStale: -1 (an old controller) is never stale."""
    if broker_epoch < 0:
        return False
    info = ctx.services.metadata.broker(ctx.services.node_id)
    return info is not None and broker_epoch < info.epoch


def stale_request(
    ctx: RequestContext, broker_epoch: int, controller_epoch: int
) -> ErrorCode | None:
    """Why a request from the controller is refused as a whole, as Kafka checks it: a broker
    epoch older than this broker's registration → STALE_BROKER_EPOCH, then a controller epoch
    older than the newest seen → STALE_CONTROLLER_EPOCH; None when it may be applied."""
    if _stale_broker_epoch(ctx, broker_epoch):
        return ErrorCode.stale_broker_epoch
    if ctx.services.replica_manager.is_stale_controller_epoch(controller_epoch):
        return ErrorCode.stale_controller_epoch
    return None


class PartitionState(Protocol):
    @property
    def topic_name(self) -> str: ...

    @property
    def partition_index(self) -> int: ...


def every_partition(
    states: Iterable[PartitionState], code: ErrorCode
) -> dict[tuple[str, int], int]:
    """``code`` for each (topic, partition) of a refused request's partition states."""
    return {(s.topic_name, s.partition_index): code.value for s in states}
