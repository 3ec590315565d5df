"""How a broker's parts are built from its configuration: the broker's composition root.

``compose(cfg, clock, metadata, purgatory, data_dir, cluster, api_versions)`` builds, in order
of dependency (each from the ones above it)::

    LogManager          the logs (opened here; recovery happens in ReplicaManager.open_all)
    ReplicaManager      Partition objects, leadership, fetchers, ISR
    TopicAdmin          create/delete/alter topics
    ProducerIdManager   blocks of producer ids from the metadata store
    BrokerPartitionWriter   the coordinators' narrow writer
    GroupCoordinator    __consumer_offsets
    TxnMarkerAppender   transaction markers on this broker's partitions
      (cluster: BrokerChannel + TxnMarkerChannel send them to each partition's leader)
    TransactionCoordinator  __transaction_state
    BrokerServices      what every request handler is handed

and, in a cluster, makes the coordinators follow the leadership of their internal topics.
Nothing here does I/O apart from opening the logs; ``Broker.start`` then binds, registers and
starts them. The ``*_config`` functions translate the broker's keys into each part's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.broker.broker_channel import BrokerChannel
from odradek.broker.client_telemetry import ClientTelemetryManager
from odradek.broker.config import BrokerConfig
from odradek.broker.coordinator_writer import BrokerPartitionWriter, follow_leadership
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.group_configs import GroupConfigManager
from odradek.broker.metadata_store import MetadataStore
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.purgatory import Purgatory
from odradek.broker.replica_manager import ReplicaManager, ReplicationConfig
from odradek.broker.services import BrokerServices
from odradek.broker.topic_admin import OFFSETS_TOPIC, TopicAdmin
from odradek.broker.txn_markers import TxnMarkerAppender, TxnMarkerChannel
from odradek.clock import Clock
from odradek.coordinator import CoordinatorConfig, GroupConfig, GroupCoordinator
from odradek.coordinator.transaction.coordinator import (
    TransactionCoordinator,
    TransactionCoordinatorConfig,
)
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from odradek.coordinator.transaction.state import TransactionConfig
from odradek.security.quota_store import QuotaStore
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import CleanerConfig

if TYPE_CHECKING:
    from odradek.broker.zk_cluster import ZkCluster
    from odradek.security.acl_store import AclStore

__all__ = [
    "BrokerComponents",
    "cleaner_config",
    "compose",
    "coordinator_config",
    "default_log_config",
    "transaction_coordinator_config",
]


def default_log_config(cfg: BrokerConfig) -> LogConfig:
    """The broker-wide log defaults (``log.*`` keys) that topic overrides apply to."""
    return LogConfig(
        segment_bytes=cfg.log_segment_bytes,
        segment_ms=cfg.roll_ms,
        retention_ms=cfg.retention_ms,
        retention_bytes=cfg.log_retention_bytes,
        index_interval_bytes=cfg.log_index_interval_bytes,
        segment_index_bytes=cfg.log_index_size_max_bytes,
        max_message_bytes=cfg.message_max_bytes,
        flush_interval_messages=cfg.log_flush_interval_messages,
        flush_interval_ms=cfg.flush_interval_ms,
        cleanup_policy=cfg.log_cleanup_policy,
        message_timestamp_type=cfg.log_message_timestamp_type,
        delete_retention_ms=cfg.log_cleaner_delete_retention_ms,
        min_compaction_lag_ms=cfg.log_cleaner_min_compaction_lag_ms,
        max_compaction_lag_ms=cfg.log_cleaner_max_compaction_lag_ms,
        min_cleanable_dirty_ratio=cfg.log_cleaner_min_cleanable_ratio,
        file_delete_delay_ms=int(cfg.get("log.segment.delete.delay.ms")),
    )


def coordinator_config(cfg: BrokerConfig, data_dir: Path | None) -> CoordinatorConfig:
    """The group coordinator's settings from the broker's ``offsets.*`` / ``group.*`` keys."""
    return CoordinatorConfig(
        offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
        offsets_topic_segment_bytes=cfg.offsets_topic_segment_bytes,
        offsets_topic_compression_codec=cfg.offsets_topic_compression_codec,
        offsets_retention_check_interval_ms=cfg.offsets_retention_check_interval_ms,
        group=GroupConfig(
            initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=cfg.group_min_session_timeout_ms,
            max_session_timeout_ms=cfg.group_max_session_timeout_ms,
            max_size=cfg.group_max_size,
            offset_metadata_max_bytes=cfg.offset_metadata_max_bytes,
            offsets_retention_ms=cfg.offsets_retention_minutes * 60_000,
        ),
        checkpoint_dir=data_dir,
    )


def transaction_coordinator_config(cfg: BrokerConfig) -> TransactionCoordinatorConfig:
    """The transaction coordinator's settings from the broker's ``transaction.*`` keys."""
    return TransactionCoordinatorConfig(
        transaction=TransactionConfig(
            transaction_max_timeout_ms=cfg.transaction_max_timeout_ms,
            transactional_id_expiration_ms=cfg.transactional_id_expiration_ms,
            transaction_state_log_num_partitions=cfg.transaction_state_log_num_partitions,
            offsets_topic_num_partitions=cfg.offsets_topic_num_partitions,
        ),
        state_log_segment_bytes=cfg.transaction_state_log_segment_bytes,
        abort_timed_out_transaction_cleanup_interval_ms=(
            cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
        remove_expired_transaction_cleanup_interval_ms=(
            cfg.transaction_remove_expired_transaction_cleanup_interval_ms
        ),
    )


def cleaner_config(cfg: BrokerConfig) -> CleanerConfig:
    """The log cleaner's settings from the broker's ``log.cleaner.*`` keys."""
    return CleanerConfig.from_broker_config({k: cfg.get(k) for k in CleanerConfig.KEYS})


@dataclass(slots=True)
class BrokerComponents:
    """The parts ``compose`` built (see the module docstring); ``broker_channel`` and
    ``txn_marker_channel`` only in a cluster."""

    log_manager: LogManager
    replica_manager: ReplicaManager
    topic_admin: TopicAdmin
    producer_ids: ProducerIdManager
    coordinator_writer: BrokerPartitionWriter
    group_coordinator: GroupCoordinator
    txn_markers: TxnMarkerAppender
    txn_coordinator: TransactionCoordinator
    services: BrokerServices
    broker_channel: BrokerChannel | None = None
    txn_marker_channel: TxnMarkerChannel | None = None


def compose(
    cfg: BrokerConfig,
    clock: Clock,
    metadata: MetadataStore,
    purgatory: Purgatory,
    data_dir: Path | None,
    cluster: ZkCluster | None,
    *,
    api_versions: tuple[tuple[int, int, int], ...],
    dynamic_config: DynamicBrokerConfig,
    group_configs: GroupConfigManager,
    acls: AclStore | None = None,
    quotas: QuotaStore | None = None,
) -> BrokerComponents:
    """Build the broker's parts over an open metadata store (see the module docstring)."""
    defaults = default_log_config(cfg)
    topic_configs = {
        t.name: LogConfig.from_topic_config(t.configs, defaults)
        for t in metadata.topics()
        if t.configs
    }
    log_manager = LogManager(
        None if cfg.in_memory else cfg.data_dirs,
        defaults,
        clock,
        in_memory=cfg.in_memory,
        topic_configs=topic_configs,
        retention_check_interval_ms=cfg.log_retention_check_interval_ms,
        flush_check_interval_ms=max(1, min(1000, cfg.log_flush_scheduler_interval_ms)),
        checkpoint_interval_ms=max(1, cfg.log_flush_offset_checkpoint_interval_ms),
    )
    replica_manager = ReplicaManager(
        metadata,
        log_manager,
        defaults,
        purgatory,
        data_dir,
        clock=clock,
        replication=ReplicationConfig.from_broker_config(cfg),
        alter_partition_manager=None if cluster is None else cluster.alter_partition_manager,
        inter_broker_client=None if cluster is None else cluster.client,
    )
    topic_admin = TopicAdmin(cfg, metadata, replica_manager, replicated=cluster is not None)
    producer_ids = ProducerIdManager(metadata)
    writer = BrokerPartitionWriter(
        metadata, replica_manager, topic_admin, cfg.offsets_commit_timeout_ms
    )
    group = GroupCoordinator(writer, coordinator_config(cfg, data_dir), clock)
    txn_markers = TxnMarkerAppender(replica_manager, clock, cfg.offsets_commit_timeout_ms)
    txn_markers.on_offsets_marker = group.complete_txn_offsets
    marker_writer = txn_markers.write_markers
    broker_channel: BrokerChannel | None = None
    txn_marker_channel: TxnMarkerChannel | None = None
    if cluster is not None:  # markers go to each partition's leader
        # an attempt is bounded (a leader waits up to offsets.commit.timeout.ms for its ISR),
        # so that an EndTxn whose partition leader hangs is answered; the markers are then
        # retried in the background
        broker_channel = BrokerChannel(
            metadata, cluster.client, "txn", cfg.offsets_commit_timeout_ms + 1000
        )
        txn_marker_channel = TxnMarkerChannel(metadata, txn_markers, broker_channel)
        marker_writer = txn_marker_channel.write_markers
    txn = TransactionCoordinator(
        writer, transaction_coordinator_config(cfg), clock, producer_ids.allocate, marker_writer
    )
    if cluster is not None:
        # the coordinator of a group (a transactional id) is the leader of its
        # __consumer_offsets (__transaction_state) partition
        group.follow_partition_leadership()
        follow_leadership(
            replica_manager,
            OFFSETS_TOPIC,
            lambda led, followed: group.on_leadership_change(list(led), followed),
        )
        txn.follow_partition_leadership()
        follow_leadership(replica_manager, TRANSACTION_STATE_TOPIC, txn.on_leadership_change)
    services = BrokerServices(
        acls=acls,
        quotas=QuotaStore() if quotas is None else quotas,
        config=cfg,
        clock=clock,
        metadata=metadata,
        replica_manager=replica_manager,
        topic_admin=topic_admin,
        producer_ids=producer_ids,
        purgatory=purgatory,
        group_coordinator=group,
        api_versions=api_versions,
        txn_coordinator=txn,
        txn_markers=txn_markers,
        broker_channel=broker_channel,
        dynamic_config=dynamic_config,
        group_configs=group_configs,
        cluster=cluster,
        client_telemetry=ClientTelemetryManager(
            clock, dynamic_config.store, lambda: int(cfg.get("telemetry.max.bytes"))
        ),
    )
    return BrokerComponents(
        log_manager=log_manager,
        replica_manager=replica_manager,
        topic_admin=topic_admin,
        producer_ids=producer_ids,
        coordinator_writer=writer,
        group_coordinator=group,
        txn_markers=txn_markers,
        txn_coordinator=txn,
        services=services,
        broker_channel=broker_channel,
        txn_marker_channel=txn_marker_channel,
    )
