"""The controller's view of the cluster (Kafka's ``ControllerContext``), an immutable value.

Decisions (``odradek.controller.decisions``) read a context and return the next one together
with the ZooKeeper writes and broker requests that make it true. ``states`` hold each partition's
``LeaderAndIsr`` with the znode version the next conditional write must expect.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from odradek.cluster.znodes import (
    NO_LEADER,
    BrokerInfo,
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
)

__all__ = ["ControllerConfig", "ControllerContext"]


@dataclass(frozen=True)
class ControllerConfig:
    """The broker settings the controller's decisions read (Kafka's names, Kafka's defaults)."""

    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage


@dataclass(frozen=True)
class ControllerContext:
    controller_id: int
    epoch: int
    epoch_zk_version: int
    config: ControllerConfig = ControllerConfig()
    live_brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)  # BrokerInfo.epoch = czxid
    shutting_down_broker_ids: frozenset[int] = frozenset()
    assignments: Mapping[str, TopicAssignment] = field(default_factory=dict)
    states: Mapping[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    topics_to_be_deleted: frozenset[str] = frozenset()
    # tp -> target replica set (TRS) of a reassignment in flight
    reassignments: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    # broker -> its replicas on an offline log dir (Kafka's replicasOnOfflineDirs): they answered
    # KAFKA_STORAGE_ERROR to a LeaderAndIsr and stay offline until the broker restarts
    offline_dir_replicas: Mapping[int, frozenset[TopicPartition]] = field(default_factory=dict)

    # -- reading

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.assignments.get(tp[0])
        return tuple(a.partitions.get(tp[1], ())) if a else ()

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic in sorted(self.assignments):
            for p in sorted(self.assignments[topic].partitions):
                yield (topic, p)

    def partitions_of_topic(self, topic: str) -> list[TopicPartition]:
        a = self.assignments.get(topic)
        return [(topic, p) for p in sorted(a.partitions)] if a else []

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def is_live(self, broker_id: int) -> bool:
        """Live and not shutting down (Kafka's isReplicaOnline without shutting-down brokers)."""
        return broker_id in self.live_brokers and broker_id not in self.shutting_down_broker_ids

    def is_live_or_shutting_down(self, broker_id: int) -> bool:
        return broker_id in self.live_brokers

    def broker_epoch(self, broker_id: int) -> int:
        b = self.live_brokers.get(broker_id)
        return b.epoch if b else -1

    def offline_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """Replicas on brokers that are not live or in one of their offline log dirs."""
        return tuple(r for r in self.replicas(tp) if r not in self.live_brokers or self.is_on_offline_dir(r, tp))

    def is_on_offline_dir(self, broker_id: int, tp: TopicPartition) -> bool:
        return tp in self.offline_dir_replicas.get(broker_id, ())

    def is_online(self, tp: TopicPartition) -> bool:
        s = self.states.get(tp)
        return (
            s is not None
            and s.leader != NO_LEADER
            and self.is_live_or_shutting_down(s.leader)
            and not self.is_on_offline_dir(s.leader, tp)
        )

    def unclean_enabled(self, topic: str) -> bool:
        v = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if v is None:
            return self.config.unclean_leader_election_enable
        return v.strip().lower() == "true"

    # -- updating (returns a new context)

    def with_states(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> ControllerContext:
        merged = dict(self.states)
        merged.update(states)
        return replace(self, states=merged)
