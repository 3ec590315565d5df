"""The address a client is told for a broker: Kafka answers Metadata, FindCoordinator and
DescribeCluster with each broker's endpoint on the listener the request came in on. For this
broker that is the connection's listener's advertised address (``RequestContext.advertised``);
other brokers on that listener's name as they registered it (their registered address when
they have no listener of that name)."""

from __future__ import annotations

from odradek.broker.api import RequestContext

__all__ = ["address_for"]


def address_for(ctx: RequestContext, node_id: int, host: str, port: int) -> tuple[str, int]:
    """(host, port) of broker ``node_id`` (registered as ``host``:``port``) for this client."""
    advertised = ctx.advertised
    if advertised is not None and node_id == ctx.services.node_id:
        return advertised
    broker = ctx.services.metadata.broker(node_id)
    for name, h, p, _protocol in broker.listeners if broker is not None else ():
        if name == ctx.listener_name:
            return h, p
    return host, port
