"""A point-in-time view of a cluster's topics and consumer groups, and the Prometheus series
built from it with danielqsj/kafka_exporter's names and labels (so its Grafana dashboards work
unchanged), plus the lag in seconds and the time to clear.

``ClusterSnapshot`` is plain data, filled by ``odradek.console.source.ClusterSource`` through the
Kafka protocol (it works against any Kafka-compatible cluster). ``ClusterCollector`` turns the
latest snapshot into series when Prometheus scrapes; it never does I/O itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "BrokerView",
    "ClusterCollector",
    "ClusterSnapshot",
    "GroupPartitionView",
    "GroupView",
    "MemberView",
    "PartitionView",
    "TopicView",
]


@dataclass(slots=True)
class BrokerView:
    node_id: int
    host: str
    port: int


@dataclass(slots=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    oldest: int  # log start offset
    current: int  # log end offset (high watermark as clients see it)
    size: int | None = None  # bytes on disk, when known (the broker's own console)
    offline_replicas: tuple[int, ...] = ()  # Metadata's: on a failed log dir or a dead broker

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(slots=True)
class TopicView:
    name: str
    internal: bool
    partitions: list[PartitionView]

    @property
    def size(self) -> int | None:
        sizes = [p.size for p in self.partitions]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    @property
    def messages(self) -> int:
        return sum(p.current - p.oldest for p in self.partitions)


@dataclass(slots=True)
class MemberView:
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    assignment: list[tuple[str, int]]


@dataclass(slots=True)
class GroupPartitionView:
    topic: str
    partition: int
    committed: int | None  # None: no committed offset
    end: int
    lag: int | None
    lag_seconds: float | None
    time_to_clear: float | None = None  # seconds; -1 not clearing; None unknown
    owner: str | None = None  # member id


@dataclass(slots=True)
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberView]
    partitions: list[GroupPartitionView]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def max_lag_seconds(self) -> float | None:
        values = [p.lag_seconds for p in self.partitions if p.lag_seconds is not None]
        return max(values) if values else None

    @property
    def time_to_clear(self) -> float | None:
        """The slowest partition's estimate: -1 if any does not clear, None if none is known."""
        values = [p.time_to_clear for p in self.partitions if p.time_to_clear is not None]
        if not values:
            return None
        if any(v < 0 for v in values):
            return -1.0
        return max(values)


@dataclass(slots=True)
class ClusterSnapshot:
    taken_ms: int
    cluster_id: str | None
    controller: int
    brokers: list[BrokerView]
    topics: dict[str, TopicView]
    groups: dict[str, GroupView]
    errors: list[str] = field(default_factory=list)


class ClusterCollector(Collector):
    """kafka_exporter's series from the latest snapshot (``latest()`` returns it, or None)."""

    def __init__(self, latest: Callable[[], ClusterSnapshot | None]) -> None:
        self.latest = latest

    def collect(self) -> Iterator[Metric]:
        snap = self.latest()
        if snap is None:
            return
        yield GaugeMetricFamily(
            "kafka_brokers", "Number of Brokers in the Kafka Cluster.", value=len(snap.brokers)
        )
        info = GaugeMetricFamily(
            "kafka_broker_info", "Information about the Kafka Broker.", labels=["address", "id"]
        )
        for b in snap.brokers:
            info.add_metric([f"{b.host}:{b.port}", str(b.node_id)], 1)
        yield info
        tp_labels = ["topic", "partition"]
        partitions = GaugeMetricFamily(
            "kafka_topic_partitions", "Number of partitions for this Topic", labels=["topic"]
        )
        current = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition",
            labels=tp_labels,
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition",
            labels=tp_labels,
        )
        leader = GaugeMetricFamily(
            "kafka_topic_partition_leader", "Leader Broker ID of this Topic/Partition", labels=tp_labels
        )
        replicas = GaugeMetricFamily(
            "kafka_topic_partition_replicas",
            "Number of Replicas for this Topic/Partition",
            labels=tp_labels,
        )
        isr = GaugeMetricFamily(
            "kafka_topic_partition_in_sync_replica",
            "Number of In-Sync Replicas for this Topic/Partition",
            labels=tp_labels,
        )
        preferred = GaugeMetricFamily(
            "kafka_topic_partition_leader_is_preferred",
            "1 if Topic/Partition is using the Preferred Broker",
            labels=tp_labels,
        )
        under = GaugeMetricFamily(
            "kafka_topic_partition_under_replicated_partition",
            "1 if Topic/Partition is under Replicated",
            labels=tp_labels,
        )
        for topic in snap.topics.values():
            partitions.add_metric([topic.name], len(topic.partitions))
            for p in topic.partitions:
                labels = [topic.name, str(p.partition)]
                current.add_metric(labels, p.current)
                oldest.add_metric(labels, p.oldest)
                leader.add_metric(labels, p.leader)
                replicas.add_metric(labels, len(p.replicas))
                isr.add_metric(labels, len(p.isr))
                preferred.add_metric(labels, 1 if p.replicas and p.replicas[0] == p.leader else 0)
                under.add_metric(labels, 1 if p.under_replicated else 0)
        yield from (partitions, current, oldest, leader, replicas, isr, preferred, under)

        g_labels = ["consumergroup", "topic", "partition"]
        members = GaugeMetricFamily(
            "kafka_consumergroup_members",
            "Amount of members in a consumer group",
            labels=["consumergroup"],
        )
        committed = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Current Offset of a ConsumerGroup at Topic/Partition",
            labels=g_labels,
        )
        committed_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Current Offset of a ConsumerGroup at Topic for all partitions",
            labels=["consumergroup", "topic"],
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
            labels=g_labels,
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
            labels=["consumergroup", "topic"],
        )
        lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_lag_seconds",
            "Now minus the timestamp of the first record the group has not consumed (0 when "
            "caught up)",
            labels=g_labels,
        )
        clear = GaugeMetricFamily(
            "kafka_consumergroup_lag_time_to_clear_seconds",
            "Estimated seconds until the lag is 0 at the current consume and produce rates "
            "(-1: not clearing)",
            labels=g_labels,
        )
        for group in snap.groups.values():
            members.add_metric([group.group_id], len(group.members))
            sums: dict[str, list[int]] = {}
            for gp in group.partitions:
                if gp.committed is None:
                    continue
                labels = [group.group_id, gp.topic, str(gp.partition)]
                committed.add_metric(labels, gp.committed)
                entry = sums.setdefault(gp.topic, [0, 0])
                entry[0] += gp.committed
                if gp.lag is not None:
                    lag.add_metric(labels, gp.lag)
                    entry[1] += gp.lag
                if gp.lag_seconds is not None:
                    lag_seconds.add_metric(labels, gp.lag_seconds)
                if gp.time_to_clear is not None:
                    clear.add_metric(labels, gp.time_to_clear)
            for tname, (c, lg) in sorted(sums.items()):
                committed_sum.add_metric([group.group_id, tname], c)
                lag_sum.add_metric([group.group_id, tname], lg)
        yield from (members, committed, committed_sum, lag, lag_sum, lag_seconds, clear)
