"""Kafka's ZooKeeper layout and JSON formats over kazoo (Kafka's ``KafkaZkClient`` / ``ZkData``).

Znodes (paths relative to the chroot of ``zookeeper.connect``, e.g. ``127.0.0.1:2181/kafka``):

* ``/brokers/ids/<id>``, ephemeral: ``{"version":5,"host","port","endpoints":["<L>://h:p",...],
  "listener_security_protocol_map":{"<L>":"<protocol>",...},"jmx_port":-1,"timestamp":"<ms>",
  "features":{}[,"rack"]}``, one endpoint per advertised listener, ``host``/``port`` those of
  the first PLAINTEXT one (null/-1 without); its creation zxid (czxid) is the broker epoch (KIP-380).
* ``/controller``, ephemeral: ``{"version":1,"brokerid":N,"timestamp":"<ms>"}``;
  ``/controller_epoch``: the integer as text. Election is ONE multi-op (create ``/controller`` +
  set ``/controller_epoch`` at the version read), and every controller write is a multi-op that
  first checks the ``/controller_epoch`` version this controller was elected with, so a deposed
  controller cannot write (:class:`ControllerMovedError`).
* ``/brokers/topics/<t>``: ``{"version":2|3,"partitions":{"0":[1,2,3]},"adding_replicas":{},
  "removing_replicas":{}[,"topic_id":"<base64 uuid>"]}``; list order is preference, the head is
  the preferred leader.
* ``/brokers/topics/<t>/partitions/<p>/state``: ``{"version":1,"leader":id|-1,"leader_epoch":n,
  "isr":[...],"controller_epoch":n}``; every write is conditional on its znode version
  (:meth:`KafkaZkClient.update_leader_and_isr` reports BADVERSION as a typed result).
* ``/config/<type>/<name>`` (``topics/<t>``, ``brokers/<id>``, ``brokers/<default>``...):
  ``{"version":1,"config":{...}}``, each change announced by a persistent sequential
  ``/config/changes/config_change_N`` = ``{"version":2,"entity_path":"<type>/<name>"}``.
* ``/admin/delete_topics/<t>`` (empty), ``/admin/reassign_partitions`` =
  ``{"version":1,"partitions":[{"topic","partition","replicas"}]}``,
  ``/admin/preferred_replica_election`` = ``{"version":1,"partitions":[{"topic","partition"}]}``,
  ``/isr_change_notification/isr_change_N`` = ``{"version":1,"partitions":[{"topic","partition"}]}``,
  ``/log_dir_event_notification/log_dir_event_N`` = ``{"version":1,"broker":id,"event":1}`` (a failed log dir),
  ``/cluster/id`` = ``{"version":"1","id":"<22 chars>"}``,
  ``/latest_producer_id_block`` = ``{"version":1,"broker":id,"block_start":"n","block_end":"m"}``.

Session state: on SUSPENDED writes are refused (:class:`NotConnectedError`) until the session
is back; then ``reconnect`` callbacks run (the same session: ephemeral znodes and watches are
kept). On LOST the broker registration is re-created in the new session (new broker epoch)
and ``new_session`` callbacks run (the controller resigns and re-elects there).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from odradek.cluster.znodes import (
    BROKER_IDS,
    BROKER_TOPICS,
    CLUSTER_ID,
    CONFIG,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    INITIAL_CONTROLLER_EPOCH,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    LOG_DIR_FAILURE_EVENT,
    PERSISTENT_PATHS,
    PREFERRED_REPLICA_ELECTION,
    PRODUCER_ID_BLOCK_SIZE,
    REASSIGN_PARTITIONS,
    BrokerInfo,
    ControllerMovedError,
    LeaderAndIsr,
    NotConnectedError,
    ProducerIdBlock,
    TopicAssignment,
    TopicPartition,
    UpdateCode,
    UpdateLeaderAndIsrResult,
    new_topic_id,
    now_ms,
    parse_connect,
    partition_state_path,
    path_json,
    topic_path,
)

__all__ = ["ChildrenWatch", "KafkaZkClient"]

log = logging.getLogger(__name__)


def _op(kind: str, path: str, state: LeaderAndIsr) -> Callable[[Any], None]:
    """A transaction step writing ``state`` at ``path`` (create, or set at its zk_version)."""

    def op(tx: Any) -> None:
        if kind == "create":
            tx.create(path, state.to_json())
        else:
            tx.set_data(path, state.to_json(), state.zk_version)

    return op


# ---------------------------------------------------------------------------- client


def _patient_retry() -> KazooRetry:
    """Retry until ZooKeeper answers, at most a second apart (kazoo's default backs off to a
    minute: a session would not survive a ZooKeeper restart shorter than its timeout)."""
    return KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_jitter=0.1, max_delay=1.0)


class ChildrenWatch:
    """``callback(children)`` of ``path`` now, after every change of them, and after every
    reconnection, each read setting the next watch (as Kafka's handlers re-read with a watch).

    Unlike kazoo's ``ChildrenWatch``, it calls back after a reconnection even when the children
    it reads have the same names as before: a child deleted and created again meanwhile keeps
    its name (a broker whose session expired registers again with the same id and a new
    epoch), and only the callback's own reads can tell. Callbacks must therefore be
    idempotent (the controller's handlers re-read what they need and compare). A read runs in
    a kazoo worker thread and is retried, at most a second apart, until ZooKeeper answers;
    ``callback`` returning False stops the watch. A path that does not exist calls back with no children, and
    again once it is created.
    """

    def __init__(self, zk: KazooClient, path: str, callback: Callable[[list[str]], Any]) -> None:
        self._zk = zk
        self._path = path
        self._callback = callback
        self._lock = threading.Lock()
        self._stopped = False
        self._disconnected = False
        zk.add_listener(self._on_state)
        self._read()

    def _on_state(self, state: str) -> None:
        # kazoo's event thread: never block here. kazoo drops every watch when the connection
        # drops (it does not set them again on reconnecting), so each reconnection reads again.
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._disconnected = True
        elif state == KazooState.CONNECTED and self._disconnected:
            self._disconnected = False
            self._zk.handler.spawn(self._read)

    def _fired(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:  # NONE: a session state, which _on_state handles
            self._zk.handler.spawn(self._read)

    def _read(self) -> None:
        with self._lock:
            if self._stopped:
                return
            try:
                children = _patient_retry()(self._children)
            except ConnectionClosedError:  # the client was stopped
                return
            if self._callback(children) is False:
                self._stopped = True
                self._zk.remove_listener(self._on_state)

    def _children(self) -> list[str]:
        try:
            return list(self._zk.get_children(self._path, watch=self._fired))
        except NoNodeError:
            # watch for its creation; created meanwhile: read again
            if self._zk.exists(self._path, watch=self._fired) is not None:
                return self._children()
            return []


class KafkaZkClient:
    """A broker's (and its controller's) view of ZooKeeper in Kafka's layout (module docstring).

    Methods that a controller calls take the controller epoch znode version it was elected with
    (``epoch_zk_version``) and raise :class:`ControllerMovedError` when it no longer matches.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        inter_broker_listener: str | None = None,
    ) -> None:
        hosts, self.chroot = parse_connect(connect)
        self.inter_broker_listener = inter_broker_listener
        """The listener whose endpoint ``get_broker`` reads as a broker's address (None: the
        first endpoint of each registration)."""
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.zk = KazooClient(
            hosts=hosts, timeout=session_timeout_ms / 1000, connection_retry=_patient_retry()
        )
        self._writable = threading.Event()
        self._session_lost = False
        self._registration: BrokerInfo | None = None
        self.broker_epoch = -1
        self._session_lost_callbacks: list[Callable[[], None]] = []
        self._new_session_callbacks: list[Callable[[], None]] = []
        self._reconnect_callbacks: list[Callable[[], None]] = []
        self.zk.add_listener(self._on_state)

    # -- lifecycle and session state

    def start(self) -> None:
        """Connect (within ``zookeeper.connection.timeout.ms``), create the chroot and Kafka's paths."""
        self.zk.start(timeout=self.connection_timeout_ms / 1000)
        if self.chroot:
            self.zk.ensure_path(self.chroot)
            self.zk.chroot = self.chroot
        for path in PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        self._writable.set()

    def close(self) -> None:
        self._writable.clear()
        self.zk.stop()
        self.zk.close()

    @property
    def session_id(self) -> int | None:
        sid = self.zk.client_id
        return sid[0] if sid else None

    def add_session_lost_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (in kazoo's event thread: it must not block) when the session
        expired, before a new one is connected and before anything is registered in it."""
        self._session_lost_callbacks.append(callback)

    def add_new_session_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (in a kazoo worker thread) after a LOST session was replaced."""
        self._new_session_callbacks.append(callback)

    def add_reconnect_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (in kazoo's event thread: it must not block) each time the session
        is connected again after SUSPENDED, still the same session (writes work again)."""
        self._reconnect_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        # Runs in kazoo's event thread: never block here.
        if state == KazooState.SUSPENDED:
            self._writable.clear()
        elif state == KazooState.LOST:
            self._writable.clear()
            self._session_lost = True
            for callback in self._session_lost_callbacks:
                try:
                    callback()
                except Exception:
                    log.exception("session-lost callback failed")
        elif state == KazooState.CONNECTED:
            if self._session_lost:
                self._session_lost = False
                self.zk.handler.spawn(self._after_new_session)
            else:
                self._writable.set()
                for callback in self._reconnect_callbacks:
                    try:
                        callback()
                    except Exception:
                        log.exception("reconnect callback failed")

    def _after_new_session(self) -> None:
        try:
            if self._registration is not None:
                self.broker_epoch = self._create_broker_znode(self._registration)
                log.info("re-registered broker %d with epoch %d", self._registration.id, self.broker_epoch)
        except Exception:  # the session may be gone again; the next CONNECTED retries
            log.exception("re-registering the broker failed")
            self._session_lost = True
            return
        self._writable.set()
        for callback in self._new_session_callbacks:
            try:
                callback()
            except Exception:
                log.exception("new-session callback failed")

    def _check_writable(self) -> None:
        if not self._writable.is_set():
            raise NotConnectedError("ZooKeeper session is not connected")

    def wait_writable(self, timeout: float) -> bool:
        return self._writable.wait(timeout)

    # -- fenced multi-ops

    def _fenced_commit(self, epoch_zk_version: int, ops: Callable[[Any], None]) -> list[Any]:
        """Run ``ops(transaction)`` after a check of ``/controller_epoch`` at ``epoch_zk_version``."""
        self._check_writable()
        tx = self.zk.transaction()
        tx.check(CONTROLLER_EPOCH, epoch_zk_version)
        ops(tx)
        results = tx.commit()
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(f"controller epoch znode version is no longer {epoch_zk_version}")
        return list(results[1:])

    @staticmethod
    def _raise_first(results: Iterable[Any]) -> None:
        for r in results:
            if isinstance(r, Exception) and type(r).__name__ != "RolledBackError":
                raise r

    # -- brokers

    def register_broker(self, info: BrokerInfo) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral); the broker epoch (czxid). Kept across sessions."""
        self._check_writable()
        self._registration = info
        self.broker_epoch = self._create_broker_znode(info)
        return self.broker_epoch

    def _create_broker_znode(self, info: BrokerInfo) -> int:
        path = f"{BROKER_IDS}/{info.id}"
        try:
            self.zk.create(path, info.to_json(), ephemeral=True, makepath=True)
        except NodeExistsError:
            # Ours from this very session (a retried create) is fine; anyone else's is a conflict.
            try:
                _, stat = self.zk.get(path)
            except NoNodeError:  # the other session's znode went away meanwhile: try again
                return self._create_broker_znode(info)
            if stat.ephemeralOwner != self.session_id:
                raise
        _, stat = self.zk.get(path)
        return int(stat.czxid)

    def get_all_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children(BROKER_IDS))

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, stat = self.zk.get(f"{BROKER_IDS}/{broker_id}")
        except NoNodeError:
            return None
        return BrokerInfo.from_json(
            broker_id, data, int(stat.czxid), self.inter_broker_listener
        )

    def get_all_brokers_in_cluster(self) -> list[BrokerInfo]:
        brokers = (self.get_broker(b) for b in self.get_all_broker_ids())
        return [b for b in brokers if b is not None]

    # -- controller election

    def get_controller_id(self) -> int | None:
        try:
            data, _ = self.zk.get(CONTROLLER)
        except NoNodeError:
            return None
        return int(json.loads(data)["brokerid"])

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, znode version of ``/controller_epoch``), or None if never written."""
        try:
            data, stat = self.zk.get(CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return int(data), int(stat.version)

    def register_controller_and_increment_controller_epoch(self, controller_id: int) -> tuple[int, int]:
        """Try to become controller: ONE multi of create ``/controller`` and epoch+1.

        Returns (new controller epoch, its znode version); raises ControllerMovedError when another
        controller holds ``/controller`` or the epoch moved under us.
        """
        self._check_writable()
        current = self.get_controller_epoch()
        if current is None:
            try:
                self.zk.create(CONTROLLER_EPOCH, str(INITIAL_CONTROLLER_EPOCH).encode())
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        new_epoch = epoch + 1
        tx = self.zk.transaction()
        tx.create(CONTROLLER, path_json({"version": 1, "brokerid": controller_id, "timestamp": now_ms()}),
                  ephemeral=True)
        tx.set_data(CONTROLLER_EPOCH, str(new_epoch).encode(), version)
        results = tx.commit()
        if isinstance(results[0], NodeExistsError):
            raise ControllerMovedError(f"/controller is held by broker {self.get_controller_id()}")
        if isinstance(results[1], BadVersionError):
            raise ControllerMovedError("controller epoch changed during the election")
        self._raise_first(results)
        stat: ZnodeStat = results[1]
        return new_epoch, int(stat.version)

    def delete_controller(self, epoch_zk_version: int) -> None:
        """Resign: delete ``/controller`` (fenced; nothing to do if already gone)."""
        try:
            self._fenced_commit(epoch_zk_version, lambda tx: tx.delete(CONTROLLER))
        except ControllerMovedError:
            pass

    # -- topics and partition state

    def get_all_topics_in_cluster(self) -> list[str]:
        return sorted(self.zk.get_children(BROKER_TOPICS))

    def create_topic_assignment(
        self, topic: str, assignment: TopicAssignment, config: Mapping[str, str] | None = None
    ) -> None:
        """Admin create (not fenced, like Kafka's AdminZkClient): config first, then assignment."""
        self._check_writable()
        self.set_or_create_topic_config(topic, config or {})
        self.zk.create(topic_path(topic), assignment.to_json())

    def get_topic_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """(assignment, znode version) or None."""
        try:
            data, stat = self.zk.get(topic_path(topic))
        except NoNodeError:
            return None
        return TopicAssignment.from_json(data), int(stat.version)

    def get_replica_assignment_for_topics(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        out = {}
        for t in topics:
            got = self.get_topic_assignment(t)
            if got is not None:
                out[t] = got[0]
        return out

    def set_topic_assignment(
        self, topic: str, assignment: TopicAssignment, epoch_zk_version: int, expected_version: int = -1
    ) -> int:
        """Controller write of an assignment (reassignment, new partitions); the new znode version."""
        results = self._fenced_commit(
            epoch_zk_version, lambda tx: tx.set_data(topic_path(topic), assignment.to_json(), expected_version)
        )
        self._raise_first(results)
        return int(results[0].version)

    def set_topic_assignment_unfenced(self, topic: str, assignment: TopicAssignment, expected_version: int) -> int:
        """Admin write (CreatePartitions): conditional on the assignment's znode version."""
        self._check_writable()
        stat = self.zk.set(topic_path(topic), assignment.to_json(), expected_version)
        return int(stat.version)

    def get_topic_partition_states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
        out = {}
        for t, p in partitions:
            try:
                data, stat = self.zk.get(partition_state_path(t, p))
            except NoNodeError:
                continue
            out[(t, p)] = LeaderAndIsr.from_json(data, int(stat.version))
        return out

    def create_topic_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | UpdateCode]:
        """Create new partitions' state znodes (fenced). Per partition: the state with zk_version 0,
        or BADVERSION when the znode already exists (someone else created it), NONODE when the
        topic's znode is gone."""
        out: dict[TopicPartition, LeaderAndIsr | UpdateCode] = {}
        for (t, p), s in states.items():
            base = f"{BROKER_TOPICS}/{t}/partitions"
            for path in (base, f"{base}/{p}"):
                try:
                    self.zk.create(path)
                except NodeExistsError:
                    pass
            results = self._fenced_commit(epoch_zk_version, _op("create", partition_state_path(t, p), s))
            if isinstance(results[0], NodeExistsError):
                out[(t, p)] = UpdateCode.BADVERSION
            elif isinstance(results[0], NoNodeError):
                out[(t, p)] = UpdateCode.NONODE
            else:
                self._raise_first(results)
                out[(t, p)] = LeaderAndIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch, 0)
        return out

    def update_leader_and_isr(
        self, states: Mapping[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """Write each state conditional on its ``zk_version`` (fenced by the controller epoch)."""
        result = UpdateLeaderAndIsrResult({}, set(), set())
        for (t, p), s in states.items():
            results = self._fenced_commit(epoch_zk_version, _op("set", partition_state_path(t, p), s))
            r = results[0]
            if isinstance(r, BadVersionError):
                result.bad_version.add((t, p))
            elif isinstance(r, NoNodeError):
                result.no_node.add((t, p))
            else:
                self._raise_first(results)
                result.finished[(t, p)] = LeaderAndIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch,
                                                       int(r.version))
        return result

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Remove the topic's assignment, partition states, config and deletion mark (fenced)."""
        paths: list[str] = []

        def walk(path: str) -> None:
            try:
                children = self.zk.get_children(path)
            except NoNodeError:
                return
            for c in children:
                walk(f"{path}/{c}")
            paths.append(path)

        walk(topic_path(topic))
        walk(f"{CONFIG_TOPICS}/{topic}")
        walk(f"{DELETE_TOPICS}/{topic}")

        def ops(tx: Any) -> None:
            for path in paths:
                tx.delete(path)

        results = self._fenced_commit(epoch_zk_version, ops)
        for r in results:
            if isinstance(r, NotEmptyError):  # a partition created meanwhile: the caller retries
                raise r
        self._raise_first(r for r in results if not isinstance(r, NoNodeError))

    # -- topic configs

    def get_topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(f"{CONFIG_TOPICS}/{topic}")
        except NoNodeError:
            return {}
        return dict(json.loads(data).get("config", {}))

    def set_or_create_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Write ``/config/topics/<t>`` and announce it with a ``/config/changes`` notification."""
        self.set_or_create_entity_config("topics", topic, config)

    # -- config entities (/config/<type>/<name>; Kafka's AdminZkClient.changeEntityConfig)

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The configs of ``/config/<type>/<name>`` (empty when the znode is absent, or not
        Kafka's JSON: then with a warning)."""
        path = f"{CONFIG}/{entity_type}/{name}"
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return {}
        try:
            config = json.loads(data).get("config") or {}
            return {str(k): str(v) for k, v in dict(config).items()}
        except (ValueError, TypeError, AttributeError):
            log.warning("%s is not a config znode (ignored): %r", path, data[:200])
            return {}

    def get_entity_names(self, entity_type: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(f"{CONFIG}/{entity_type}"))
        except NoNodeError:
            return []

    def set_or_create_entity_config(
        self, entity_type: str, name: str, config: Mapping[str, str]
    ) -> None:
        """Write ``/config/<type>/<name>`` (an empty map is written as such, as Kafka does) and
        announce it with a ``/config/changes`` notification."""
        self._check_writable()
        data = path_json({"version": 1, "config": dict(config)})
        path = f"{CONFIG}/{entity_type}/{name}"
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        self.zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
                       path_json({"version": 2, "entity_path": f"{entity_type}/{name}"}),
                       sequence=True)

    def get_config_change_names(self) -> list[str]:
        """The children of ``/config/changes`` (``config_change_<n>``)."""
        return list(self.zk.get_children(CONFIG_CHANGES))

    def purge_config_changes(self, created_before_ms: int) -> list[str]:
        """Delete the ``/config/changes`` notifications created (ZooKeeper's ctime) before
        ``created_before_ms``, oldest first, stopping at the first newer one; the names deleted
        (Kafka's ZkNodeChangeNotificationListener.purgeObsoleteNotifications)."""
        deleted: list[str] = []
        for name in sorted(self.get_config_change_names()):
            path = f"{CONFIG_CHANGES}/{name}"
            stat = self.zk.exists(path)
            if stat is None:
                continue
            if stat.ctime >= created_before_ms:
                break
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass  # purged by another broker
            deleted.append(name)
        return deleted

    def get_config_change_entity_path(self, notification: str) -> str | None:
        """The ``entity_path`` of ``/config/changes/<notification>`` (None when it is gone or
        not a version 2 notification)."""
        try:
            data, _ = self.zk.get(f"{CONFIG_CHANGES}/{notification}")
            parsed = json.loads(data)
        except (NoNodeError, ValueError):
            return None
        if not isinstance(parsed, dict) or parsed.get("version") != 2:
            return None
        path = parsed.get("entity_path")
        return path if isinstance(path, str) else None

    # -- admin requests

    def create_delete_topic_path(self, topic: str) -> None:
        self._check_writable()
        try:
            self.zk.create(f"{DELETE_TOPICS}/{topic}")
        except NodeExistsError:
            pass

    def get_topic_deletions(self) -> list[str]:
        return sorted(self.zk.get_children(DELETE_TOPICS))

    def _get_partitions_json(self, path: str) -> list[dict[str, Any]] | None:
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return list(json.loads(data).get("partitions", []))

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Admin (``kafka-reassign-partitions``): fails with NodeExistsError while one is in progress."""
        self._check_writable()
        parts = [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(reassignment.items())]
        self.zk.create(REASSIGN_PARTITIONS, path_json({"version": 1, "partitions": parts}), makepath=True)

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        parts = self._get_partitions_json(REASSIGN_PARTITIONS) or []
        return {(d["topic"], d["partition"]): tuple(d["replicas"]) for d in parts}

    def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Sequence[int]], epoch_zk_version: int
    ) -> None:
        """Controller rewrite of the reassignments still in flight (fenced); empty deletes the znode."""
        if not reassignment:
            self.delete_partition_reassignment(epoch_zk_version)
            return
        parts = [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(reassignment.items())]
        data = path_json({"version": 1, "partitions": parts})
        exists = self.zk.exists(REASSIGN_PARTITIONS) is not None

        def op(tx: Any) -> None:
            if exists:
                tx.set_data(REASSIGN_PARTITIONS, data)
            else:
                tx.create(REASSIGN_PARTITIONS, data)

        self._raise_first(self._fenced_commit(epoch_zk_version, op))

    def get_controller_owner_session(self) -> int | None:
        """The session id owning the ephemeral ``/controller`` (None if there is none)."""
        stat = self.zk.exists(CONTROLLER)
        return int(stat.ephemeralOwner) if stat else None

    def delete_partition_reassignment(self, epoch_zk_version: int) -> None:
        results = self._fenced_commit(epoch_zk_version, lambda tx: tx.delete(REASSIGN_PARTITIONS))
        self._raise_first(r for r in results if not isinstance(r, NoNodeError))

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_writable()
        parts = [{"topic": t, "partition": p} for t, p in sorted(partitions)]
        self.zk.create(PREFERRED_REPLICA_ELECTION, path_json({"version": 1, "partitions": parts}), makepath=True)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        parts = self._get_partitions_json(PREFERRED_REPLICA_ELECTION) or []
        return {(d["topic"], d["partition"]) for d in parts}

    def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        results = self._fenced_commit(epoch_zk_version, lambda tx: tx.delete(PREFERRED_REPLICA_ELECTION))
        self._raise_first(r for r in results if not isinstance(r, NoNodeError))

    # -- ISR change notifications (leader -> controller, IBP < 2.7 style)

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        self._check_writable()
        parts = [{"topic": t, "partition": p} for t, p in sorted(partitions)]
        path: str = self.zk.create(f"{ISR_CHANGE_NOTIFICATION}/isr_change_",
                                   path_json({"version": 1, "partitions": parts}), sequence=True)
        return path.rsplit("/", 1)[1]

    def get_all_isr_change_notifications(self) -> list[str]:
        return sorted(self.zk.get_children(ISR_CHANGE_NOTIFICATION))

    def get_partitions_from_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for name in names:
            for d in self._get_partitions_json(f"{ISR_CHANGE_NOTIFICATION}/{name}") or []:
                out.add((d["topic"], d["partition"]))
        return out

    def delete_isr_change_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        def ops(tx: Any) -> None:
            for n in names:
                tx.delete(f"{ISR_CHANGE_NOTIFICATION}/{n}")

        self._fenced_commit(epoch_zk_version, ops)

    # -- log dir event notifications (broker -> controller: a log dir failed)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """Announce that a log dir of ``broker_id`` failed (Kafka's propagateLogDirEvent); the
        notification's name."""
        self._check_writable()
        data = path_json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})
        path: str = self.zk.create(f"{LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_", data, sequence=True)
        return path.rsplit("/", 1)[1]

    def get_all_log_dir_event_notifications(self) -> list[str]:
        return sorted(self.zk.get_children(LOG_DIR_EVENT_NOTIFICATION))

    def get_broker_ids_from_log_dir_events(self, names: Iterable[str]) -> list[int]:
        """The brokers named by these notifications (gone or unreadable ones skipped)."""
        out: list[int] = []
        for name in names:
            try:
                data, _ = self.zk.get(f"{LOG_DIR_EVENT_NOTIFICATION}/{name}")
                out.append(int(json.loads(data)["broker"]))
            except (NoNodeError, ValueError, KeyError, TypeError):
                continue
        return out

    def delete_log_dir_event_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        def ops(tx: Any) -> None:
            for n in names:
                tx.delete(f"{LOG_DIR_EVENT_NOTIFICATION}/{n}")

        self._fenced_commit(epoch_zk_version, ops)

    # -- cluster id and producer ids

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        try:
            data, _ = self.zk.get(CLUSTER_ID)
            return str(json.loads(data)["id"])
        except NoNodeError:
            pass
        cluster_id = proposed or new_topic_id()
        try:
            self.zk.create(CLUSTER_ID, path_json({"version": "1", "id": cluster_id}), makepath=True)
        except NodeExistsError:
            data, _ = self.zk.get(CLUSTER_ID)
            return str(json.loads(data)["id"])
        return cluster_id

    def allocate_producer_id_block(self, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdBlock:
        """Claim the next block of producer ids: a write conditional on the znode's version, retried
        on BADVERSION (another broker took the block we read)."""
        while True:
            self._check_writable()
            try:
                data, stat = self.zk.get(LATEST_PRODUCER_ID_BLOCK)
                first = int(json.loads(data)["block_end"]) + 1 if data else 0
                version = int(stat.version)
            except NoNodeError:
                first, version = 0, -2
            block = ProducerIdBlock(broker_id, first, block_size)
            payload = path_json({"version": 1, "broker": broker_id, "block_start": str(first),
                                  "block_end": str(block.last_producer_id)})
            try:
                if version == -2:
                    self.zk.create(LATEST_PRODUCER_ID_BLOCK, payload)
                else:
                    self.zk.set(LATEST_PRODUCER_ID_BLOCK, payload, version)
                return block
            except (BadVersionError, NodeExistsError):
                continue

    # -- watches (thin wrappers, so callers need not import kazoo)

    def watch_children(self, path: str, callback: Callable[[list[str]], Any]) -> ChildrenWatch:
        """Call ``callback(children)`` now, on every change and after every reconnection, in a
        kazoo thread (return False to stop); see :class:`ChildrenWatch`."""
        return ChildrenWatch(self.zk, path, callback)

    def watch_data(self, path: str, callback: Callable[[bytes | None, Any], Any]) -> Any:
        """Call ``callback(data, stat)`` now and on every change (None, None when deleted)."""
        return self.zk.DataWatch(path, callback)

    def exists(self, path: str) -> bool:
        return self.zk.exists(path) is not None
