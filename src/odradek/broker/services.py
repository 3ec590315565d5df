"""``BrokerServices``: what a request handler may use, typed, instead of the whole Broker.

Built once by ``Broker.start()`` (every service exists by then) and handed to each request in
``RequestContext.services``. A handler reaches partitions only through the replica manager
(whose ``leader_partition`` is the one leadership and epoch check), the cluster only through
the metadata store, topic changes only through the topic admin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.broker.broker_channel import BrokerChannel
from odradek.broker.client_telemetry import ClientTelemetryManager
from odradek.broker.config import BrokerConfig
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.group_configs import GroupConfigManager
from odradek.broker.metadata_store import BrokerInfo, MetadataStore
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.topic_admin import TopicAdmin
from odradek.broker.txn_markers import TxnMarkerAppender
from odradek.clock import Clock, SystemClock
from odradek.coordinator import GroupCoordinator
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.security.quota_store import QuotaStore

if TYPE_CHECKING:  # imports kazoo: only a broker in a cluster loads it
    from odradek.broker.zk_cluster import ZkCluster
    from odradek.security.acl_store import AclStore

__all__ = ["BrokerServices"]


@dataclass(frozen=True, slots=True)
class BrokerServices:
    config: BrokerConfig
    clock: Clock
    metadata: MetadataStore
    replica_manager: ReplicaManager
    topic_admin: TopicAdmin
    producer_ids: ProducerIdManager
    purgatory: Purgatory
    group_coordinator: GroupCoordinator
    api_versions: tuple[tuple[int, int, int], ...]
    """(api key, min version, max version) of every API served, by key (ApiVersions)."""
    txn_coordinator: TransactionCoordinator
    txn_markers: TxnMarkerAppender
    """Appends COMMIT/ABORT markers to the partitions this broker leads (WriteTxnMarkers)."""
    dynamic_config: DynamicBrokerConfig
    """Dynamic broker configs (AlterConfigs on the BROKER resource); ``config`` is kept current."""
    group_configs: GroupConfigManager
    """Group config overrides (the GROUP config resource, KIP-848)."""
    broker_channel: BrokerChannel | None = None
    """Requests to the other brokers of the cluster (None alone)."""
    cluster: ZkCluster | None = None
    """This broker's part in a cluster on ZooKeeper (None alone, without zookeeper.connect)."""
    acls: AclStore | None = None
    """The ACLs and the authorizer (None without ``authorizer.class.name``: all allowed)."""
    quotas: QuotaStore = field(default_factory=QuotaStore)
    """Client quota configs (DescribeClientQuotas, AlterClientQuotas, throttling)."""
    client_telemetry: ClientTelemetryManager = field(
        default_factory=lambda: ClientTelemetryManager(SystemClock())
    )
    """Client telemetry (KIP-714): subscriptions, pushes, the clients' latest metrics."""

    @property
    def node_id(self) -> int:
        return self.metadata.node_id

    def this_broker(self) -> BrokerInfo:
        """This broker as registered in the metadata store (its advertised address)."""
        info = self.metadata.broker(self.metadata.node_id)
        if info is None:
            raise RuntimeError("this broker is not registered in the metadata store")
        return info
