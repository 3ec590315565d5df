"""The inter-broker requests of Kafka's ZooKeeper mode, as plain data (codecs below them).

LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and ControlledShutdown (7) are not in kio
0.6.5 (generated from Kafka 4.x, which removed them); AlterPartition (56), ElectLeaders (43),
AlterPartitionReassignments (45) and ListPartitionReassignments (46) are, so those go through
``odradek.protocol.messages`` like any other API. Field names are Kafka's message JSON names
(Kafka 3.9's clients/src/main/resources/common/message/*.json) in snake_case.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

__all__ = [
    "CONTROLLED_SHUTDOWN",
    "LEADER_AND_ISR",
    "STOP_REPLICA",
    "UPDATE_METADATA",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "LeaderAndIsrPartitionError",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LiveLeader",
    "StopReplicaPartitionError",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataBroker",
    "UpdateMetadataEndpoint",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
ZERO_UUID = uuid.UUID(int=0)
SECURITY_PROTOCOL_PLAINTEXT = 0


@dataclass(frozen=True)
class LeaderAndIsrPartitionState:
    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the state znode's version in ZooKeeper mode
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class LiveLeader:
    broker_id: int
    host_name: str
    port: int


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[LiveLeader, ...]
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    type: int = 0  # 0 unknown, 1 incremental, 2 full
    is_kraft_controller: bool = False


@dataclass(frozen=True)
class LeaderAndIsrPartitionError:
    topic_name: str
    partition_index: int
    error_code: int


@dataclass(frozen=True)
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]  # v5+: grouped by topic id on the wire


@dataclass(frozen=True)
class StopReplicaPartitionState:
    topic_name: str
    partition_index: int
    leader_epoch: int
    delete_partition: bool


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[StopReplicaPartitionState, ...]
    is_kraft_controller: bool = False


@dataclass(frozen=True)
class StopReplicaPartitionError:
    topic_name: str
    partition_index: int
    error_code: int


@dataclass(frozen=True)
class StopReplicaResponse:
    error_code: int
    partition_errors: tuple[StopReplicaPartitionError, ...]


@dataclass(frozen=True)
class UpdateMetadataPartitionState:
    topic_name: str
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class UpdateMetadataEndpoint:
    port: int
    host: str
    listener: str = "PLAINTEXT"
    security_protocol: int = SECURITY_PROTOCOL_PLAINTEXT


@dataclass(frozen=True)
class UpdateMetadataBroker:
    id: int
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = None


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    type: int = 0  # tagged (v8): 0 unknown, 1 incremental, 2 full
    is_kraft_controller: bool = False


@dataclass(frozen=True)
class UpdateMetadataResponse:
    error_code: int


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: tuple[tuple[str, int], ...]
