"""The controller's single-threaded event loop over ZooKeeper (Kafka's ``KafkaController`` with
its ``ControllerEventManager``).

Every broker of a cluster runs a :class:`Controller`; the one that wins ``/controller`` is active.
All work happens in one thread, ``controller-event-thread``, one event at a time:

* ZooKeeper watch firings (``/controller``, ``/brokers/ids``, ``/brokers/topics`` and each topic's
  znode, ``/admin/delete_topics``, ``/isr_change_notification``, ``/log_dir_event_notification``,
  ``/admin/reassign_partitions``, ``/admin/preferred_replica_election``) only enqueue events; the
  event reads what it needs;
* requests from brokers (AlterPartition, ControlledShutdown) and admin (ElectLeaders, partition
  reassignment) are events too, answered through a ``concurrent.futures.Future``; so are the
  brokers' LeaderAndIsr answers (:meth:`Controller.leader_and_isr_response`): the partitions a
  broker answers KAFKA_STORAGE_ERROR for are on a failed log dir and go offline;
* a decision (``odradek.controller.decisions``) is applied by writing ZooKeeper (every write
  fenced by the controller epoch, partition states conditional on their version), then handing
  its requests to the :class:`ControllerChannel`. A state write that loses a race is re-read and
  the partition decided again (``on_partitions_refresh``).

Resignation: when ``/controller`` is deleted or names another broker, when a fenced write finds
another controller (``ControllerMovedError``), when an event starts, or a read or write finds,
the session disconnected (``NotConnectedError``, ``ConnectionLoss``: ZooKeeper away; kazoo
holds a read made while disconnected until ZooKeeper is back, so an event does not start
then) and when the ZooKeeper session expires (an event queued
as the expiry is seen, so it runs before any event of the new session). After a
replaced session, and when a disconnected session is connected again (however long ZooKeeper was
away: its timers restart with it), the controller tries to win the election again; in the same
session ``/controller`` is still its own, so it takes the controllership up again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Protocol

from kazoo.exceptions import BadVersionError, ConnectionLoss

from odradek.clock import Clock, SystemClock
from odradek.cluster.zk import KafkaZkClient
from odradek.cluster.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONTROLLER,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    BrokerInfo,
    ControllerMovedError,
    NotConnectedError,
    TopicPartition,
    UpdateCode,
    new_topic_id,
    topic_path,
)
from odradek.controller import decisions as dec
from odradek.controller.admin import (
    alter_partition_reassignments_response,
    elect_leaders_request_partitions,
    elect_leaders_response,
    list_partition_reassignments_response,
    reassignment_targets,
)
from odradek.controller.alter_partition import alter_partition_items, alter_partition_response
from odradek.controller.context import ControllerConfig, ControllerContext
from odradek.protocol.errors import ErrorCode
from odradek.protocol.inter_broker import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    UpdateMetadataRequest,
)

__all__ = ["Controller", "ControllerChannel", "RecordingChannel"]

log = logging.getLogger(__name__)

Outcome = tuple[ControllerContext, dec.Decision]


class ControllerChannel(Protocol):
    """Where the active controller's requests go (Kafka's ControllerChannelManager).

    ``update_brokers`` is called with every live broker before requests to new ones are sent;
    ``send`` must not block (queue the request per broker and send it in order).
    """

    def update_brokers(self, live: Mapping[int, BrokerInfo]) -> None: ...

    def send(self, broker_id: int, request: dec.BrokerRequest) -> None: ...


class RecordingChannel:
    """A channel that keeps what it was given (tests, dry runs)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, dec.BrokerRequest]] = []
        self.live: dict[int, BrokerInfo] = {}
        self.lock = threading.Lock()

    def update_brokers(self, live: Mapping[int, BrokerInfo]) -> None:
        with self.lock:
            self.live = dict(live)

    def send(self, broker_id: int, request: dec.BrokerRequest) -> None:
        with self.lock:
            self.sent.append((broker_id, request))

    def snapshot(self) -> list[tuple[int, dec.BrokerRequest]]:
        with self.lock:
            return list(self.sent)


class _Stop:
    pass


class Controller:
    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        channel: ControllerChannel,
        config: ControllerConfig | None = None,
        *,
        auto_leader_rebalance_enable: bool = True,
        leader_imbalance_check_interval_seconds: float = 300.0,
        clock: Clock | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.channel = channel
        self.config = config or ControllerConfig()
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.rebalance_interval = leader_imbalance_check_interval_seconds
        self.clock = clock or SystemClock()
        self._queue: queue.Queue[Callable[[], Any] | _Stop] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="controller-event-thread", daemon=True)
        self._ctx: ControllerContext | None = None
        self._watched_topics: set[str] = set()
        self._next_rebalance = 0.0
        self._watches_registered = False
        self._resigned_disconnected = False
        self.events_processed = 0

    # -- public

    @property
    def is_active(self) -> bool:
        return self._ctx is not None

    @property
    def context(self) -> ControllerContext | None:
        """The active controller's context (None when not active); an immutable snapshot."""
        return self._ctx

    def start(self) -> None:
        self._thread.start()
        self.zk.add_session_lost_callback(lambda: self._enqueue(self._session_expired))
        self.zk.add_new_session_callback(lambda: self._enqueue(self._reelect))
        self.zk.add_reconnect_callback(lambda: self._enqueue(self._reelect_if_resigned))
        self._enqueue(self._startup)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the event thread; an active controller resigns and frees ``/controller``."""
        self._queue.put(_Stop())
        self._thread.join(timeout)

    def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[dec.AlterPartitionItem]
    ) -> Future[dec.Decision]:
        return self._call(lambda ctx: dec.on_alter_partition(ctx, broker_id, broker_epoch, items))

    def alter_partition_request(self, request: Any) -> Future[Any]:
        """A kio AlterPartitionRequest (v2/v3) -> a Future of its kio AlterPartitionResponse
        (NOT_CONTROLLER when this controller is not active)."""
        fut: Future[Any] = Future()
        seen: list[ControllerContext] = []

        def decide(ctx: ControllerContext) -> Outcome:
            seen.append(ctx)
            return dec.on_alter_partition(ctx, int(request.broker_id), int(request.broker_epoch),
                                          alter_partition_items(ctx, request))

        def done(f: Future[dec.Decision]) -> None:
            if f.exception() is not None:
                fut.set_exception(f.exception())
                return
            ctx = seen[0] if seen else ControllerContext(self.broker_id, -1, -1)
            fut.set_result(alter_partition_response(ctx, request, f.result()))

        self._call(decide).add_done_callback(done)
        return fut

    def _call_kio(self, decide: Callable[[ControllerContext], Outcome],
                  respond: Callable[[dec.Decision], Any]) -> Future[Any]:
        fut: Future[Any] = Future()

        def done(f: Future[dec.Decision]) -> None:
            exc = f.exception()
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(respond(f.result()))

        self._call(decide).add_done_callback(done)
        return fut

    def elect_leaders_request(self, request: Any) -> Future[Any]:
        """A kio ElectLeadersRequest (v1/v2) -> a Future of its kio response."""
        asked: list[TopicPartition] = []

        def decide(ctx: ControllerContext) -> Outcome:
            election_type, partitions = elect_leaders_request_partitions(ctx, request)
            asked.extend(partitions)
            return dec.on_elect_leaders(ctx, election_type, partitions)

        return self._call_kio(decide, lambda d: elect_leaders_response(request, asked, d))

    def alter_partition_reassignments_request(self, request: Any) -> Future[Any]:
        """A kio AlterPartitionReassignmentsRequest (v0) -> a Future of its kio response."""
        targets = reassignment_targets(request)
        return self._call_kio(lambda ctx: dec.on_partition_reassignment(ctx, targets),
                              lambda d: alter_partition_reassignments_response(request, d))

    def list_partition_reassignments_request(self, request: Any) -> Future[Any]:
        """A kio ListPartitionReassignmentsRequest (v0) -> a Future of its kio response."""
        return self.run_in_loop(lambda: list_partition_reassignments_response(self._ctx, request))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> Future[dec.Decision]:
        return self._call(lambda ctx: dec.on_controlled_shutdown(ctx, broker_id, broker_epoch))

    def elect_leaders(self, election_type: dec.ElectionType, partitions: Sequence[TopicPartition]) -> Future[dec.Decision]:
        return self._call(lambda ctx: dec.on_elect_leaders(ctx, election_type, partitions))

    def reassign_partitions(self, targets: Mapping[TopicPartition, Sequence[int] | None]) -> Future[dec.Decision]:
        return self._call(lambda ctx: dec.on_partition_reassignment(ctx, targets))

    def leader_and_isr_response(self, broker_id: int, response: LeaderAndIsrResponse) -> None:
        """A broker's answer to a LeaderAndIsr of this controller (any thread): the partitions it
        answered KAFKA_STORAGE_ERROR for are on a failed log dir (Kafka's
        LeaderAndIsrResponseReceived)."""
        storage = ErrorCode.kafka_storage_error.value
        offline = [(e.topic_name, e.partition_index) for e in response.partition_errors if e.error_code == storage]
        if response.error_code or not offline:
            return
        self._enqueue_if_active(lambda: self._process(lambda ctx: dec.on_replicas_offline(ctx, broker_id, offline)))

    def run_in_loop(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` in the event thread after the events queued before it (tests: a barrier)."""
        fut: Future[Any] = Future()

        def event() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)

        self._enqueue(event)
        return fut

    # -- the loop

    def _enqueue(self, event: Callable[[], Any]) -> None:
        self._queue.put(event)

    def _call(self, decide: Callable[[ControllerContext], Outcome]) -> Future[dec.Decision]:
        """An event answered through a future; NOT_CONTROLLER (41) when this controller is not active."""
        fut: Future[dec.Decision] = Future()

        def event() -> None:
            if self._ctx is None:
                fut.set_result(dec.Decision(error_code=41))
                return
            try:
                fut.set_result(self._process(decide))
            except BaseException as e:
                fut.set_exception(e)
                raise

        self._enqueue(event)
        return fut

    def _run(self) -> None:
        while True:
            timeout = None
            if self._ctx is not None and self.auto_leader_rebalance_enable:
                timeout = max(0.0, self._next_rebalance - self.clock.monotonic())
            try:
                event = self._queue.get(timeout=timeout)
            except queue.Empty:
                event = self._auto_leader_rebalance
            if isinstance(event, _Stop):
                self._resign(delete_znode=True)
                return
            try:
                if self._ctx is not None and not self.zk.wait_writable(0):
                    # ZooKeeper is away: reads would wait in kazoo's queue until it is back, and
                    # writes would fail; resign now and answer the event as a non-controller
                    self._resign_disconnected(NotConnectedError("ZooKeeper session is not connected"))
                event()
            except ControllerMovedError as e:
                log.warning("controller %d resigns: %s", self.broker_id, e)
                self._resign(delete_znode=False)
            except (NotConnectedError, ConnectionLoss) as e:
                self._resign_disconnected(e)
            except Exception:
                log.exception("controller event failed")
            self.events_processed += 1

    def _resign_disconnected(self, reason: Exception) -> None:
        """Resign because ZooKeeper is away; the reconnect callback re-elects (it may have fired already)."""
        if self._ctx is not None:
            log.warning("controller %d resigns: %s", self.broker_id, str(reason) or type(reason).__name__)
            self._resign(delete_znode=False)
        self._resigned_disconnected = True
        if self.zk.wait_writable(0):
            self._enqueue(self._reelect_if_resigned)

    def _session_expired(self) -> None:
        """The session expired (Kafka's Expire event): resign before anything of the new session
        is processed. Its ``/controller`` is gone, so a context kept until the re-election would
        decide on what the new session's watches report (brokers not yet registered again look
        dead) with an epoch that no election renewed."""
        if self._ctx is not None:
            log.info("controller %d resigns: its ZooKeeper session expired", self.broker_id)
            self._resign(delete_znode=False)

    def _reelect_if_resigned(self) -> None:
        """After a reconnect: re-elect if a write resigned while ZooKeeper was away (the flag
        stays set when this fails, for the next reconnect)."""
        if self._resigned_disconnected:
            self._reelect()
            self._resigned_disconnected = False

    # -- election

    def _startup(self) -> None:
        self.zk.watch_data(CONTROLLER, lambda data, stat: self._enqueue(self._controller_change))
        self._elect()

    def _controller_change(self) -> None:
        current = self.zk.get_controller_id()
        if current is None:
            self._reelect()
        elif current != self.broker_id and self._ctx is not None:
            log.info("controller %d: /controller now names %d, resigning", self.broker_id, current)
            self._resign(delete_znode=False)

    def _reelect(self) -> None:
        if self._ctx is not None and not self._still_ours():
            self._resign(delete_znode=False)
        if self._ctx is None:
            self._elect()

    def _still_ours(self) -> bool:
        return (
            self.zk.get_controller_id() == self.broker_id
            and self.zk.get_controller_owner_session() == self.zk.session_id
            and self._ctx is not None
            and self.zk.get_controller_epoch() == (self._ctx.epoch, self._ctx.epoch_zk_version)
        )

    def _elect(self) -> None:
        current = self.zk.get_controller_id()
        if current is not None:
            if current == self.broker_id and self.zk.get_controller_owner_session() == self.zk.session_id:
                got = self.zk.get_controller_epoch()
                assert got is not None
                epoch, version = got  # still ours from this ZooKeeper session: take it up again
            else:
                return
        else:
            try:
                epoch, version = self.zk.register_controller_and_increment_controller_epoch(self.broker_id)
            except ControllerMovedError:
                return
        log.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        self._on_controller_failover(epoch, version)

    def _resign(self, *, delete_znode: bool) -> None:
        ctx, self._ctx = self._ctx, None
        if ctx is not None and delete_znode:
            try:
                self.zk.delete_controller(ctx.epoch_zk_version)
            except Exception:
                log.warning("could not delete /controller on resignation", exc_info=True)

    def _load_context(self, epoch: int, version: int) -> ControllerContext:
        zk = self.zk
        live = {b.id: b for b in zk.get_all_brokers_in_cluster()}
        topics = zk.get_all_topics_in_cluster()
        assignments = zk.get_replica_assignment_for_topics(topics)
        tps = [(t, p) for t, a in assignments.items() for p in a.partitions]
        return ControllerContext(
            controller_id=self.broker_id,
            epoch=epoch,
            epoch_zk_version=version,
            config=self.config,
            live_brokers=live,
            assignments=assignments,
            states=zk.get_topic_partition_states(tps),
            topic_configs={t: zk.get_topic_config(t) for t in assignments},
            topics_to_be_deleted=frozenset(zk.get_topic_deletions()),
            reassignments=dict(zk.get_partition_reassignment()),
        )

    def _ensure_topic_ids(self, topics: list[str], epoch_zk_version: int) -> None:
        """Give topics created without a topic id one (KIP-516), conditional on the assignment's version."""
        for topic in topics:
            for _ in range(3):
                got = self.zk.get_topic_assignment(topic)
                if got is None or got[0].topic_id:
                    break
                try:
                    self.zk.set_topic_assignment(topic, replace(got[0], topic_id=new_topic_id()), epoch_zk_version,
                                                 expected_version=got[1])
                    break
                except BadVersionError:
                    continue

    def _on_controller_failover(self, epoch: int, version: int) -> None:
        self._ensure_topic_ids(self.zk.get_all_topics_in_cluster(), version)
        self._ctx = self._load_context(epoch, version)
        self.channel.update_brokers(self._ctx.live_brokers)
        self._next_rebalance = self.clock.monotonic() + self.rebalance_interval
        self._process(dec.on_controller_failover)
        self._log_dir_event()  # notifications written while no controller was active
        for topic in self._ctx.assignments:
            self._watch_topic(topic)
        if self._watches_registered:
            return
        self._watches_registered = True
        zk = self.zk
        zk.watch_children(BROKER_IDS, lambda _c: self._enqueue_if_active(self._broker_change))
        zk.watch_children(BROKER_TOPICS, lambda _c: self._enqueue_if_active(self._topic_change))
        zk.watch_children(DELETE_TOPICS, lambda _c: self._enqueue_if_active(self._topic_deletion))
        zk.watch_children(ISR_CHANGE_NOTIFICATION, lambda _c: self._enqueue_if_active(self._isr_change))
        zk.watch_children(LOG_DIR_EVENT_NOTIFICATION, lambda _c: self._enqueue_if_active(self._log_dir_event))
        zk.watch_data(REASSIGN_PARTITIONS, lambda _d, _s: self._enqueue_if_active(self._reassignment))
        zk.watch_data(PREFERRED_REPLICA_ELECTION, lambda _d, _s: self._enqueue_if_active(self._preferred_election))

    def _enqueue_if_active(self, event: Callable[[], Any]) -> bool | None:
        # kazoo stops a watch whose callback returns False: keep watching while this object runs.
        if self._thread.is_alive():
            self._enqueue(lambda: event() if self._ctx is not None else None)
            return None
        return False

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def changed(data: bytes | None, _stat: Any) -> bool | None:
            if data is None:
                self._watched_topics.discard(topic)
                return False
            return self._enqueue_if_active(lambda: self._partition_modifications(topic))

        self.zk.watch_data(topic_path(topic), changed)

    # -- applying decisions

    def _process(self, decide: Callable[[ControllerContext], Outcome]) -> dec.Decision:
        assert self._ctx is not None
        ctx, d = decide(self._ctx)
        lost = self._write(d)
        if lost:
            # another writer moved these partitions: re-read, then decide them again
            reread = self.zk.get_topic_partition_states(lost)
            d.requests = [(b, _without(r, lost)) for b, r in d.requests]
            self._ctx = ctx
            self._send(d)
            ctx, d2 = dec.on_partitions_refresh(ctx, reread)
            self._write(d2)
            self._ctx = ctx
            self._send(d2)
            return d
        self._ctx = ctx
        self._send(d)
        return d

    def _write(self, d: dec.Decision) -> set[TopicPartition]:
        """Apply the decision's ZooKeeper writes in order; the partitions whose write lost a race."""
        assert self._ctx is not None
        v = self._ctx.epoch_zk_version
        zk = self.zk
        lost: set[TopicPartition] = set()
        if d.create_states:
            for tp, r in zk.create_topic_partition_states(d.create_states, v).items():
                if isinstance(r, UpdateCode):
                    lost.add(tp)
        if d.update_states:
            res = zk.update_leader_and_isr(d.update_states, v)
            lost |= res.bad_version | res.no_node
        for topic, a in d.set_assignments.items():
            zk.set_topic_assignment(topic, a, v)
        for topic in d.delete_topics:
            zk.delete_topic_znodes(topic, v)
            self._watched_topics.discard(topic)
        if d.reassignment_znode is not None:
            zk.set_partition_reassignment(d.reassignment_znode, v)
        if d.delete_preferred_replica_election:
            zk.delete_preferred_replica_election(v)
        return lost

    def _send(self, d: dec.Decision) -> None:
        for broker_id, request in d.requests:
            self.channel.send(broker_id, request)

    # -- events from watches

    def _broker_change(self) -> None:
        live = {b.id: b for b in self.zk.get_all_brokers_in_cluster()}
        self.channel.update_brokers(live)
        self._process(lambda ctx: dec.on_broker_change(ctx, live))

    def _topic_change(self) -> None:
        assert self._ctx is not None
        new = [t for t in self.zk.get_all_topics_in_cluster() if t not in self._ctx.assignments]
        if not new:
            return
        self._ensure_topic_ids(new, self._ctx.epoch_zk_version)
        assignments = self.zk.get_replica_assignment_for_topics(new)
        configs = {t: self.zk.get_topic_config(t) for t in assignments}
        self._process(lambda ctx: dec.on_topic_change(ctx, assignments, configs))
        for t in assignments:
            self._watch_topic(t)

    def _partition_modifications(self, topic: str) -> None:
        assert self._ctx is not None
        got = self.zk.get_topic_assignment(topic)
        known = self._ctx.assignments.get(topic)
        if got is None or known is None:
            return
        added = {p: r for p, r in got[0].partitions.items() if p not in known.partitions}
        if not added:  # the controller's own writes (reassignment) come back here too
            return
        merged = replace(known, partitions={**known.partitions, **added})
        self._process(lambda ctx: dec.on_topic_change(ctx, {topic: merged}))

    def _topic_deletion(self) -> None:
        topics = self.zk.get_topic_deletions()
        if topics:
            self._process(lambda ctx: dec.on_topic_deletion(ctx, topics))

    def _isr_change(self) -> None:
        assert self._ctx is not None
        names = self.zk.get_all_isr_change_notifications()
        if not names:
            return
        tps = self.zk.get_partitions_from_isr_change_notifications(names)
        states = self.zk.get_topic_partition_states(tps)
        self._process(lambda ctx: dec.on_isr_change_notification(ctx, states))
        self.zk.delete_isr_change_notifications(names, self._ctx.epoch_zk_version)

    def _log_dir_event(self) -> None:
        """``/log_dir_event_notification`` children (Kafka's LogDirEventNotification): the
        brokers named get a LeaderAndIsr for all their replicas; the notifications are deleted."""
        assert self._ctx is not None
        names = self.zk.get_all_log_dir_event_notifications()
        if not names:
            return
        brokers = self.zk.get_broker_ids_from_log_dir_events(names)
        log.info("log dir failure on brokers %s", sorted(set(brokers)))
        self._process(lambda ctx: dec.on_broker_log_dir_failure(ctx, brokers))
        self.zk.delete_log_dir_event_notifications(names, self._ctx.epoch_zk_version)

    def _reassignment(self) -> None:
        assert self._ctx is not None
        wanted = self.zk.get_partition_reassignment()
        targets: dict[TopicPartition, Sequence[int] | None] = {
            tp: t for tp, t in wanted.items() if self._ctx.reassignments.get(tp) != tuple(t)
        }
        if targets:
            self._process(lambda ctx: dec.on_partition_reassignment(ctx, targets))

    def _preferred_election(self) -> None:
        tps = self.zk.get_preferred_replica_election()
        if tps or self.zk.exists(PREFERRED_REPLICA_ELECTION):
            self._process(lambda ctx: dec.on_elect_leaders(ctx, dec.ElectionType.PREFERRED, sorted(tps),
                                                          from_znode=True))

    def _auto_leader_rebalance(self) -> None:
        self._next_rebalance = self.clock.monotonic() + self.rebalance_interval
        if self._ctx is not None:
            self._process(dec.on_auto_leader_rebalance)


def _without(request: dec.BrokerRequest, lost: set[TopicPartition]) -> dec.BrokerRequest:
    """The request minus the partitions whose write lost a race (they are decided again)."""
    if isinstance(request, LeaderAndIsrRequest | UpdateMetadataRequest):
        kept = tuple(s for s in request.partition_states if (s.topic_name, s.partition_index) not in lost)
        return replace(request, partition_states=kept)  # type: ignore[arg-type]
    return request

