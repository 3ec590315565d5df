"""The broker: lifecycle of the services that answer Kafka's wire protocol.

``Broker(config, clock=None, metadata=None)`` is embeddable: ``await broker.start()`` opens the
metadata store (``LocalMetadataStore`` unless one is injected; ZooKeeper with
``zookeeper.connect``), applies the dynamic configs, builds its parts over the store
(composition.py), binds the Kafka listener (``broker.bound_port`` is then the real port, also
for port 0), registers this broker in the store, starts the coordinators, serves, starts the
background maintenance (maintenance.py) and the console (``http.listeners``), and only then
says it is ready. ``await broker.stop()`` stops accepting, wakes parked requests, stops the
coordinators, snapshots producer state, flushes and checkpoints the logs and closes them. A
failure at start-up (the port, the data dir, the coordinator) fails ``start()``.

The request path: socket → ``KafkaConnection`` (connection.py: framing, routing, response
order) → API module handler (apis/, with ``RequestContext.services``: ``BrokerServices``) →
``ReplicaManager.leader_partition`` → ``Partition`` (leadership, epoch, producer state) →
storage ``PartitionLog``.

Where the pieces are: composition.py (what is built from what: ``ReplicaManager``,
``TopicAdmin``, ``ProducerIdManager``, the coordinators and their ``PartitionWriter``,
``BrokerServices``), listener.py (the Kafka listener and its connections), maintenance.py
(flush, retention, checkpoints, snapshots, the log cleaner), the ``MetadataStore`` Protocol
(metadata_store.py) and ``LocalMetadataStore`` (local_metadata_store.py), the ``Purgatory`` (purgatory.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.broker.api import ApiSpec
from odradek.broker.broker_channel import BrokerChannel
from odradek.broker.composition import (
    cleaner_config,
    compose,
    coordinator_config,
    default_log_config,
    transaction_coordinator_config,
)
from odradek.broker.config import BrokerConfig
from odradek.broker.config_store import ConfigEntityStore, LocalConfigEntityStore
from odradek.broker.connection import KafkaConnection, RequestMetrics, Route
from odradek.broker.coordinator_writer import BrokerPartitionWriter, complete_now
from odradek.broker.dynamic_config import LOG_CLEANER_KEYS, LOG_KEYS, DynamicBrokerConfig
from odradek.broker.group_configs import GroupConfigManager
from odradek.broker.http_services import HttpServices
from odradek.broker.listener import KafkaListener
from odradek.broker.local_metadata_store import LocalMetadataStore
from odradek.broker.maintenance import LogMaintenance
from odradek.broker.metadata_store import (
    BrokerInfo,
    ListenerAddress,
    MetadataStore,
    TopicMetadata,
)
from odradek.broker.observed_state import ObservedState
from odradek.broker.partition import Partition
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.purgatory import Purgatory
from odradek.broker.registry import load_registry
from odradek.broker.replica_manager import ReplicaManager, write_snapshots
from odradek.broker.services import BrokerServices
from odradek.broker.topic_admin import TopicAdmin
from odradek.broker.txn_markers import TxnMarkerAppender, TxnMarkerChannel
from odradek.clock import Clock, SystemClock
from odradek.coordinator import GroupCoordinator
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.security.acl_store import open_acl_store
from odradek.security.quota_store import open_quota_store
from odradek.storage import LogManager
from odradek.storage.cleaner import LogCleaner

if TYPE_CHECKING:
    from odradek.broker.endpoints import Endpoints
    from odradek.broker.zk_cluster import ZkCluster
    from odradek.broker.zk_config_store import ZkConfigEntityStore

__all__ = [
    "Broker",
    "KafkaConnection",
    "coordinator_config",
    "default_log_config",
    "transaction_coordinator_config",
]

log = logging.getLogger("odradek.broker")


class Broker:
    """One broker: config, metadata, logs, coordinators, listener. See the module docstring."""

    def __init__(
        self,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        metadata: MetadataStore | None = None,
        config_store: ConfigEntityStore | None = None,
    ) -> None:
        self.config = config if config is not None else BrokerConfig.default()
        self._injected_config_store = config_store
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.node_id = self.config.node_id_effective
        self.registry: dict[int, ApiSpec[Any, Any]] = load_registry()
        self.routes: dict[tuple[int, int], Route] = {}
        """(api key, version) -> route, shared by the connections (connection.py)."""
        self.purgatory = Purgatory()
        self.data_dir: Path | None = None if self.config.in_memory else self.config.data_dirs[0]
        self._injected_metadata = metadata
        listener = self.config.listener
        self.host = listener.host or "0.0.0.0"
        self.port = listener.port
        self.listener: KafkaListener[KafkaConnection] = KafkaListener(self.host, self.port)
        self.endpoints: Endpoints | None = None  # one per listener, set by start()
        self.stopping = False  # set for good by stop(): late connections are refused
        self._started = False
        # set by start():
        self.metadata: MetadataStore
        self.config_store: ConfigEntityStore
        self.dynamic_config: DynamicBrokerConfig
        self.group_configs: GroupConfigManager
        self.log_manager: LogManager
        self.replica_manager: ReplicaManager
        self.topic_admin: TopicAdmin
        self.producer_ids: ProducerIdManager
        self.coordinator_writer: BrokerPartitionWriter
        self.group_coordinator: GroupCoordinator
        self.txn_markers: TxnMarkerAppender
        self.txn_coordinator: TransactionCoordinator
        self.txn_marker_channel: TxnMarkerChannel | None = None
        self.broker_channel: BrokerChannel | None = None
        self.maintenance: LogMaintenance | None = None
        self._services: BrokerServices | None = None
        # the console (http.listeners) sets .metrics when it starts; connections feed it
        self.metrics: RequestMetrics | None = None
        self.http = HttpServices(self.config, ("127.0.0.1", 0))  # console, schema registry
        self.cluster: ZkCluster | None = None
        """With zookeeper.connect: the controller, AlterPartition, controlled shutdown."""
        self._zk_config_store: ZkConfigEntityStore | None = None
        """With zookeeper.connect: dynamic configs in ZooKeeper (``/config/brokers/...``)."""

    # -- what connections see ----------------------------------------------------------------

    @property
    def services(self) -> BrokerServices:
        if self._services is None:
            raise RuntimeError("the broker is not started")
        return self._services

    @property
    def max_request_bytes(self) -> int:
        return self.config.socket_request_max_bytes

    def register(self, conn: KafkaConnection) -> int:
        return self.listener.register(conn)

    def unregister(self, connection_id: int) -> None:
        self.listener.unregister(connection_id)

    @property
    def connection_count(self) -> int:
        return self.listener.connection_count

    @property
    def bound_port(self) -> int:
        """The listener's port: the configured one, the real one once bound (port 0)."""
        return self.listener.bound_port

    def observed_state(self) -> ObservedState:
        """What the metrics read from this broker at scrape time (handed to the console)."""
        return ObservedState(
            self.log_manager,
            self.replica_manager,
            self.purgatory,
            lambda: self.listener.connection_count,
            self._authentications,
        )

    def _authentications(self) -> tuple[Mapping[Any, int], Mapping[Any, int]]:
        """(succeeded, failed) authentications per (listener, mechanism) (none before start)."""
        if self.endpoints is None:
            return {}, {}
        counters = self.endpoints.counters
        return counters.succeeded, counters.failed

    @property
    def advertised_address(self) -> tuple[str, int]:
        if self.endpoints is not None:  # bound: the inter-broker listener's (endpoints.py)
            return self.endpoints.registered_address()
        adv = self.config.advertised_listener
        host = adv.host
        if not host or host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        port = adv.port if self.config.advertised_listeners and adv.port else self.bound_port
        return host, port

    @property
    def http_address(self) -> tuple[str, int] | None:
        """(host, port) of the console's HTTP listener; None when off or not listening."""
        return self.http.bound

    @property
    def log_cleaner(self) -> LogCleaner | None:
        return self.maintenance.log_cleaner if self.maintenance is not None else None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._injected_metadata is not None:
            metadata: MetadataStore = self._injected_metadata
        elif cfg.zookeeper_connect:
            metadata = await self._join_cluster()
        else:
            metadata = LocalMetadataStore(self.node_id, self.data_dir)
        self.metadata = metadata
        # dynamic broker configs apply before anything reads the config
        if self._injected_config_store is not None:
            self.config_store = self._injected_config_store
        elif self._zk_config_store is not None:
            self.config_store = self._zk_config_store
        else:
            self.config_store = LocalConfigEntityStore(self.data_dir)
        self.dynamic_config = DynamicBrokerConfig(cfg, self.config_store)
        self.dynamic_config.initialize()
        self.group_configs = GroupConfigManager(cfg, self.config_store)
        self.acls = await open_acl_store(
            cfg, self.data_dir, None if self._zk_config_store is None else self._zk_config_store.zk
        )
        if self._zk_config_store is None:
            self.quotas = open_quota_store(cfg, self.data_dir)
        else:  # a cluster keeps them in ZooKeeper (not imported by a single broker)
            from odradek.broker.zk_quota_store import open_broker_quota_store

            self.quotas = await open_broker_quota_store(
                cfg, self.data_dir, self._zk_config_store.zk
            )
        parts = compose(
            cfg,
            self.clock,
            metadata,
            self.purgatory,
            self.data_dir,
            self.cluster,
            api_versions=tuple(
                (s.key, s.min_version, s.max_version)
                for s in sorted(self.registry.values(), key=lambda s: s.key)
            ),
            dynamic_config=self.dynamic_config,
            group_configs=self.group_configs,
            acls=self.acls,
            quotas=self.quotas,
        )
        self.log_manager, self.replica_manager = parts.log_manager, parts.replica_manager
        if self.cluster is not None:  # a failed log dir is announced to the controller
            self.replica_manager.log_dirs.add_failure_listener(self.cluster.log_dir_failed)
        self.topic_admin, self.producer_ids = parts.topic_admin, parts.producer_ids
        self.coordinator_writer, self.group_coordinator = (
            parts.coordinator_writer,
            parts.group_coordinator,
        )
        self.txn_markers, self.txn_coordinator = parts.txn_markers, parts.txn_coordinator
        self.broker_channel, self.txn_marker_channel = (
            parts.broker_channel,
            parts.txn_marker_channel,
        )
        self._services = parts.services
        maintenance = self.maintenance = LogMaintenance(
            self.log_manager,
            self.replica_manager,
            self.clock,
            retention_check_interval_ms=cfg.log_retention_check_interval_ms,
        )
        self.dynamic_config.add_reconfigurable(LOG_KEYS, self._reconfigure_log_defaults)
        self.dynamic_config.add_reconfigurable(LOG_CLEANER_KEYS, self._reconfigure_log_cleaner)
        try:
            self.replica_manager.open_all()
            # bind first (the port is known, e.g. for FindCoordinator), serve once the
            # coordinators have loaded their state; one socket per listener (TLS and SASL as
            # listener.security.protocol.map says: endpoints.py)
            from odradek.broker.endpoints import Endpoints  # lazy: the TLS and SASL modules

            self.endpoints = Endpoints(cfg, lambda: self.config_store)
            endpoints = self.endpoints
            self.http.configure_security(endpoints, self.acls)
            await self.listener.bind(lambda: endpoints.bind(lambda ep: KafkaConnection(self, ep)))
            self.http.configure_clients(endpoints, self.advertised_address)
            host, port = self.advertised_address
            rack = self.config.broker_rack
            listeners = tuple(
                ListenerAddress(ep.name, ep.security_protocol, *ep.address)
                for ep in endpoints.endpoints
            )  # every listener, registered for clients (Metadata answers per listener)
            await metadata.register_broker(BrokerInfo(self.node_id, host, port, rack, 0, listeners))
            await self.group_coordinator.start()
            await self.txn_coordinator.start()
            await self.listener.start_serving()
            if self.cluster is not None:
                self.cluster.start_controller()
        except BaseException:
            self.listener.close_now()
            if self.cluster is not None:
                await self.cluster.stop()
            if self._zk_config_store is not None:
                self._zk_config_store.close()
            self.log_manager.close()
            metadata.close()
            raise
        maintenance.start(asyncio.get_running_loop(), cleaner_config(cfg))
        self._started = True

        # the console, /metrics and /health listen when the broker says it is ready (the
        # console's imports run in a worker thread, counted in the start); the registry starts
        def install_metrics(metrics: RequestMetrics) -> None:
            self.metrics = metrics

        await self.http.start(
            node_id=self.node_id,
            state=self.observed_state(),
            api_names={key: spec.name for key, spec in self.registry.items()},
            install_metrics=install_metrics,
            ready=lambda: self._started,
            client_telemetry=self.services.client_telemetry,
        )
        log.info("broker %s listening on %s:%s", self.node_id, self.host, self.bound_port)

    async def _join_cluster(self) -> MetadataStore:
        """zookeeper.connect: the ZooKeeper store and this broker's part in the cluster (kazoo is
        imported only here)."""
        from odradek.broker.zk_cluster import ZkCluster
        from odradek.broker.zk_config_store import ZkConfigEntityStore
        from odradek.broker.zk_metadata_store import ZkMetadataStore

        cfg = self.config
        store = ZkMetadataStore(
            self.node_id,
            cfg.zookeeper_connect,
            session_timeout_ms=cfg.zookeeper_session_timeout_ms,
            connection_timeout_ms=cfg.zookeeper_connection_timeout_ms,
            admin_timeout_ms=cfg.request_timeout_ms,
            inter_broker_listener=cfg.advertised_listener.name,
        )
        config_store = ZkConfigEntityStore(
            store.zk, admin_timeout_ms=cfg.request_timeout_ms, clock=self.clock
        )
        try:
            await store.start()
            await config_store.start()
        except BaseException:
            config_store.close()
            store.close()
            raise
        self._zk_config_store = config_store
        self.cluster = ZkCluster(cfg, store, self.clock)
        return store

    def new_group_coordinator(self) -> GroupCoordinator:
        """A group coordinator over this broker's partitions (start() makes the broker's own)."""
        return GroupCoordinator(
            self.coordinator_writer, coordinator_config(self.config, self.data_dir), self.clock
        )

    async def _reconfigure_log_defaults(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Dynamic log.* defaults: every live log without a topic override follows them."""
        self.replica_manager.set_default_log_config(default_log_config(new))

    async def _reconfigure_log_cleaner(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Dynamic log.cleaner.*: restart the cleaner with the new settings."""
        if self._started and self.maintenance is not None:
            await self.maintenance.reconfigure_cleaner(cleaner_config(new))

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self.cluster is not None and self.config.controlled_shutdown_enable:
            # still serving: the controller's LeaderAndIsr/StopReplica arrive meanwhile
            try:
                await self.cluster.controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed")
        self.stopping = True
        await self.http.stop()  # first: their Kafka clients talk to this broker
        await self.listener.stop_accepting()
        self.purgatory.close()
        await self.replica_manager.close()  # replica fetchers, ISR expiration
        self.listener.abort_connections()
        if self.maintenance is not None:
            await self.maintenance.stop()
        try:
            await self.txn_coordinator.stop()
        except Exception:
            log.exception("transaction coordinator failed to stop cleanly")
        if self.broker_channel is not None:
            self.broker_channel.close()
        try:
            await self.group_coordinator.stop()
        except Exception:
            log.exception("group coordinator failed to stop cleanly")
        await self.listener.wait_closed()
        write_snapshots(self.replica_manager.producer_state_snapshots(force=True))
        try:
            for plog in self.log_manager.all_logs():
                try:
                    plog.flush()
                except Exception:
                    log.exception("flush of %s-%d failed", plog.topic, plog.partition)
        finally:
            self.log_manager.close()
            if self.cluster is not None:
                with contextlib.suppress(Exception):
                    await self.cluster.stop()
            if self._zk_config_store is not None:
                self._zk_config_store.close()
            self.metadata.close()
        log.info("broker %s stopped", self.node_id)

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- embedding conveniences --------------------------------------------------------------

    def partition(self, topic: str, partition: int, *, create: bool = True) -> Partition | None:
        """``ReplicaManager.get_partition`` (for embedding code and tests)."""
        return self.replica_manager.get_partition(topic, partition, create=create)

    def create_topic(
        self, name: str, num_partitions: int, configs: dict[str, str] | None = None
    ) -> TopicMetadata:
        """Create a topic at once, from synchronous embedding code (``TopicAdmin.create_topic``
        with a metadata store whose writes do not suspend, as the local one's)."""
        return complete_now(self.topic_admin.create_topic(name, num_partitions, configs))
