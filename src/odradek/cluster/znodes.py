"""Kafka's ZooKeeper layout as values: znode paths, the JSON each znode holds, the domain types
read from and written to them (``BrokerInfo``, ``LeaderAndIsr``, ``TopicAssignment``...) and the
errors of a fenced write. No kazoo and no I/O here: the controller's pure decisions use these
types, and ``odradek.cluster.zk`` (``KafkaZkClient``) reads and writes them over kazoo. The
formats of each znode are listed in ``odradek.cluster.zk``'s module docstring.
"""

from __future__ import annotations

import json
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = [
    "BROKER_IDS",
    "BROKER_TOPICS",
    "CLUSTER_ID",
    "CONFIG",
    "CONFIG_CHANGES",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_TOPICS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "INITIAL_CONTROLLER_EPOCH",
    "INITIAL_CONTROLLER_EPOCH_ZK_VERSION",
    "ISR_CHANGE_NOTIFICATION",
    "LATEST_PRODUCER_ID_BLOCK",
    "LOG_DIR_EVENT_NOTIFICATION",
    "LOG_DIR_FAILURE_EVENT",
    "NO_LEADER",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "PRODUCER_ID_BLOCK_SIZE",
    "REASSIGN_PARTITIONS",
    "SECURITY_PROTOCOLS",
    "BrokerInfo",
    "ControllerMovedError",
    "EndPoint",
    "LeaderAndIsr",
    "NotConnectedError",
    "ProducerIdBlock",
    "TopicAssignment",
    "TopicPartition",
    "UpdateCode",
    "UpdateLeaderAndIsrResult",
    "new_topic_id",
    "now_ms",
    "parse_connect",
    "partition_state_path",
    "path_json",
    "topic_path",
]

TopicPartition = tuple[str, int]

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
"""Children ``log_dir_event_<seq>`` (persistent sequential) = ``{"version":1,"broker":id,"event":1}``:
a broker's log dir failed (Kafka's LogDirEventNotificationZNode); the controller deletes them."""
LOG_DIR_FAILURE_EVENT = 1
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Kafka's KafkaZkClient creates these persistent paths at start.
PERSISTENT_PATHS = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    "/cluster",
    "/brokers/seqid",
    "/config/clients",
    "/config/users",
    "/config/brokers",
)

NO_LEADER = -1
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
PRODUCER_ID_BLOCK_SIZE = 1000


class ControllerMovedError(Exception):
    """A fenced write or an election found ``/controller_epoch`` changed: another controller won."""


class NotConnectedError(Exception):
    """The session is SUSPENDED (or not yet connected): writes are refused until it is back."""


def parse_connect(connect: str) -> tuple[str, str | None]:
    """``"h1:p1,h2:p2/chroot"`` -> (``"h1:p1,h2:p2"``, ``"/chroot"`` or None)."""
    slash = connect.find("/")
    if slash < 0:
        return connect, None
    chroot = connect[slash:].rstrip("/")
    return connect[:slash], chroot or None


def path_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def now_ms() -> str:
    return str(time.time_ns() // 1_000_000)


# ---------------------------------------------------------------------------- data


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
"""Kafka's security protocols; a protocol's index is its id on the wire (UpdateMetadata)."""


@dataclass(frozen=True)
class EndPoint:
    """One advertised listener of a broker (Kafka's ``EndPoint``): its connection string is
    ``<LISTENER>://<host>:<port>`` (IPv6 hosts in brackets)."""

    host: str
    port: int
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"

    @classmethod
    def parse(cls, connection_string: str, protocols: Mapping[str, str]) -> EndPoint:
        """``LISTENER://host:port``; the protocol from ``protocols`` (the znode's
        ``listener_security_protocol_map``), else the listener's own name (Kafka's default
        map, as a version 1-3 znode has it)."""
        listener, _, hostport = connection_string.partition("://")
        host, _, port = hostport.rpartition(":")
        return cls(host.strip("[]"), int(port), listener, protocols.get(listener, listener))


@dataclass(frozen=True)
class BrokerInfo:
    """A registered broker; ``epoch`` is the czxid of its ``/brokers/ids/<id>`` znode (-1 if unknown).

    ``endpoints`` are every advertised listener, in ``advertised.listeners`` order;
    ``host``, ``port`` and ``listener`` name the one the brokers reach each other on (the
    inter-broker listener). Without ``endpoints`` the broker has that one listener, PLAINTEXT.

    The znode (Kafka's ``BrokerIdZNode``, version 5)::

        {"listener_security_protocol_map": {"<LISTENER>": "<PROTOCOL>", ...},
         "endpoints": ["<LISTENER>://<host>:<port>", ...], "rack": "<rack>" (when set),
         "jmx_port": -1, "features": {}, "host": <host of the first PLAINTEXT endpoint, or null>,
         "timestamp": "<ms>", "port": <its port, or -1>, "version": 5}
    """

    id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1
    listener: str = "PLAINTEXT"
    endpoints: tuple[EndPoint, ...] = ()

    @property
    def all_endpoints(self) -> tuple[EndPoint, ...]:
        return self.endpoints or (EndPoint(self.host, self.port, self.listener, "PLAINTEXT"),)

    def to_json(self) -> bytes:
        endpoints = self.all_endpoints
        # Kafka: host and port are the first PLAINTEXT endpoint's, for clients that know no
        # other protocol; null and -1 when there is none
        plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
        data: dict[str, Any] = {
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
            "endpoints": [e.connection_string for e in endpoints],
            "jmx_port": -1,
            "features": {},
            "host": plaintext.host if plaintext is not None else None,
            "timestamp": now_ms(),
            "port": plaintext.port if plaintext is not None else -1,
            "version": 5,
        }
        if self.rack is not None:
            data["rack"] = self.rack
        return path_json(data)

    @classmethod
    def from_json(
        cls, broker_id: int, data: bytes, epoch: int, listener: str | None = None
    ) -> BrokerInfo:
        """A registration as read back; ``host``/``port`` are those of ``listener`` (the
        inter-broker listener) when the broker has it, else of its first endpoint."""
        d = json.loads(data)
        protocols: Mapping[str, str] = d.get("listener_security_protocol_map") or {}
        endpoints = tuple(EndPoint.parse(s, protocols) for s in d.get("endpoints") or ())
        if not endpoints:  # version 1: host and port only
            endpoints = (EndPoint(d["host"], int(d["port"])),)
        chosen = next((e for e in endpoints if e.listener == listener), endpoints[0])
        return cls(
            broker_id, chosen.host, chosen.port, d.get("rack"), epoch, chosen.listener, endpoints
        )


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's state znode plus its znode version (``zk_version``, -1 before it exists)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def to_json(self) -> bytes:
        return path_json(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def from_json(cls, data: bytes, zk_version: int) -> LeaderAndIsr:
        d = json.loads(data)
        return cls(d["leader"], d["leader_epoch"], tuple(d["isr"]), d["controller_epoch"], zk_version)


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: partition -> replicas (preference order), reassignment in flight."""

    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: str | None = None

    def to_json(self) -> bytes:
        def conv(m: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items())}

        data: dict[str, Any] = {
            "version": 3 if self.topic_id else 2,
            "partitions": conv(self.partitions),
            "adding_replicas": conv(self.adding_replicas),
            "removing_replicas": conv(self.removing_replicas),
        }
        if self.topic_id:
            data["topic_id"] = self.topic_id
        return path_json(data)

    @classmethod
    def from_json(cls, data: bytes) -> TopicAssignment:
        d = json.loads(data)

        def conv(m: Mapping[str, list[int]] | None) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(r) for p, r in (m or {}).items()}

        return cls(
            conv(d["partitions"]),
            conv(d.get("adding_replicas")),
            conv(d.get("removing_replicas")),
            d.get("topic_id"),
        )


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


class UpdateCode(Enum):
    OK = "ok"
    BADVERSION = "badversion"
    NONODE = "nonode"


@dataclass(frozen=True)
class UpdateLeaderAndIsrResult:
    """Per partition: the written state with its new ``zk_version``, or why it was not written."""

    finished: dict[TopicPartition, LeaderAndIsr]
    bad_version: set[TopicPartition]
    no_node: set[TopicPartition]


def new_topic_id() -> str:
    """A topic id as Kafka writes it: 16 random bytes, URL-safe base64 without padding."""
    return urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"
