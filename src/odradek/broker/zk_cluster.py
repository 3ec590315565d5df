"""``ZkCluster``: this broker's part in a cluster on ZooKeeper (``zookeeper.connect`` set).

It owns, besides the ``ZkMetadataStore``:

* the **inter-broker client** (``odradek.broker.inter_broker_client.InterBrokerClient``,
  ``client``): the one client for every request to another broker (replica fetchers,
  controller channel, transaction markers, requests to the controller); closed last by
  :meth:`ZkCluster.stop`;
* the **controller** (``odradek.controller.Controller``, its own event thread): every broker
  runs one, the one holding ``/controller`` is active and talks to the brokers through a
  ``ControllerChannelManager`` on this broker's loop (LeaderAndIsr, UpdateMetadata, StopReplica
  to their advertised listeners);
* the **AlterPartitionManager** (:class:`ControllerAlterPartitionManager`): a leader's ISR
  change sent as AlterPartition (API 56, v2) to the active controller;
* **controlled shutdown** (:meth:`ZkCluster.controlled_shutdown`): ControlledShutdown (API 7, v3)
  to the active controller until it answers that this broker leads no replicated partition
  any more, at most ``controlled.shutdown.max.retries`` + 1 attempts, waiting
  ``controlled.shutdown.retry.backoff.ms`` between them.

Requests to the active controller go through the client, on the (controller id,
``alter-partition``) and (controller id, ``controlled-shutdown``) connections (Kafka keeps them
apart too: one does not wait behind the other), each bounded by
``controller.socket.timeout.ms``; one that gets
no answer raises ``ControllerUnavailableError`` (the caller retries: AlterPartition answers
NOT_CONTROLLER, controlled shutdown waits for a controller). When this broker is the active
controller they are handed to its event loop directly.

Imports kazoo (through the store and the controller): only a broker in cluster mode imports
this module.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from kio.schema.alter_partition.v2 import request as ap_request
from kio.schema.alter_partition.v2 import response as ap_response

from odradek.broker.config import BrokerConfig
from odradek.broker.inter_broker_client import InterBrokerClient, InterBrokerRequestError, Node
from odradek.broker.metadata_store import PartitionState
from odradek.broker.zk_metadata_store import ZkMetadataStore
from odradek.clock import Clock
from odradek.cluster.znodes import LOG_DIR_EVENT_NOTIFICATION
from odradek.controller.channel import ControllerChannelManager
from odradek.controller.context import ControllerConfig
from odradek.controller.controller import Controller
from odradek.controller.decisions import BrokerRequest
from odradek.protocol import inter_broker as ib
from odradek.protocol.errors import ErrorCode

__all__ = [
    "ControllerAlterPartitionManager",
    "ControllerUnavailableError",
    "ZkCluster",
]

log = logging.getLogger("odradek.broker")

T = TypeVar("T")
ALTER_PARTITION_PURPOSE = "alter-partition"
CONTROLLED_SHUTDOWN_PURPOSE = "controlled-shutdown"
LOG_DIR_EVENT_ATTEMPTS = 30
"""The purposes of this broker's connections to the active controller."""


class ControllerUnavailableError(Exception):
    """No controller is known, or it could not be reached."""


async def _await_future(fut: Future[T]) -> T:
    return await asyncio.wrap_future(fut)


class ZkCluster:
    """The controller, AlterPartition and controlled shutdown of one broker. See the module
    docstring."""

    def __init__(self, config: BrokerConfig, store: ZkMetadataStore, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.node_id = store.node_id
        from odradek.broker.endpoints import inter_broker_connection_factory

        self.client = InterBrokerClient(
            self.node_id,
            clock=clock,
            connection_factory=inter_broker_connection_factory(config, self.node_id),
        )
        self.channel: ControllerChannelManager | None = None
        self.controller: Controller | None = None
        self.alter_partition_manager = ControllerAlterPartitionManager(self)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()  # built by Broker.start, on the broker's loop

    # -- lifecycle ---------------------------------------------------------------------------

    def start_controller(self) -> None:
        """Start this broker's controller (after the broker registered: it may win at once)."""
        cfg = self.config
        self.channel = ControllerChannelManager(
            self.client,
            asyncio.get_running_loop(),
            self.node_id,
            on_response=self._on_controller_response,
            request_timeout_ms=cfg.controller_socket_timeout_ms,
        )
        self.controller = Controller(
            self.store.zk,
            self.node_id,
            self.channel,
            ControllerConfig(
                unclean_leader_election_enable=cfg.unclean_leader_election_enable,
                leader_imbalance_per_broker_percentage=cfg.leader_imbalance_per_broker_percentage,
            ),
            auto_leader_rebalance_enable=cfg.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds=float(
                cfg.leader_imbalance_check_interval_seconds
            ),
            clock=self.clock,
        )
        self.controller.start()

    async def stop(self) -> None:
        """Stop the controller (an active one resigns and frees ``/controller``), its channel,
        then close the inter-broker client."""
        loop = asyncio.get_running_loop()
        controller, self.controller = self.controller, None
        channel, self.channel = self.channel, None
        if controller is not None:
            await loop.run_in_executor(None, controller.stop)
        if channel is not None:
            await channel.close()
        for task in list(self._tasks):
            task.cancel()
        await self.client.close()

    def log_dir_failed(self, log_dir: Path, partitions: list[tuple[str, int]]) -> None:
        """A log dir of this broker went offline (on any thread): announce it to the
        controller through ZooKeeper, in a worker thread (kazoo blocks), retried while
        ZooKeeper is away (at most ``LOG_DIR_EVENT_ATTEMPTS`` times, 1 s apart)."""
        log.error("log dir %s is offline (%d partitions); telling the controller", log_dir, len(partitions))
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread's write (checkpoints, the cleaner) failed
            running = None
        if running is self._loop:
            self._start_propagation()
        else:
            self._loop.call_soon_threadsafe(self._start_propagation)

    def _start_propagation(self) -> None:
        task = self._loop.create_task(self._propagate_log_dir_event(self._loop))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _propagate_log_dir_event(self, loop: asyncio.AbstractEventLoop) -> None:
        zk = self.store.zk
        for attempt in range(LOG_DIR_EVENT_ATTEMPTS):
            try:
                name = await loop.run_in_executor(None, zk.propagate_log_dir_event, self.node_id)
            except Exception as exc:  # ZooKeeper away: try again
                log.warning("could not write the log dir event notification: %s", exc)
                if attempt + 1 < LOG_DIR_EVENT_ATTEMPTS:
                    await asyncio.sleep(1.0)
                continue
            log.info("wrote %s/%s", LOG_DIR_EVENT_NOTIFICATION, name)
            return

    def _on_controller_response(
        self, broker_id: int, request: BrokerRequest, response: Any
    ) -> None:
        controller = self.controller
        if isinstance(response, ib.LeaderAndIsrResponse) and controller is not None:
            controller.leader_and_isr_response(broker_id, response)
        code = getattr(response, "error_code", 0)
        if code:
            log.warning(
                "broker %d answered the controller's %s with error %s",
                broker_id,
                type(request).__name__,
                code,
            )

    @property
    def is_active_controller(self) -> bool:
        return self.controller is not None and self.controller.is_active

    # -- requests to the active controller -----------------------------------------------------

    def _controller_node(self) -> Node:
        cid = self.store.controller_id()
        info = self.store.broker(cid) if cid >= 0 else None
        if info is None:
            raise ControllerUnavailableError("no controller is known")
        return Node(cid, info.host, info.port)

    async def _to_controller(self, purpose: str, request: Any) -> Any:
        """``request`` answered by the active controller over the client (module docstring)."""
        try:
            return await self.client.send(
                self._controller_node(),
                purpose,
                request,
                timeout_ms=self.config.controller_socket_timeout_ms,
            )
        except InterBrokerRequestError as exc:
            raise ControllerUnavailableError(str(exc)) from exc

    async def alter_partition(
        self, request: ap_request.AlterPartitionRequest
    ) -> ap_response.AlterPartitionResponse:
        """A kio AlterPartitionRequest (v2) answered by the active controller."""
        controller = self.controller
        response: ap_response.AlterPartitionResponse
        if controller is not None and controller.is_active:
            response = await _await_future(controller.alter_partition_request(request))
        else:
            response = await self._to_controller(ALTER_PARTITION_PURPOSE, request)
        return response

    async def _controlled_shutdown_once(self) -> ib.ControlledShutdownResponse:
        epoch = self.store.broker_epoch
        controller = self.controller
        if controller is not None and controller.is_active:
            d = await _await_future(controller.controlled_shutdown(self.node_id, epoch))
            return ib.ControlledShutdownResponse(d.error_code, tuple(d.remaining_partitions))
        response: ib.ControlledShutdownResponse = await self._to_controller(
            CONTROLLED_SHUTDOWN_PURPOSE, ib.ControlledShutdownRequest(self.node_id, epoch)
        )
        return response

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership away; whether it answered that none is left.

        A controller that cannot be reached is waited for (a new one may be elected meanwhile)
        up to the backoff; partitions that no other live ISR member can take over end the
        attempts at once (Kafka would retry them in vain)."""
        store = self.store
        attempts = self.config.controlled_shutdown_max_retries + 1
        backoff_ms = self.config.controlled_shutdown_retry_backoff_ms
        for attempt in range(attempts):
            last = attempt + 1 == attempts
            controller_before = store.controller_id()
            try:
                resp = await self._controlled_shutdown_once()
            except ControllerUnavailableError as exc:
                log.warning("controlled shutdown: %s", exc)
                if not last:
                    await store.wait_until(
                        lambda before=controller_before: (
                            store.controller_id() != before  # type: ignore[misc]
                            or self.is_active_controller
                        ),
                        backoff_ms,
                    )
                continue
            if resp.error_code == 0 and not resp.remaining_partitions:
                log.info("controlled shutdown of broker %d succeeded", self.node_id)
                return True
            log.warning(
                "controlled shutdown: error %s, %d partitions still led here",
                resp.error_code,
                len(resp.remaining_partitions),
            )
            if resp.error_code == 0 and not self._can_move(resp.remaining_partitions):
                log.warning("controlled shutdown: no other live in-sync replica; stopping anyway")
                return False
            if not last:
                await asyncio.sleep(backoff_ms / 1000)
        return False

    def _can_move(self, partitions: tuple[tuple[str, int], ...]) -> bool:
        """Whether some partition has another live ISR member that could lead it."""
        live = {b.node_id for b in self.store.live_brokers()} - {self.node_id}
        for topic, p in partitions:
            state = self.store.partition(topic, p)
            if state is not None and live & set(state.isr):
                return True
        return False


class ControllerAlterPartitionManager:
    """``AlterPartitionManager`` (replica_manager.py): a leader's ISR change as AlterPartition to
    the active controller. Returns the partition's new state (its znode version as
    ``version``), or the error the controller answered (NOT_CONTROLLER when none is reachable)."""

    def __init__(self, cluster: ZkCluster) -> None:
        self.cluster = cluster

    async def submit(
        self,
        topic: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        new_isr: list[int],
        partition_epoch: int,
    ) -> PartitionState | ErrorCode:
        cluster = self.cluster
        request = ap_request.AlterPartitionRequest(
            broker_id=cluster.node_id,  # type: ignore[arg-type]
            broker_epoch=cluster.store.broker_epoch,  # type: ignore[arg-type]
            topics=(
                ap_request.TopicData(
                    topic_id=topic_id,
                    partitions=(
                        ap_request.PartitionData(
                            partition_index=partition,  # type: ignore[arg-type]
                            leader_epoch=leader_epoch,  # type: ignore[arg-type]
                            new_isr=tuple(new_isr),  # type: ignore[arg-type]
                            leader_recovery_state=0,  # type: ignore[arg-type]
                            partition_epoch=partition_epoch,  # type: ignore[arg-type]
                        ),
                    ),
                ),
            ),
        )
        try:
            response = await cluster.alter_partition(request)
        except ControllerUnavailableError as exc:
            log.info("AlterPartition for %s-%d: %s", topic, partition, exc)
            return ErrorCode.not_controller
        if response.error_code != ErrorCode.none:
            return ErrorCode(int(response.error_code))
        for t in response.topics:
            for p in t.partitions:
                if int(p.partition_index) != partition:
                    continue
                if p.error_code != ErrorCode.none:
                    return ErrorCode(int(p.error_code))
                known = cluster.store.partition(topic, partition)
                replicas = list(known.replicas) if known is not None else [int(b) for b in p.isr]
                return PartitionState(
                    partition,
                    int(p.leader_id),
                    int(p.leader_epoch),
                    replicas,
                    [int(b) for b in p.isr],
                    cluster.store.controller_epoch,
                    int(p.partition_epoch),
                )
        return ErrorCode.unknown_topic_or_partition
