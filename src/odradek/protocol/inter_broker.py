"""The inter-broker requests of Kafka's ZooKeeper mode, as plain data (codecs below them).

LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and ControlledShutdown (7) are not in kio
0.6.5 (generated from Kafka 4.x, which removed them); AlterPartition (56), ElectLeaders (43),
AlterPartitionReassignments (45) and ListPartitionReassignments (46) are, so those go through
``odradek.protocol.messages`` like any other API. Field names are Kafka's message JSON names
(Kafka 3.9's clients/src/main/resources/common/message/*.json) in snake_case.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol._primitives import read_uvarint, uvarint
from odradek.protocol.errors import InvalidRequestError, UnsupportedVersionError

__all__ = [
    "CONTROLLED_SHUTDOWN",
    "LEADER_AND_ISR",
    "STOP_REPLICA",
    "SUPPORTED_VERSIONS",
    "TYPE_FULL",
    "TYPE_INCREMENTAL",
    "TYPE_UNKNOWN",
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
    "decode_controlled_shutdown_request",
    "decode_controlled_shutdown_response",
    "decode_leader_and_isr_request",
    "decode_leader_and_isr_response",
    "decode_stop_replica_request",
    "decode_stop_replica_response",
    "decode_update_metadata_request",
    "decode_update_metadata_response",
    "encode_controlled_shutdown_request",
    "encode_controlled_shutdown_response",
    "encode_leader_and_isr_request",
    "encode_leader_and_isr_response",
    "encode_request_frame",
    "encode_response_frame",
    "encode_stop_replica_request",
    "encode_stop_replica_response",
    "encode_update_metadata_request",
    "encode_update_metadata_response",
    "request_reader",
]

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
ZERO_UUID = uuid.UUID(int=0)
# AbstractControlRequest.Type, the tagged ``type`` of LeaderAndIsr v7 and UpdateMetadata v8
TYPE_UNKNOWN = 0
TYPE_INCREMENTAL = 1
TYPE_FULL = 2
SECURITY_PROTOCOL_PLAINTEXT = 0
# Kafka's SecurityProtocol ids (UpdateMetadata's endpoints)
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


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


# ---------------------------------------------------------------------------- codecs
#
# Versions (all flexible: compact strings and arrays, a tagged-field section per struct):
#   LeaderAndIsr request/response v6-v7 (v7 adds isKRaftController), StopReplica v3-v4 (v4 adds
#   isKRaftController), UpdateMetadata v7-v8 (v8 adds isKRaftController and the tagged Type, tag 0),
#   ControlledShutdown v3. Kafka 3.9's ZooKeeper controller sends the newest of each.
# Their request header is v2 and their response header v1 (flexible).

SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    LEADER_AND_ISR: (6, 7),
    STOP_REPLICA: (3, 4),
    UPDATE_METADATA: (7, 8),
    CONTROLLED_SHUTDOWN: (3, 3),
}

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def bool(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
            return
        raw = v.encode()
        self.buf += uvarint(len(raw) + 1) + raw

    def length(self, n: int) -> None:
        self.buf += uvarint(n + 1)

    def int32s(self, vs: tuple[int, ...]) -> None:
        self.length(len(vs))
        for v in vs:
            self.int32(v)

    def no_tags(self) -> None:
        self.buf.append(0)


class _Reader:
    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise InvalidRequestError("truncated inter-broker message")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def bool(self) -> bool:
        return self._take(1)[0] != 0

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def _uvarint(self) -> int:
        try:
            v, self.pos = read_uvarint(self.data, self.pos)
        except ValueError as e:
            raise InvalidRequestError(str(e)) from None
        return v

    def nullable_string(self) -> str | None:
        n = self._uvarint()
        if n == 0:
            return None
        try:
            return str(self._take(n - 1), "utf-8")
        except UnicodeDecodeError:
            raise InvalidRequestError("string is not UTF-8") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise InvalidRequestError("null where a string is required")
        return s

    def length(self) -> int:
        n = self._uvarint()
        if n == 0:
            raise InvalidRequestError("null where an array is required")
        if n - 1 > len(self.data) - self.pos:
            raise InvalidRequestError("array longer than the message")
        return n - 1

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(self.length()))

    def tags(self, handler: Callable[[int, _Reader], None] | None = None) -> None:
        count = self._uvarint()
        for _ in range(count):
            tag = self._uvarint()
            size = self._uvarint()
            end = self.pos + size
            if end > len(self.data):
                raise InvalidRequestError("truncated tagged field")
            if handler is not None:
                handler(tag, _Reader(self.data[:end], self.pos))
            self.pos = end

    def done(self) -> None:
        if self.pos != len(self.data):
            raise InvalidRequestError(f"{len(self.data) - self.pos} bytes after the message")


def _check_version(api_key: int, version: int) -> None:
    lo, hi = SUPPORTED_VERSIONS[api_key]  # versions outside lo..hi: UnsupportedVersionError
    if not lo <= version <= hi:
        raise UnsupportedVersionError(api_key, version)


def _grouped(states: tuple[Any, ...]) -> dict[str, list[Any]]:
    """Partition states grouped by topic in order of first appearance."""
    out: dict[str, list[Any]] = {}
    for s in states:
        out.setdefault(s.topic_name, []).append(s)
    return out


# -- LeaderAndIsr (4)


def encode_leader_and_isr_request(req: LeaderAndIsrRequest, version: int = 7) -> bytes:
    _check_version(LEADER_AND_ISR, version)
    w = _Writer()
    w.int32(req.controller_id)
    if version >= 7:
        w.bool(req.is_kraft_controller)
    w.int32(req.controller_epoch)
    w.int64(req.broker_epoch)
    w.int8(req.type)
    topics = _grouped(req.partition_states)
    w.length(len(topics))
    for topic, states in topics.items():
        w.string(topic)
        w.uuid(req.topic_ids.get(topic, ZERO_UUID))
        w.length(len(states))
        for s in states:
            w.int32(s.partition_index)
            w.int32(s.controller_epoch)
            w.int32(s.leader)
            w.int32(s.leader_epoch)
            w.int32s(s.isr)
            w.int32(s.partition_epoch)
            w.int32s(s.replicas)
            w.int32s(s.adding_replicas)
            w.int32s(s.removing_replicas)
            w.bool(s.is_new)
            w.int8(s.leader_recovery_state)
            w.no_tags()
        w.no_tags()
    w.length(len(req.live_leaders))
    for ll in req.live_leaders:
        w.int32(ll.broker_id)
        w.string(ll.host_name)
        w.int32(ll.port)
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_leader_and_isr_request(data: bytes | bytearray | memoryview, version: int = 7) -> LeaderAndIsrRequest:
    _check_version(LEADER_AND_ISR, version)
    r = _Reader(data)
    controller_id = r.int32()
    kraft = r.bool() if version >= 7 else False
    controller_epoch = r.int32()
    broker_epoch = r.int64()
    type_ = r.int8()
    states: list[LeaderAndIsrPartitionState] = []
    topic_ids: dict[str, uuid.UUID] = {}
    for _ in range(r.length()):
        topic = r.string()
        topic_ids[topic] = r.uuid()
        for _ in range(r.length()):
            states.append(
                LeaderAndIsrPartitionState(
                    topic, r.int32(), r.int32(), r.int32(), r.int32(), r.int32s(), r.int32(), r.int32s(),
                    r.int32s(), r.int32s(), r.bool(), r.int8(),
                )
            )
            r.tags()
        r.tags()
    leaders = []
    for _ in range(r.length()):
        leaders.append(LiveLeader(r.int32(), r.string(), r.int32()))
        r.tags()
    r.tags()
    r.done()
    return LeaderAndIsrRequest(controller_id, controller_epoch, broker_epoch, tuple(states), tuple(leaders),
                               topic_ids, type_, kraft)


def encode_leader_and_isr_response(
    resp: LeaderAndIsrResponse, topic_ids: Mapping[str, uuid.UUID], version: int = 7
) -> bytes:
    """v5+ groups partition errors by topic id: ``topic_ids`` maps the names to them."""
    _check_version(LEADER_AND_ISR, version)
    w = _Writer()
    w.int16(resp.error_code)
    topics = _grouped(resp.partition_errors)
    w.length(len(topics))
    for topic, errors in topics.items():
        w.uuid(topic_ids.get(topic, ZERO_UUID))
        w.length(len(errors))
        for e in errors:
            w.int32(e.partition_index)
            w.int16(e.error_code)
            w.no_tags()
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_leader_and_isr_response(
    data: bytes | bytearray | memoryview, topic_names: Mapping[uuid.UUID, str], version: int = 7
) -> LeaderAndIsrResponse:
    """``topic_names`` maps topic ids back to names (an unknown id becomes its string form)."""
    _check_version(LEADER_AND_ISR, version)
    r = _Reader(data)
    error_code = r.int16()
    errors = []
    for _ in range(r.length()):
        topic_id = r.uuid()
        name = topic_names.get(topic_id, str(topic_id))
        for _ in range(r.length()):
            errors.append(LeaderAndIsrPartitionError(name, r.int32(), r.int16()))
            r.tags()
        r.tags()
    r.tags()
    r.done()
    return LeaderAndIsrResponse(error_code, tuple(errors))


# -- StopReplica (5)


def encode_stop_replica_request(req: StopReplicaRequest, version: int = 4) -> bytes:
    _check_version(STOP_REPLICA, version)
    w = _Writer()
    w.int32(req.controller_id)
    if version >= 4:
        w.bool(req.is_kraft_controller)
    w.int32(req.controller_epoch)
    w.int64(req.broker_epoch)
    topics = _grouped(req.partition_states)
    w.length(len(topics))
    for topic, states in topics.items():
        w.string(topic)
        w.length(len(states))
        for s in states:
            w.int32(s.partition_index)
            w.int32(s.leader_epoch)
            w.bool(s.delete_partition)
            w.no_tags()
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_stop_replica_request(data: bytes | bytearray | memoryview, version: int = 4) -> StopReplicaRequest:
    _check_version(STOP_REPLICA, version)
    r = _Reader(data)
    controller_id = r.int32()
    kraft = r.bool() if version >= 4 else False
    controller_epoch = r.int32()
    broker_epoch = r.int64()
    states = []
    for _ in range(r.length()):
        topic = r.string()
        for _ in range(r.length()):
            states.append(StopReplicaPartitionState(topic, r.int32(), r.int32(), r.bool()))
            r.tags()
        r.tags()
    r.tags()
    r.done()
    return StopReplicaRequest(controller_id, controller_epoch, broker_epoch, tuple(states), kraft)


def encode_stop_replica_response(resp: StopReplicaResponse, version: int = 4) -> bytes:
    _check_version(STOP_REPLICA, version)
    w = _Writer()
    w.int16(resp.error_code)
    w.length(len(resp.partition_errors))
    for e in resp.partition_errors:
        w.string(e.topic_name)
        w.int32(e.partition_index)
        w.int16(e.error_code)
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_stop_replica_response(data: bytes | bytearray | memoryview, version: int = 4) -> StopReplicaResponse:
    _check_version(STOP_REPLICA, version)
    r = _Reader(data)
    error_code = r.int16()
    errors = []
    for _ in range(r.length()):
        errors.append(StopReplicaPartitionError(r.string(), r.int32(), r.int16()))
        r.tags()
    r.tags()
    r.done()
    return StopReplicaResponse(error_code, tuple(errors))


# -- UpdateMetadata (6)


def encode_update_metadata_request(req: UpdateMetadataRequest, version: int = 8) -> bytes:
    _check_version(UPDATE_METADATA, version)
    w = _Writer()
    w.int32(req.controller_id)
    if version >= 8:
        w.bool(req.is_kraft_controller)
    w.int32(req.controller_epoch)
    w.int64(req.broker_epoch)
    topics = _grouped(req.partition_states)
    w.length(len(topics))
    for topic, states in topics.items():
        w.string(topic)
        w.uuid(req.topic_ids.get(topic, ZERO_UUID))
        w.length(len(states))
        for s in states:
            w.int32(s.partition_index)
            w.int32(s.controller_epoch)
            w.int32(s.leader)
            w.int32(s.leader_epoch)
            w.int32s(s.isr)
            w.int32(s.zk_version)
            w.int32s(s.replicas)
            w.int32s(s.offline_replicas)
            w.no_tags()
        w.no_tags()
    w.length(len(req.live_brokers))
    for b in req.live_brokers:
        w.int32(b.id)
        w.length(len(b.endpoints))
        for e in b.endpoints:
            w.int32(e.port)
            w.string(e.host)
            w.string(e.listener)
            w.int16(e.security_protocol)
            w.no_tags()
        w.string(b.rack)
        w.no_tags()
    if version >= 8 and req.type != 0:  # tagged Type (tag 0), written only when not the default
        w.buf += uvarint(1) + uvarint(0) + uvarint(1)
        w.int8(req.type)
    else:
        w.no_tags()
    return bytes(w.buf)


def decode_update_metadata_request(data: bytes | bytearray | memoryview, version: int = 8) -> UpdateMetadataRequest:
    _check_version(UPDATE_METADATA, version)
    r = _Reader(data)
    controller_id = r.int32()
    kraft = r.bool() if version >= 8 else False
    controller_epoch = r.int32()
    broker_epoch = r.int64()
    states = []
    topic_ids: dict[str, uuid.UUID] = {}
    for _ in range(r.length()):
        topic = r.string()
        topic_ids[topic] = r.uuid()
        for _ in range(r.length()):
            states.append(
                UpdateMetadataPartitionState(
                    topic, r.int32(), r.int32(), r.int32(), r.int32(), r.int32s(), r.int32(), r.int32s(), r.int32s()
                )
            )
            r.tags()
        r.tags()
    brokers = []
    for _ in range(r.length()):
        broker_id = r.int32()
        endpoints = []
        for _ in range(r.length()):
            endpoints.append(UpdateMetadataEndpoint(r.int32(), r.string(), r.string(), r.int16()))
            r.tags()
        brokers.append(UpdateMetadataBroker(broker_id, tuple(endpoints), r.nullable_string()))
        r.tags()
    type_ = [0]

    def on_tag(tag: int, tr: _Reader) -> None:
        if tag == 0 and version >= 8:
            type_[0] = tr.int8()

    r.tags(on_tag)
    r.done()
    return UpdateMetadataRequest(controller_id, controller_epoch, broker_epoch, tuple(states), tuple(brokers),
                                 topic_ids, type_[0], kraft)


def encode_update_metadata_response(resp: UpdateMetadataResponse, version: int = 8) -> bytes:
    _check_version(UPDATE_METADATA, version)
    return _I16.pack(resp.error_code) + b"\x00"


def decode_update_metadata_response(data: bytes | bytearray | memoryview, version: int = 8) -> UpdateMetadataResponse:
    _check_version(UPDATE_METADATA, version)
    r = _Reader(data)
    resp = UpdateMetadataResponse(r.int16())
    r.tags()
    r.done()
    return resp


# -- ControlledShutdown (7)


def encode_controlled_shutdown_request(req: ControlledShutdownRequest, version: int = 3) -> bytes:
    _check_version(CONTROLLED_SHUTDOWN, version)
    return _I32.pack(req.broker_id) + _I64.pack(req.broker_epoch) + b"\x00"


def decode_controlled_shutdown_request(
    data: bytes | bytearray | memoryview, version: int = 3
) -> ControlledShutdownRequest:
    _check_version(CONTROLLED_SHUTDOWN, version)
    r = _Reader(data)
    req = ControlledShutdownRequest(r.int32(), r.int64())
    r.tags()
    r.done()
    return req


def encode_controlled_shutdown_response(resp: ControlledShutdownResponse, version: int = 3) -> bytes:
    _check_version(CONTROLLED_SHUTDOWN, version)
    w = _Writer()
    w.int16(resp.error_code)
    w.length(len(resp.remaining_partitions))
    for topic, partition in resp.remaining_partitions:
        w.string(topic)
        w.int32(partition)
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_controlled_shutdown_response(
    data: bytes | bytearray | memoryview, version: int = 3
) -> ControlledShutdownResponse:
    _check_version(CONTROLLED_SHUTDOWN, version)
    r = _Reader(data)
    error_code = r.int16()
    remaining = []
    for _ in range(r.length()):
        remaining.append((r.string(), r.int32()))
        r.tags()
    r.tags()
    r.done()
    return ControlledShutdownResponse(error_code, tuple(remaining))


# -- request readers for a server (odradek.protocol.messages.request_codec)


def request_reader(
    api_key: int, version: int
) -> Callable[[bytes | bytearray | memoryview, int], tuple[Any, int]] | None:
    """``reader(frame, pos) -> (request, bytes read)`` decoding the body at ``frame[pos:]``
    (the whole rest of the frame) for a supported (api key, version), else None."""
    versions = SUPPORTED_VERSIONS.get(api_key)
    if versions is None or not versions[0] <= version <= versions[1]:
        return None
    decode: Callable[..., Any] = {
        LEADER_AND_ISR: decode_leader_and_isr_request,
        STOP_REPLICA: decode_stop_replica_request,
        UPDATE_METADATA: decode_update_metadata_request,
        CONTROLLED_SHUTDOWN: decode_controlled_shutdown_request,
    }[api_key]

    def reader(frame: bytes | bytearray | memoryview, pos: int) -> tuple[Any, int]:
        return decode(memoryview(frame)[pos:], version), len(frame) - pos

    return reader


# -- whole frames (request header v2, response header v1)


def encode_request_frame(
    api_key: int, version: int, body: bytes, correlation_id: int, client_id: str | None
) -> bytes:
    """Request header v2 (these APIs are flexible in every supported version) + ``body``, unframed."""
    raw = client_id.encode() if client_id is not None else None
    head = struct.pack(">hhih", api_key, version, correlation_id, -1 if raw is None else len(raw))
    return head + (raw or b"") + b"\x00" + body


def encode_response_frame(body: bytes, correlation_id: int) -> bytes:
    """Response header v1 + ``body``, unframed."""
    return _I32.pack(correlation_id) + b"\x00" + body
