"""``BrokerChannel``: this broker's requests to other brokers of the cluster by broker id (the
transaction coordinator's WriteTxnMarkers, a partition leader's AddPartitionsToTxn
verification), over the inter-broker client.

A channel has one purpose (its connection per broker: (broker id, purpose) in the
``InterBrokerClient``) and one timeout. ``request(node_id, entity)`` looks the broker's
address up in the metadata store at each call (a broker that moved is reached at its new
address) and sends the kio request at its own version, bounded by ``request_timeout_ms``
(connecting included). A broker that is not live, a failed connection or a late answer raise
``BrokerUnavailableError`` (the client's ``InterBrokerRequestError``: ``.broker_id``,
``.cause``); the client drops a connection that failed, the next request opens a new one.
Requests to one broker may overlap on its connection; each gets its own answer.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.broker.inter_broker_client import InterBrokerClient, InterBrokerRequestError, Node
from odradek.broker.metadata_store import MetadataStore

__all__ = ["BrokerChannel", "BrokerUnavailableError"]

log = logging.getLogger(__name__)

BrokerUnavailableError = InterBrokerRequestError
"""The request got no answer from the broker (retriable): the client's one failure type."""


class BrokerChannel:
    """Requests from this broker to the others by broker id (see the module docstring)."""

    def __init__(
        self,
        metadata: MetadataStore,
        client: InterBrokerClient,
        purpose: str,
        request_timeout_ms: int,
    ) -> None:
        self._metadata = metadata
        self._client = client
        self.purpose = purpose
        self._timeout_ms = request_timeout_ms

    async def request(self, node_id: int, entity: Any) -> Any:
        """Send kio request ``entity`` to broker ``node_id``; its decoded response."""
        info = self._metadata.broker(node_id)
        if info is None:
            raise InterBrokerRequestError(
                node_id,
                self.purpose,
                type(entity).__name__,
                ConnectionError(f"broker {node_id} is not live"),
            )
        node = Node(node_id, info.host, info.port)
        return await self._client.send(node, self.purpose, entity, timeout_ms=self._timeout_ms)

    def close(self) -> None:
        """Close this channel's connections (the client stays open for its other users)."""
        for node_id, purpose in list(self._client.connections()):
            if purpose == self.purpose:
                self._client.close_connection(node_id, purpose)
