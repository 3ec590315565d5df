"""``BrokerChannel``: this broker's requests to other brokers of the cluster (the transaction
coordinator's WriteTxnMarkers, a partition leader's AddPartitionsToTxn verification).

One kept ``BrokerConnection`` per broker id, opened on first use from the broker's address in
the metadata store; requests to one broker go one at a time, in order. A request that fails
(the broker is not live, the connection fails or the answer is late) raises
``BrokerUnavailableError`` and drops the connection; the next request opens a new one. The
client package is imported on first use only: a single broker never loads it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from odradek.broker.metadata_store import MetadataStore

if TYPE_CHECKING:
    from odradek.client._conn import BrokerConnection

__all__ = ["BrokerChannel", "BrokerUnavailableError"]

log = logging.getLogger(__name__)


class BrokerUnavailableError(ConnectionError):
    """The request did not get an answer from the broker (retriable)."""


class BrokerChannel:
    """Requests from this broker to the others (see the module docstring)."""

    def __init__(self, metadata: MetadataStore, purpose: str, request_timeout_ms: int) -> None:
        self._metadata = metadata
        self._client_id = f"broker-{metadata.node_id}-{purpose}"
        self._timeout_ms = request_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def request(self, node_id: int, entity: Any) -> Any:
        """Send kio request ``entity`` to broker ``node_id``; its decoded response."""
        from odradek.client.errors import KafkaError

        lock = self._locks.setdefault(node_id, asyncio.Lock())
        async with lock:
            try:
                conn = await self._connection(node_id)
                return await conn.request(entity, timeout=self._timeout_ms / 1000)
            except (KafkaError, OSError, TimeoutError) as exc:
                self._drop(node_id)
                raise BrokerUnavailableError(f"broker {node_id}: {exc}") from exc

    async def _connection(self, node_id: int) -> BrokerConnection:
        from odradek.client._conn import BrokerConnection

        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        info = self._metadata.broker(node_id)
        if info is None:
            raise BrokerUnavailableError(f"broker {node_id} is not live")
        conn = await BrokerConnection.open(
            node_id,
            info.host,
            info.port,
            client_id=self._client_id,
            request_timeout_ms=self._timeout_ms,
            connect_timeout_ms=self._timeout_ms,
        )
        self._connections[node_id] = conn
        return conn

    def _drop(self, node_id: int) -> None:
        conn = self._connections.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for node_id in list(self._connections):
            self._drop(node_id)
