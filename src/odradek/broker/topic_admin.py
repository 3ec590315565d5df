"""``TopicAdmin``: creating, deleting, growing and configuring topics.

Each change is written through the ``MetadataStore`` (which decides leaders, epochs and
durability) and then applied to this broker's replicas through the ``ReplicaManager``. The
replica assignment of a new partition is rack-unaware round robin over the live brokers (Kafka's
``assignReplicasToBrokers`` without the random start): partition p's replicas are the
``replication_factor`` brokers from index p on, the first being the preferred leader; alone,
that is [this broker].

In a cluster (``replicated``: the store is ZooKeeper's) the assignment is Kafka's (rack-aware
when every live broker has a ``broker.rack``)
one (``odradek.controller.assignment``, random start) over the live brokers, with
``default.replication.factor`` unless the request names one (``__consumer_offsets``:
``offsets.topic.replication.factor``, capped by the live brokers as a development cluster
needs); the partitions' logs are created by LeaderAndIsr from the controller, not here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from odradek.broker.config import BrokerConfig, effective_topic_configs
from odradek.broker.metadata_store import (
    InvalidPartitionsError,
    MetadataStore,
    TopicExistsError,
    TopicMetadata,
)
from odradek.broker.replica_manager import ReplicaManager
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from odradek.storage import LogConfig

__all__ = ["OFFSETS_TOPIC", "InvalidReplicationFactorError", "TopicAdmin", "assign_replicas"]

log = logging.getLogger("odradek.broker")

OFFSETS_TOPIC = "__consumer_offsets"


class InvalidReplicationFactorError(InvalidPartitionsError):
    """INVALID_REPLICATION_FACTOR (38)."""


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
        self,
        config: BrokerConfig,
        metadata: MetadataStore,
        replicas: ReplicaManager,
        *,
        replicated: bool = False,
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.replicated = replicated
        """In a cluster: Kafka's assignment, logs created by LeaderAndIsr."""

    def assignment(
        self, num_partitions: int, replication_factor: int | None = None, start: int = 0
    ) -> dict[int, list[int]]:
        """{partition: replicas} for new partitions start..start+num_partitions-1."""
        if not self.replicated:
            return assign_replicas(self._brokers(), start, num_partitions)
        # lazy: a single broker loads no cluster support (tests/cluster/test_imports.py)
        from odradek.controller import assignment as ka

        rf = self.config.default_replication_factor if replication_factor is None else replication_factor
        try:
            got = ka.assign_replicas(self._racks(), num_partitions, rf, start_partition_id=start)
        except (ka.InvalidReplicationFactorError, ka.RackInformationError) as exc:
            raise InvalidReplicationFactorError(str(exc)) from None
        except ka.InvalidPartitionsError as exc:
            raise InvalidPartitionsError(str(exc)) from None
        return {p: list(r) for p, r in got.items()}

    def _racks(self) -> dict[int, str | None]:
        """Live broker id -> its ``broker.rack`` (None: none)."""
        live = {b.node_id: b.rack for b in self.metadata.live_brokers()}
        return live or {self.metadata.node_id: self.config.broker_rack}

    def _brokers(self) -> list[int]:
        live = [b.node_id for b in self.metadata.live_brokers()]
        return live or [self.metadata.node_id]

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        replication_factor: int | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata:
        """Create a topic and its partition logs (raises TopicExistsError). An ``internal``
        topic's logs are created lazily, each on its first use: the group coordinator creates
        ``__consumer_offsets`` (50 partitions) on the first group request and needs only the
        partition that group hashes to, and creating 50 directories and segments at once would
        block the event loop for 50-250 ms."""
        if assignment is None:
            if num_partitions < 1:
                raise InvalidPartitionsError("number of partitions must be at least 1")
            if self.replicated and replication_factor is None:
                wanted = {
                    OFFSETS_TOPIC: self.config.offsets_topic_replication_factor,
                    TRANSACTION_STATE_TOPIC: self.config.transaction_state_log_replication_factor,
                }.get(name)
                if wanted is not None:  # an internal topic: as many replicas as brokers allow
                    replication_factor = max(1, min(wanted, len(self._brokers())))
            assignment = self.assignment(num_partitions, replication_factor)
        topic = await self.metadata.create_topic(name, assignment, configs or {}, internal=internal)
        if not self.replicated:
            self.replicas.open_topic(topic)
        return topic

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        """Auto-create ``name`` with num.partitions partitions when auto.create.topics.enable.
        A topic that exists already (in a cluster: created through another broker, its znode
        not yet in this broker's metadata) is not an error: the topic as this broker knows it
        is returned, None while it does not (the request then answers
        UNKNOWN_TOPIC_OR_PARTITION, which the client retries, as Kafka's
        AutoTopicCreationManager does with TOPIC_ALREADY_EXISTS)."""
        if not self.config.auto_create_topics_enable:
            return None
        existing = self.metadata.topic(name)
        if existing is not None:
            return existing
        if name == OFFSETS_TOPIC:
            return None
        log.info("auto-creating topic %r with %d partitions", name, self.config.num_partitions)
        try:
            return await self.create_topic(name, self.config.num_partitions)
        except InvalidReplicationFactorError as exc:
            log.warning("cannot auto-create topic %r: %s", name, exc)
            return None
        except TopicExistsError:
            log.info("topic %r was created meanwhile (not auto-created here)", name)
            return self.metadata.topic(name)

    async def delete_topic(self, name: str) -> None:
        topic = await self.metadata.delete_topic(name)
        if not self.replicated:  # in a cluster: StopReplica (delete) from the controller
            self.replicas.remove_topic(topic)

    async def add_partitions(self, name: str, total: int) -> TopicMetadata:
        """Grow ``name`` to ``total`` partitions (INVALID_PARTITIONS unless larger)."""
        topic = self.metadata.topic(name)
        if topic is not None and total <= topic.num_partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {topic.num_partitions} partitions; the new count must be larger, got {total}"
            )
        start = 0 if topic is None else topic.num_partitions
        if self.replicated and topic is not None:
            # lazy: a single broker loads no cluster support (tests/cluster/test_imports.py)
            from odradek.controller import assignment as ka

            try:
                got = ka.create_new_partitions_assignment(
                    {p.partition: p.replicas for p in topic.partitions},
                    self._brokers(),
                    total,
                    self._racks(),
                )
            except (
                ka.InvalidPartitionsError,
                ka.InvalidReplicationFactorError,
                ka.RackInformationError,
            ) as exc:
                raise InvalidPartitionsError(str(exc)) from None
            assignment = {p: list(r) for p, r in got.items()}
        else:
            assignment = assign_replicas(self._brokers(), start, max(0, total - start))
        topic = await self.metadata.create_partitions(name, assignment)
        if not self.replicated:
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
