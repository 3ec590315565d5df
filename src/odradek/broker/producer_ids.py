"""``ProducerIdManager``: producer ids for InitProducerId, reserved in blocks through the
``MetadataStore`` (Kafka's ProducerIdManager; ZooKeeper: ``/latest_producer_id_block``), so an
id is never handed out twice, also across restarts."""

from __future__ import annotations

from odradek.broker.metadata_store import MetadataStore

__all__ = ["BLOCK_SIZE", "ProducerIdManager"]

BLOCK_SIZE = 1000


class ProducerIdManager:
    __slots__ = ("_limit", "_metadata", "_next")

    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata
        self._next = 0
        self._limit = 0  # no block yet

    async def allocate(self) -> int:
        """A new producer id."""
        if self._next >= self._limit:
            self._next = await self._metadata.allocate_producer_ids(BLOCK_SIZE)
            self._limit = self._next + BLOCK_SIZE
        pid = self._next
        self._next += 1
        return pid
