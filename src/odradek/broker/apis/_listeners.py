"""The address a client is told for a broker: Kafka answers Metadata, FindCoordinator and
DescribeCluster with each broker's endpoint on the listener the request came in on (Kafka's
``MetadataCache.getAliveBrokerNodes(listenerName)``). For this broker that is the connection's
listener's advertised address (``RequestContext.advertised``); another broker is told by its
registered endpoint of that listener name, and a broker without that listener is left out."""

from __future__ import annotations

from odradek.broker.api import RequestContext
from odradek.broker.metadata_store import BrokerInfo

__all__ = ["address_for", "endpoint_for"]


def endpoint_for(ctx: RequestContext, broker: BrokerInfo) -> tuple[str, int] | None:
    """(host, port) of ``broker`` on the request's listener; None: it has no such listener."""
    advertised = ctx.advertised
    if advertised is not None and broker.node_id == ctx.services.node_id:
        return advertised
    return broker.endpoint(ctx.listener_name)


def address_for(ctx: RequestContext, node_id: int, host: str, port: int) -> tuple[str, int]:
    """(host, port) of broker ``node_id`` (registered as ``host``:``port``) for this client:
    its endpoint on the request's listener when it is live and has one, else as registered."""
    advertised = ctx.advertised
    if advertised is not None and node_id == ctx.services.node_id:
        return advertised
    broker = ctx.services.metadata.broker(node_id)
    if broker is not None:
        found = broker.endpoint(ctx.listener_name)
        if found is not None:
            return found
    return host, port
