"""The broker: lifecycle of the services that answer Kafka's wire protocol.

``Broker(config, clock=None, metadata=None)`` is embeddable: ``await broker.start()`` opens the
metadata store (``LocalMetadataStore`` unless one is injected), the logs, binds the listener
(``broker.bound_port`` is then the real port, also for port 0), registers this broker in the
store, starts the group coordinator and serves; ``await broker.stop()`` stops accepting, wakes
parked requests, stops the coordinator, snapshots producer state, flushes and checkpoints the
logs and closes them. A failure at start-up (the port, the data dir, the coordinator) fails
``start()``.

The request path: socket → ``KafkaConnection`` (connection.py: framing, routing, response
order) → API module handler (apis/, with ``RequestContext.services``: ``BrokerServices``) →
``ReplicaManager.leader_partition`` → ``Partition`` (leadership, epoch, producer state) →
storage ``PartitionLog``.

The pieces: ``ReplicaManager`` (replica_manager.py, ``Partition`` objects), ``TopicAdmin``
(topic_admin.py), ``ProducerIdManager`` (producer_ids.py), the ``MetadataStore`` Protocol
(metadata_store.py) and ``LocalMetadataStore`` (local_metadata_store.py), the coordinator's
``PartitionWriter`` (coordinator_writer.py), the ``Purgatory`` (purgatory.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.broker.api import ApiSpec
from odradek.broker.broker_channel import BrokerChannel
from odradek.broker.config import BrokerConfig
from odradek.broker.config_store import ConfigEntityStore, LocalConfigEntityStore
from odradek.broker.connection import KafkaConnection, RequestMetrics, Route
from odradek.broker.coordinator_writer import (
    BrokerPartitionWriter,
    complete_now,
    follow_leadership,
)
from odradek.broker.dynamic_config import LOG_CLEANER_KEYS, LOG_KEYS, DynamicBrokerConfig
from odradek.broker.group_configs import GroupConfigManager
from odradek.broker.local_metadata_store import LocalMetadataStore
from odradek.broker.metadata_store import BrokerInfo, MetadataStore, TopicMetadata
from odradek.broker.observed_state import ObservedState
from odradek.broker.partition import Partition
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.purgatory import Purgatory
from odradek.broker.registry import load_registry
from odradek.broker.replica_manager import ReplicaManager, ReplicationConfig, write_snapshots
from odradek.broker.services import BrokerServices
from odradek.broker.topic_admin import OFFSETS_TOPIC, TopicAdmin
from odradek.broker.txn_markers import TxnMarkerAppender, TxnMarkerChannel
from odradek.clock import Clock, SystemClock
from odradek.coordinator import CoordinatorConfig, GroupConfig, GroupCoordinator
from odradek.coordinator.transaction.coordinator import (
    TransactionCoordinator,
    TransactionCoordinatorConfig,
)
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from odradek.coordinator.transaction.state import TransactionConfig
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner

if TYPE_CHECKING:
    from odradek.broker.zk_cluster import ZkCluster
    from odradek.broker.zk_config_store import ZkConfigEntityStore
    from odradek.console.broker import BrokerConsole

__all__ = ["Broker", "KafkaConnection", "coordinator_config", "default_log_config"]

log = logging.getLogger("odradek.broker")

_SNAPSHOT_EVERY_MS = 30_000


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


async def close_listener(server: asyncio.Server) -> None:
    """Stop accepting, let the connections already accepted get their transport, then close.

    On selector event loops asyncio accepts in the listener's callback and builds each
    connection's transport in a task that runs one loop turn later. ``Server.close()`` in
    between makes that task fail (``Server._attach`` asserts the server is open; the error is
    swallowed) and leaves the accepted socket in a half-built transport that refers to itself:
    only the cyclic garbage collector closes it, so its client sees no EOF for as long as no
    collection runs. Hence: remove the listener's reader (no new accept callback runs), give the
    tasks of the accepts already made the one turn they need (their ``connection_made`` then sees
    ``stopping`` and aborts), and only then close the server."""
    loop = asyncio.get_running_loop()
    try:
        for sock in server.sockets:
            # not every loop has readers (proactor) or serves through them (uvloop: no-op)
            with contextlib.suppress(NotImplementedError, ValueError, OSError):
                loop.remove_reader(sock.fileno())
        await asyncio.sleep(0)
    finally:
        server.close()


class Broker:
    """One broker: config, metadata, logs, coordinator, listener. See the module docstring."""

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
        self.bound_port = listener.port
        self.stopping = False  # set for good by stop(): late connections are refused
        self._server: asyncio.Server | None = None
        self._connections: dict[int, KafkaConnection] = {}
        self._next_connection_id = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._background: asyncio.Future[None] | None = None
        self._started = False
        # set by start():
        self.metadata: MetadataStore
        self.log_manager: LogManager
        self.replica_manager: ReplicaManager
        self.topic_admin: TopicAdmin
        self.producer_ids: ProducerIdManager
        self.coordinator_writer: BrokerPartitionWriter
        self.group_coordinator: GroupCoordinator
        self.txn_markers: TxnMarkerAppender
        self.txn_marker_channel: TxnMarkerChannel | None = None
        self.broker_channel: BrokerChannel | None = None
        self.txn_coordinator: TransactionCoordinator
        self.log_cleaner: LogCleaner | None = None
        self.config_store: ConfigEntityStore
        self.dynamic_config: DynamicBrokerConfig
        self.group_configs: GroupConfigManager
        self._services: BrokerServices | None = None
        # the console (http.listeners) sets .metrics when it starts; connections feed it
        self.metrics: RequestMetrics | None = None
        self._console: BrokerConsole | None = None
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
        self._next_connection_id += 1
        self._connections[self._next_connection_id] = conn
        return self._next_connection_id

    def unregister(self, connection_id: int) -> None:
        self._connections.pop(connection_id, None)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def observed_state(self) -> ObservedState:
        """What the metrics read from this broker at scrape time (handed to the console)."""
        return ObservedState(
            self.log_manager, self.replica_manager, self.purgatory, lambda: len(self._connections)
        )

    @property
    def advertised_address(self) -> tuple[str, int]:
        endpoints = getattr(self, "endpoints", None)
        if endpoints is not None:  # bound: the inter-broker listener's (endpoints.py)
            return endpoints.registered_address()  # type: ignore[no-any-return]
        adv = self.config.advertised_listener
        host = adv.host
        if not host or host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        port = adv.port if self.config.advertised_listeners and adv.port else self.bound_port
        return host, port

    @property
    def http_address(self) -> tuple[str, int] | None:
        """(host, port) of the console's HTTP listener; None when off or not yet listening (it
        starts in the background and logs ``console listening on <url>``)."""
        return self._console.bound if self._console is not None else None

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
        defaults = default_log_config(cfg)
        topic_configs = {
            t.name: LogConfig.from_topic_config(t.configs, defaults)
            for t in metadata.topics()
            if t.configs
        }
        self.log_manager = LogManager(
            None if cfg.in_memory else cfg.data_dirs,
            defaults,
            self.clock,
            in_memory=cfg.in_memory,
            topic_configs=topic_configs,
            retention_check_interval_ms=cfg.log_retention_check_interval_ms,
            flush_check_interval_ms=max(1, min(1000, cfg.log_flush_scheduler_interval_ms)),
            checkpoint_interval_ms=max(1, cfg.log_flush_offset_checkpoint_interval_ms),
        )
        self.replica_manager = ReplicaManager(
            metadata,
            self.log_manager,
            defaults,
            self.purgatory,
            self.data_dir,
            clock=self.clock,
            replication=ReplicationConfig.from_broker_config(cfg),
            alter_partition_manager=(
                None if self.cluster is None else self.cluster.alter_partition_manager
            ),
            inter_broker_client=None if self.cluster is None else self.cluster.client,
        )
        self.topic_admin = TopicAdmin(
            cfg, metadata, self.replica_manager, replicated=self.cluster is not None
        )
        self.producer_ids = ProducerIdManager(metadata)
        self.coordinator_writer = BrokerPartitionWriter(
            metadata, self.replica_manager, self.topic_admin, cfg.offsets_commit_timeout_ms
        )
        self.group_coordinator = self.new_group_coordinator()
        self.txn_markers = TxnMarkerAppender(
            self.replica_manager, self.purgatory, self.clock, cfg.offsets_commit_timeout_ms
        )
        self.txn_markers.on_offsets_marker = self.group_coordinator.complete_txn_offsets
        marker_writer = self.txn_markers.write_markers
        if self.cluster is not None:  # markers go to each partition's leader
            # an attempt is bounded (a leader waits up to offsets.commit.timeout.ms for its
            # ISR), so that an EndTxn whose partition leader hangs is answered; the markers
            # are then retried in the background
            self.broker_channel = BrokerChannel(
                metadata, self.cluster.client, "txn", cfg.offsets_commit_timeout_ms + 1000
            )
            self.txn_marker_channel = TxnMarkerChannel(
                metadata, self.txn_markers, self.broker_channel
            )
            marker_writer = self.txn_marker_channel.write_markers
        self.txn_coordinator = TransactionCoordinator(
            self.coordinator_writer,
            transaction_coordinator_config(cfg),
            self.clock,
            self.producer_ids.allocate,
            marker_writer,
        )
        if self.cluster is not None:
            # the coordinator of a group (a transactional id) is the leader of its
            # __consumer_offsets (__transaction_state) partition
            group = self.group_coordinator
            group.follow_partition_leadership()
            follow_leadership(
                self.replica_manager,
                OFFSETS_TOPIC,
                lambda led, followed: group.on_leadership_change(list(led), followed),
            )
            txn = self.txn_coordinator
            txn.follow_partition_leadership()
            follow_leadership(
                self.replica_manager, TRANSACTION_STATE_TOPIC, txn.on_leadership_change
            )
        self._services = BrokerServices(
            config=cfg,
            clock=self.clock,
            metadata=metadata,
            replica_manager=self.replica_manager,
            topic_admin=self.topic_admin,
            producer_ids=self.producer_ids,
            purgatory=self.purgatory,
            group_coordinator=self.group_coordinator,
            api_versions=tuple(
                (s.key, s.min_version, s.max_version)
                for s in sorted(self.registry.values(), key=lambda s: s.key)
            ),
            txn_coordinator=self.txn_coordinator,
            txn_markers=self.txn_markers,
            broker_channel=self.broker_channel,
            dynamic_config=self.dynamic_config,
            group_configs=self.group_configs,
            cluster=self.cluster,
        )
        self.dynamic_config.add_reconfigurable(LOG_KEYS, self._reconfigure_log_defaults)
        self.dynamic_config.add_reconfigurable(LOG_CLEANER_KEYS, self._reconfigure_log_cleaner)
        try:
            self.replica_manager.open_all()
            loop = asyncio.get_running_loop()
            # bind first (the port is known, e.g. for FindCoordinator), serve once the
            # coordinator has loaded its state
            # one socket server per listener (TLS, SASL per listener.security.protocol.map)
            from odradek.broker.endpoints import Endpoints

            self.endpoints = Endpoints(cfg, lambda: self.config_store)
            listeners = await self.endpoints.bind(lambda ep: KafkaConnection(self, ep))
            self._server = listeners  # type: ignore[assignment]  # serves as one asyncio.Server
            assert self._server is not None
            sockets = self._server.sockets
            if sockets:
                self.bound_port = sockets[0].getsockname()[1]
            host, port = self.advertised_address
            await metadata.register_broker(BrokerInfo(self.node_id, host, port))
            await self.group_coordinator.start()
            await self.txn_coordinator.start()
            await self._server.start_serving()
            if self.cluster is not None:
                self.cluster.start_controller()
        except BaseException:
            if self._server is not None:
                self._server.close()
                self._server = None
            if self.cluster is not None:
                await self.cluster.stop()
            if self._zk_config_store is not None:
                self._zk_config_store.close()
            self.log_manager.close()
            metadata.close()
            raise
        self._tasks.append(loop.create_task(self._maintenance_loop()))
        self._start_log_cleaner(loop)
        self._started = True
        if self.config.http_listeners:
            # the console, /metrics and /health; started in the background (its imports run in
            # a worker thread) so that it does not delay the broker's start
            from odradek.console.broker import BrokerConsole, ConsoleHost

            def install_metrics(metrics: RequestMetrics) -> None:
                self.metrics = metrics

            console_host = ConsoleHost(
                node_id=self.node_id,
                kafka_address=self.advertised_address,
                state=self.observed_state(),
                api_names={key: spec.name for key, spec in self.registry.items()},
                install_metrics=install_metrics,
            )
            self._console = BrokerConsole(
                console_host, self.config.http_listeners, ready=lambda: self._started
            )
            self._console.start_soon()
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

    def _start_log_cleaner(self, loop: asyncio.AbstractEventLoop) -> None:
        """log.cleaner.*: compaction threads that swap segments through this loop."""
        self.log_cleaner = LogCleaner(
            self.log_manager,
            CleanerConfig.from_broker_config({k: self.config.get(k) for k in CleanerConfig.KEYS}),
            self.clock,
            loop=loop,
        )
        if self.config.log_cleaner_threads > 0:
            self.log_cleaner.start()

    async def _reconfigure_log_defaults(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Dynamic log.* defaults: every live log without a topic override follows them."""
        self.replica_manager.set_default_log_config(default_log_config(new))

    async def _reconfigure_log_cleaner(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Dynamic log.cleaner.*: restart the cleaner with the new settings (as Kafka's
        LogCleaner.reconfigure: shutdown, then start)."""
        if not self._started:
            return
        loop = asyncio.get_running_loop()
        if self.log_cleaner is not None:
            await loop.run_in_executor(None, self.log_cleaner.shutdown)
        self._start_log_cleaner(loop)

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
        if self._console is not None:  # first: its client talks to this broker
            console, self._console = self._console, None
            with contextlib.suppress(Exception):
                await console.stop()
        if self._server is not None:
            await close_listener(self._server)
        self.purgatory.close()
        await self.replica_manager.close()  # replica fetchers, ISR expiration
        # abort, not close: a client that stopped reading must not keep its socket (and this
        # stop) waiting for its write buffer to drain
        for conn in list(self._connections.values()):
            conn.abort(None)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.log_cleaner is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.log_cleaner.shutdown)
        if self._background is not None:
            with contextlib.suppress(Exception):
                await self._background  # a checkpoint or snapshot still being written
            self._background = None
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
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
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

    # -- background tasks --------------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        """Log maintenance on LogManager's schedule: the flush policy and retention run on the
        event loop (cheap unless due); checkpoints (three fsynced files per log dir, 3-8 ms
        measured) and producer-state snapshots are written by a worker thread so that they do
        not stall requests."""
        lm = self.log_manager
        clock = self.clock
        interval = max(
            0.01,
            min(
                1.0,
                self.config.log_retention_check_interval_ms / 1000.0,
                lm.checkpoint_interval_ms / 1000.0,
            ),
        )
        now = clock.now_ms()
        next_flush = now + lm.flush_check_interval_ms
        next_retention = now + lm.retention_check_interval_ms
        next_checkpoint = now + lm.checkpoint_interval_ms
        next_snapshot = now + min(_SNAPSHOT_EVERY_MS, lm.checkpoint_interval_ms)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = clock.now_ms()
            try:
                if now >= next_flush:
                    next_flush = now + lm.flush_check_interval_ms
                    lm.run_flush(now)
                if now >= next_retention:
                    next_retention = now + lm.retention_check_interval_ms
                    lm.run_retention(now)
                    self.replica_manager.truncate_producer_states()
                if now >= next_checkpoint:
                    next_checkpoint = now + lm.checkpoint_interval_ms
                    self._background = loop.run_in_executor(None, self._checkpoint_quietly)
                    await asyncio.shield(self._background)
                if now >= next_snapshot:
                    next_snapshot = now + min(_SNAPSHOT_EVERY_MS, lm.checkpoint_interval_ms)
                    snapshots = self.replica_manager.producer_state_snapshots()
                    if snapshots:
                        self._background = loop.run_in_executor(None, write_snapshots, snapshots)
                        await asyncio.shield(self._background)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log maintenance failed")

    def _checkpoint_quietly(self) -> None:
        try:
            self.log_manager.checkpoint()
        except RuntimeError:
            # a partition was created while the worker thread iterated: next time
            log.debug("checkpoint skipped (logs changed meanwhile)")
