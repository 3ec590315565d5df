"""``TopicAdmin``: creating, deleting, growing and configuring topics.

Each change is written through the ``MetadataStore`` (which decides leaders, epochs and
durability) and then applied to this broker's replicas through the ``ReplicaManager``. The
replica assignment of a new partition is rack-unaware round robin over the live brokers (Kafka's
``assignReplicasToBrokers`` without the random start): partition p's replicas are the
``replication_factor`` brokers from index p on, the first being the preferred leader; alone,
that is [this broker].
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from odradek.broker.config import BrokerConfig, effective_topic_configs
from odradek.broker.metadata_store import InvalidPartitionsError, MetadataStore, TopicMetadata
from odradek.broker.replica_manager import ReplicaManager
from odradek.storage import LogConfig

__all__ = ["OFFSETS_TOPIC", "TopicAdmin", "assign_replicas"]

log = logging.getLogger("odradek.broker")

OFFSETS_TOPIC = "__consumer_offsets"


def assign_replicas(
    brokers: Sequence[int], start: int, count: int, replication_factor: int = 1
) -> dict[int, list[int]]:
    """{partition: replicas} for partitions start..start+count-1 (see the module docstring)."""
    ids = sorted(brokers)
    if replication_factor > len(ids):
        raise InvalidPartitionsError(
            f"replication factor {replication_factor} is larger than the {len(ids)} live brokers"
        )
    return {
        p: [ids[(p + i) % len(ids)] for i in range(replication_factor)]
        for p in range(start, start + count)
    }


class TopicAdmin:
    """Topic changes of this broker. See the module docstring."""

    def __init__(
        self, config: BrokerConfig, metadata: MetadataStore, replicas: ReplicaManager
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.replicas = replicas

    def _brokers(self) -> list[int]:
        live = [b.node_id for b in self.metadata.live_brokers()]
        return live or [self.metadata.node_id]

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
    ) -> TopicMetadata:
        """Create a topic and its partition logs (raises TopicExistsError). An ``internal``
        topic's logs are created lazily, each on its first use: the group coordinator creates
        ``__consumer_offsets`` (50 partitions) on the first group request and needs only the
        partition that group hashes to, and creating 50 directories and segments at once would
        block the event loop for 50-250 ms."""
        if num_partitions < 1:
            raise InvalidPartitionsError("number of partitions must be at least 1")
        assignment = assign_replicas(self._brokers(), 0, num_partitions)
        topic = await self.metadata.create_topic(name, assignment, configs or {}, internal=internal)
        self.replicas.open_topic(topic)
        return topic

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        """Auto-create ``name`` with num.partitions partitions when auto.create.topics.enable."""
        if not self.config.auto_create_topics_enable:
            return None
        existing = self.metadata.topic(name)
        if existing is not None:
            return existing
        if name == OFFSETS_TOPIC:
            return None
        log.info("auto-creating topic %r with %d partitions", name, self.config.num_partitions)
        return await self.create_topic(name, self.config.num_partitions)

    async def delete_topic(self, name: str) -> None:
        topic = await self.metadata.delete_topic(name)
        self.replicas.remove_topic(topic)

    async def add_partitions(self, name: str, total: int) -> TopicMetadata:
        """Grow ``name`` to ``total`` partitions (INVALID_PARTITIONS unless larger)."""
        topic = self.metadata.topic(name)
        if topic is not None and total <= topic.num_partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.num_partitions} partitions; the new count must be larger, got {total}"
            )
        start = 0 if topic is None else topic.num_partitions
        assignment = assign_replicas(self._brokers(), start, max(0, total - start))
        topic = await self.metadata.create_partitions(name, assignment)
        self.replicas.open_topic(topic, start)
        return topic

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        """Replace a topic's overrides and apply them to its live logs."""
        topic = await self.metadata.alter_topic_configs(name, configs)
        self.replicas.apply_topic_config(topic)
        return topic

    def topic_configs(self, topic: TopicMetadata) -> dict[str, str]:
        return effective_topic_configs(self.config, topic.configs)

    def topic_configs_from(self, overrides: Mapping[str, str]) -> dict[str, str]:
        """Every topic config: ``overrides`` over the broker defaults."""
        return effective_topic_configs(self.config, overrides)

    def check_log_config(self, overrides: Mapping[str, str]) -> None:
        """Raise ValueError (storage's InvalidConfigError) if the overrides make a bad LogConfig."""
        LogConfig.from_topic_config(dict(overrides), self.replicas.default_log_config)
