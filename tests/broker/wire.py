"""A tiny blocking Kafka wire client for the broker tests: encode a kio request with
odradek.protocol.messages, send it, read the response frame, decode it."""

from __future__ import annotations

import datetime
import socket
import struct
import sys
from typing import Any

from kio.index import load_request_schema

from odradek.protocol.messages import decode_response, encode_request

__all__ = ["Wire", "req"]


def req(api_key: int, version: int, _cls: str | None = None, /, **fields: Any) -> Any:
    """Build the kio request entity (api_key, version); ``_cls`` names a nested class.
    Fields the version does not have are dropped."""
    cls = load_request_schema(api_key, version)
    if _cls is not None:
        cls = getattr(sys.modules[cls.__module__], _cls)
    known = cls.__dataclass_fields__
    return cls(**{k: v for k, v in fields.items() if k in known})


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def kp_build(cls: Any, values: dict[str, Any]) -> Any:
    """A kafka-python message or nested struct from a dict (nested lists of dicts too): the
    old request versions kio lacks, encoded independently of odradek."""
    kwargs = {}
    for name, value in values.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            nested = getattr(cls, cls.fields[name]._json["type"][2:])
            value = [kp_build(nested, v) for v in value]
        kwargs[name] = value
    return cls(**kwargs)


class Wire:
    """One connection. ``call(entity)`` sends and returns the decoded response."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, entity: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(
            encode_request(entity, correlation_id=self.correlation_id, client_id="wire")
        )
        return self.correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv(4))[0]
        return self._recv(size)

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def receive(self, entity: Any, correlation_id: int) -> Any:
        frame = self.read_frame()
        got = struct.unpack_from(">i", frame, 0)[0]
        assert got == correlation_id, (got, correlation_id)
        return decode_response(int(entity.__api_key__), int(entity.__version__), frame, header=True)

    def call(self, entity: Any) -> Any:
        return self.receive(entity, self.send(entity))

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


# -- request builders for the APIs the broker tests use -------------------------------------------


def produce_request(
    topic: str,
    partition: int,
    records: bytes | None,
    *,
    acks: int = 1,
    version: int = 9,
    timeout_ms: int = 5000,
) -> Any:
    pd = req(0, version, "PartitionProduceData", index=partition, records=records)
    td = req(0, version, "TopicProduceData", name=topic, partition_data=(pd,))
    return req(
        0, version, transactional_id=None, acks=acks, timeout=ms(timeout_ms), topic_data=(td,)
    )


def fetch_request(
    topic: str,
    partitions: dict[int, int],
    *,
    version: int = 12,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    current_leader_epoch: int = -1,
    last_fetched_epoch: int = -1,
    log_start_offset: int = -1,
    replica_id: int = -1,
    isolation_level: int = 0,
) -> Any:
    """Fetch of ``partitions`` {partition: fetch offset} of ``topic``, a consumer's unless
    ``replica_id`` names a follower; the epochs and log start offset apply to every partition
    (-1: not given)."""
    parts = tuple(
        req(
            1,
            version,
            "FetchPartition",
            partition=p,
            current_leader_epoch=current_leader_epoch,
            fetch_offset=o,
            last_fetched_epoch=last_fetched_epoch,
            log_start_offset=log_start_offset,
            partition_max_bytes=partition_max_bytes,
        )
        for p, o in partitions.items()
    )
    ft = req(1, version, "FetchTopic", topic=topic, partitions=parts)
    return req(
        1,
        version,
        replica_id=replica_id,
        max_wait=ms(max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(ft,),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets_request(topic: str, timestamps: dict[int, int], *, version: int = 7) -> Any:
    parts = tuple(
        req(
            2,
            version,
            "ListOffsetsPartition",
            partition_index=p,
            current_leader_epoch=-1,
            timestamp=ts,
            max_num_offsets=1,
        )
        for p, ts in timestamps.items()
    )
    t = req(2, version, "ListOffsetsTopic", name=topic, partitions=parts)
    return req(2, version, replica_id=-1, isolation_level=0, topics=(t,))


def create_topics_request(
    topics: list[tuple[str, int, int, dict[str, str]]],
    *,
    version: int = 5,
    validate_only: bool = False,
) -> Any:
    out = []
    for name, partitions, rf, configs in topics:
        cfgs = tuple(
            req(19, version, "CreatableTopicConfig", name=k, value=v) for k, v in configs.items()
        )
        out.append(
            req(
                19,
                version,
                "CreatableTopic",
                name=name,
                num_partitions=partitions,
                replication_factor=rf,
                assignments=(),
                configs=cfgs,
            )
        )
    return req(19, version, topics=tuple(out), timeout=ms(10000), validate_only=validate_only)


def metadata_request(
    topics: list[str] | None, *, version: int = 12, allow_auto: bool = True
) -> Any:
    ts = (
        None
        if topics is None
        else tuple(req(3, version, "MetadataRequestTopic", name=t, topic_id=None) for t in topics)
    )
    return req(
        3,
        version,
        topics=ts,
        allow_auto_topic_creation=allow_auto,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def init_producer_id_request(
    *, version: int = 4, producer_id: int = -1, producer_epoch: int = -1
) -> Any:
    return req(
        22,
        version,
        transactional_id=None,
        transaction_timeout=ms(60000),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


def create(
    wire: Wire, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    r = wire.call(create_topics_request([(name, partitions, 1, configs or {})]))
    assert int(r.topics[0].error_code) == 0, r.topics[0]


def fetched_batches(records: bytes | None) -> list[Any]:
    from odradek.protocol.records import iter_batches

    return list(iter_batches(records or b""))


def fetched_values(records: bytes | None) -> list[bytes | None]:
    return [r.value for b in fetched_batches(records) for r in b.records()]
