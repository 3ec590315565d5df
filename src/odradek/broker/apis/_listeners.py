"""The address a client is told for a broker: Kafka answers Metadata, FindCoordinator and
DescribeCluster with each broker's endpoint on the listener the request came in on (Kafka's
``MetadataCache.getAliveBrokerNodes(listenerName)``). For this broker that is the connection's
listener's advertised address (``RequestContext.advertised``); another broker is told by its
registered endpoint of that listener name. Metadata and DescribeCluster leave out a broker
without that listener; FindCoordinator answers COORDINATOR_NOT_AVAILABLE for a coordinator
that is not live or has no such endpoint (Kafka's ``getAliveBrokerNode(id, listenerName)``)."""

from __future__ import annotations

from odradek.broker.api import RequestContext
from odradek.broker.metadata_store import BrokerInfo

__all__ = ["alive_broker_endpoint", "endpoint_for"]


def endpoint_for(ctx: RequestContext, broker: BrokerInfo) -> tuple[str, int] | None:
    """(host, port) of ``broker`` on the request's listener; None: it has no such listener."""
    advertised = ctx.advertised
    if advertised is not None and broker.node_id == ctx.services.node_id:
        return advertised
    return broker.endpoint(ctx.listener_name)


def alive_broker_endpoint(
    ctx: RequestContext, node_id: int, host: str, port: int
) -> tuple[str, int] | None:
    """(host, port) of broker ``node_id`` on the request's listener, as Kafka's
    ``MetadataCache.getAliveBrokerNode(id, listenerName)``; None when that broker is not live
    or has no endpoint on that listener.

    This broker always has one: the listener's advertised address, or, on a connection made
    without a listener endpoint, its registered endpoint of that name, else ``host``:``port``
    (the address its coordinator named)."""
    metadata = ctx.services.metadata
    if node_id == ctx.services.node_id:
        if ctx.advertised is not None:
            return ctx.advertised
        me = metadata.broker(node_id)
        found = me.endpoint(ctx.listener_name) if me is not None else None
        return found if found is not None else (host, port)
    broker = metadata.broker(node_id)
    if broker is None:
        return None
    return broker.endpoint(ctx.listener_name)
