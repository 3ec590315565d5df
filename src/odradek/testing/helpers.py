"""Small blocking helpers for tests: create topics, read a topic back, probe a broker.

They speak the Kafka protocol directly (``kio`` for the message bodies, a plain blocking socket
for the transport), so they need no Kafka client library, work against any Kafka-compatible
broker (odradek, Tansu, Apache Kafka) and behave the same whichever clients a project uses.
The versions used are the ones aiokafka uses (never flexible, no topic ids), which every
broker that serves aiokafka accepts: ApiVersions v0, Metadata v5, CreateTopics v3,
DeleteTopics v3, Fetch v11.

``broker`` arguments accept a bootstrap string (``"host:port[,host:port...]"``) or any object
with a ``bootstrap_servers`` attribute (``EmbeddedBroker``, ``BrokerProcess``, ``TansuProcess``).

Requests are framed and responses decoded by ``odradek.protocol.messages``; record batches are
read by ``odradek.protocol.records`` (all five codecs; control batches are skipped).

Also here: ``wait_until``, polling a condition with a deadline, and ``ResourceSnapshot``, a count of this process's open file descriptors, threads and
listening TCP sockets, for tests that check that nothing leaks.
"""

from __future__ import annotations

import gc
import inspect
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.create_topics.v3.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.delete_topics.v3.request import DeleteTopicsRequest
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v5.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta, i64

from odradek.protocol.messages import decode_response, encode_request, read_correlation_id
from odradek.protocol.records import iter_batches

__all__ = [
    "ConsumedRecord",
    "KafkaProtocolError",
    "ResourceSnapshot",
    "api_versions",
    "bootstrap_of",
    "create_topic",
    "delete_topic",
    "list_topics",
    "read_all",
    "wait_until",
]

CLIENT_ID = "odradek-testing"

T = TypeVar("T")


class HasBootstrap(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...


BrokerLike = str | HasBootstrap


class KafkaProtocolError(RuntimeError):
    """A broker answered with a Kafka error code. ``error_code`` is Kafka's number."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """One record read back from a topic.

    ``timestamp`` is milliseconds since the epoch (CreateTime, or LogAppendTime when the batch
    says so); ``headers`` keep their order and may repeat a key.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def bootstrap_of(broker: BrokerLike) -> str:
    """The bootstrap string of ``broker`` (a string, or an object with ``bootstrap_servers``)."""
    if isinstance(broker, str):
        return broker
    servers = getattr(broker, "bootstrap_servers", None)
    if not isinstance(servers, str):
        raise TypeError(f"expected a bootstrap string or a broker, got {broker!r}")
    return servers


def _split_hosts(bootstrap: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise ValueError(f"empty bootstrap servers: {bootstrap!r}")
    return out


# --------------------------------------------------------------------------- waiting


def wait_until(
    condition: Callable[[], T],
    timeout: float = 10.0,
    what: str | None = None,
    *,
    interval: float = 0.005,
    max_interval: float = 0.1,
    event: threading.Event | None = None,
) -> T:
    """Ask ``condition()`` until it returns something true, and return that; raise
    ``AssertionError`` naming ``what`` (default: the condition's source) if it is still false
    ``timeout`` seconds from now.

    The condition is asked once more at the deadline, so a wait never fails for lack of a last
    look. Between two looks the wait starts at ``interval`` seconds and doubles up to
    ``max_interval``; with ``event`` (a ``threading.Event`` that whoever changes the awaited
    state sets) each wait ends as soon as the event is set, which is then cleared: the next look
    comes right after the change rather than after a sleep.
    """
    deadline = time.monotonic() + timeout
    step = interval
    while True:
        value = condition()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            value = condition()
            if value:
                return value
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what or _describe(condition)}")
        pause = min(step, left)
        if event is None:
            time.sleep(pause)
        elif event.wait(pause):
            event.clear()
        step = min(step * 2, max_interval)


def _describe(condition: Callable[[], Any]) -> str:
    """The source of a lambda condition (``lambda: x == 1`` -> ``x == 1``), else its name."""
    name = getattr(condition, "__qualname__", None) or repr(condition)
    if getattr(condition, "__name__", "") != "<lambda>":
        return name
    try:
        source = inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return name
    _, found, rest = source.partition("lambda")
    if not found:
        return source
    body = rest.partition(":")[2].strip()
    return body.rstrip(",)").strip() or source


# --------------------------------------------------------------------------- wire


class _Connection:
    """One blocking connection: size-prefixed request out, size-prefixed response in."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def request(self, req: Any) -> Any:
        """Send a kio request entity and return the decoded kio response entity."""
        self._correlation_id += 1
        self.sock.sendall(
            encode_request(req, correlation_id=self._correlation_id, client_id=CLIENT_ID)
        )
        (size,) = struct.unpack(">i", self._recv_exact(4))
        body = self._recv_exact(size)
        correlation_id = read_correlation_id(body)
        if correlation_id != self._correlation_id:
            raise ConnectionError(
                f"correlation id mismatch: sent {self._correlation_id}, got {correlation_id}"
            )
        return decode_response(int(req.__api_key__), int(req.__version__), body, header=True)


def _connect_any(bootstrap: str, timeout: float) -> _Connection:
    last: Exception | None = None
    for host, port in _split_hosts(bootstrap):
        try:
            return _Connection(host, port, timeout)
        except OSError as exc:
            last = exc
    raise ConnectionError(f"no broker reachable at {bootstrap}: {last}")


def _check(error_code: Any, what: str) -> None:
    code = int(getattr(error_code, "value", error_code))
    if code != 0:
        name = getattr(error_code, "name", str(code))
        raise KafkaProtocolError(f"{what}: {name} ({code})", code)


def api_versions(broker: BrokerLike, *, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 round trip: ``{api_key: (min_version, max_version)}``."""
    with _connect_any(bootstrap_of(broker), timeout) as conn:
        response = conn.request(ApiVersionsRequest())
    _check(response.error_code, "ApiVersions")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def _metadata(conn: _Connection, topics: Sequence[str] | None) -> Any:
    request = MetadataRequest(
        topics=None
        if topics is None
        else tuple(MetadataRequestTopic(name=TopicName(t)) for t in topics),
        allow_auto_topic_creation=False,
    )
    return conn.request(request)


def list_topics(broker: BrokerLike, *, timeout: float = 10.0) -> dict[str, int]:
    """``{topic: partition count}`` for every topic the broker reports (internal ones too)."""
    with _connect_any(bootstrap_of(broker), timeout) as conn:
        response = _metadata(conn, None)
    return {t.name: len(t.partitions) for t in response.topics if int(t.error_code) == 0}


def create_topic(
    broker: BrokerLike,
    name: str,
    partitions: int = 1,
    configs: Mapping[str, object] | None = None,
    *,
    replication_factor: int = 1,
    assignments: Sequence[Sequence[int]] | None = None,
    exist_ok: bool = False,
    timeout: float = 10.0,
) -> None:
    """Create ``name`` with ``partitions`` partitions and topic ``configs`` (Kafka's keys,
    e.g. ``{"cleanup.policy": "compact"}``; values are turned into strings, booleans into
    ``true``/``false``), then wait until every partition has a leader.

    ``assignments``: the replicas (broker ids, the preferred leader first) of partition 0, 1,
    ...; given, they replace ``partitions`` and ``replication_factor`` (sent as -1, as Kafka's
    admin client does).

    Raises ``KafkaProtocolError`` (error_code 36, TOPIC_ALREADY_EXISTS) if the topic exists
    and ``exist_ok`` is false.
    """
    config_entries = tuple(
        CreatableTopicConfig(name=k, value=_config_value(v)) for k, v in (configs or {}).items()
    )
    replicas = tuple(
        CreatableReplicaAssignment(
            partition_index=i32(p), broker_ids=tuple(BrokerId(b) for b in brokers)
        )
        for p, brokers in enumerate(assignments or ())
    )
    request = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(-1 if replicas else partitions),
                replication_factor=i16(-1 if replicas else replication_factor),
                assignments=replicas,
                configs=config_entries,
            ),
        ),
        timeout=i32Timedelta.parse(_ms(timeout)),
    )
    deadline = time.monotonic() + timeout
    with _connect_any(bootstrap_of(broker), timeout) as conn:
        response = conn.request(request)
        for result in response.topics:
            code = int(result.error_code)
            if code == 36 and exist_ok:
                continue
            detail = f" {result.error_message}" if result.error_message else ""
            _check(result.error_code, f"CreateTopics {result.name!r}{detail}")
        _wait_for_leaders(conn, name, deadline)


def _wait_for_leaders(conn: _Connection, topic: str, deadline: float) -> None:
    while True:
        response = _metadata(conn, [topic])
        ready = False
        for t in response.topics:
            if t.name == topic and int(t.error_code) == 0 and t.partitions:
                ready = all(int(p.leader_id) >= 0 for p in t.partitions)
        if ready:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {topic!r} has no leader for every partition")
        time.sleep(0.005)


def delete_topic(
    broker: BrokerLike, name: str, *, missing_ok: bool = False, timeout: float = 10.0
) -> None:
    """Delete ``name``. Raises ``KafkaProtocolError`` (3, UNKNOWN_TOPIC_OR_PARTITION) if it
    does not exist and ``missing_ok`` is false."""
    request = DeleteTopicsRequest(
        topic_names=(TopicName(name),), timeout=i32Timedelta.parse(_ms(timeout))
    )
    with _connect_any(bootstrap_of(broker), timeout) as conn:
        response = conn.request(request)
    for result in response.responses:
        if int(result.error_code) == 3 and missing_ok:
            continue
        _check(result.error_code, f"DeleteTopics {result.name!r}")


def read_all(
    broker: BrokerLike,
    topic: str,
    *,
    timeout: float = 10.0,
    max_bytes: int = 8 * 1024 * 1024,
) -> list[ConsumedRecord]:
    """Every record in ``topic`` below each partition's high watermark at the time of the call,
    ordered by partition, then offset. Control records (transaction markers) are skipped;
    records of aborted transactions are returned like any other (read_uncommitted).

    Raises ``KafkaProtocolError`` (3, UNKNOWN_TOPIC_OR_PARTITION) if the topic does not exist.
    """
    bootstrap = bootstrap_of(broker)
    deadline = time.monotonic() + timeout
    with _connect_any(bootstrap, timeout) as conn:
        metadata = _metadata(conn, [topic])
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in metadata.brokers}
        leaders: dict[int, int] = {}
        for t in metadata.topics:
            if t.name != topic:
                continue
            _check(t.error_code, f"Metadata {topic!r}")
            for p in t.partitions:
                leaders[int(p.partition_index)] = int(p.leader_id)
    if not leaders:
        raise KafkaProtocolError(f"Metadata {topic!r}: no partitions", 3)

    records: list[ConsumedRecord] = []
    connections: dict[int, _Connection] = {}
    try:
        for partition in sorted(leaders):
            leader = leaders[partition]
            if leader not in connections:
                if leader not in brokers:
                    raise KafkaProtocolError(f"{topic}-{partition} has no leader", 5)
                host, port = brokers[leader]
                connections[leader] = _Connection(host, port, timeout)
            conn = connections[leader]
            offset = 0
            end: int | None = None
            wait_ms = 0  # brokers that answer max_wait=0 with nothing (Tansu) get 20 ms next time
            while end is None or offset < end:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"read_all({topic!r}) did not finish in {timeout} s")
                request = FetchRequest(
                    max_wait=i32Timedelta.parse(timedelta(milliseconds=wait_ms)),
                    min_bytes=i32(1 if wait_ms else 0),
                    max_bytes=i32(max_bytes),
                    topics=(
                        FetchTopic(
                            topic=TopicName(topic),
                            partitions=(
                                FetchPartition(
                                    partition=i32(partition),
                                    fetch_offset=i64(offset),
                                    partition_max_bytes=i32(max_bytes),
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                )
                response = conn.request(request)
                _check(response.error_code, "Fetch")
                found = [
                    p
                    for r in response.responses
                    if r.topic == topic
                    for p in r.partitions
                    if int(p.partition_index) == partition
                ]
                if not found:
                    wait_ms = 20
                    continue
                data = found[0]
                code = int(data.error_code)
                if code == 1 and offset == 0 and int(data.log_start_offset) > 0:
                    offset = int(data.log_start_offset)  # OFFSET_OUT_OF_RANGE: start was deleted
                    continue
                _check(data.error_code, f"Fetch {topic}-{partition} at {offset}")
                if end is None:
                    end = int(data.high_watermark)
                    if int(data.log_start_offset) > offset:
                        offset = int(data.log_start_offset)
                payload = bytes(data.records or b"")
                if not payload:
                    if offset < end:
                        time.sleep(0.001)
                    continue
                for record in _decode_batches(payload, topic, partition):
                    if record.offset >= offset and record.offset < end:
                        records.append(record)
                    offset = max(offset, record.offset + 1)
                next_offset = _next_offset_after(payload)
                if next_offset is not None:
                    offset = max(offset, next_offset)
    finally:
        for c in connections.values():
            c.close()
    return records


def _ms(seconds: float) -> Any:
    return timedelta(milliseconds=int(seconds * 1000))


def _config_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------- record batches


def _decode_batches(payload: bytes, topic: str, partition: int) -> Iterator[ConsumedRecord]:
    """The records of every whole batch in ``payload`` (a trailing partial batch is ignored),
    control batches skipped; raises ValueError on a batch that is not magic 2."""
    for batch in iter_batches(payload):
        if batch.magic != 2:
            raise ValueError(
                f"{topic}-{partition}: batch at {batch.base_offset} has magic {batch.magic}"
            )
        if batch.is_control:
            continue  # transaction marker
        for record in batch.records():
            yield ConsumedRecord(
                topic=topic,
                partition=partition,
                offset=record.offset,
                timestamp=record.timestamp,
                key=record.key,
                value=record.value,
                headers=record.headers,
            )


def _next_offset_after(payload: bytes) -> int | None:
    """The offset after the last whole batch in ``payload`` (control batches included)."""
    last: int | None = None
    for batch in iter_batches(payload):
        last = batch.next_offset
    return last


# ------------------------------------------------------------------- leak counting


def _is_listening(fd: int) -> bool:
    try:
        dup = os.dup(fd)
    except OSError:
        return False  # closed meanwhile
    try:
        sock = socket.socket(fileno=dup)
    except OSError:
        os.close(dup)
        return False
    try:
        return bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    except OSError:
        return False
    finally:
        sock.close()


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """What this process holds at one moment: open file descriptors, Python threads, OS threads
    and listening sockets (socket fds with SO_ACCEPTCONN set).

    ``ResourceSnapshot.take()`` reads ``/proc/self`` (Linux); elsewhere the fd and socket
    counts are -1. ``diff(later)`` names what grew.
    """

    fds: int
    threads: int
    os_threads: int
    listening_sockets: int
    thread_names: tuple[str, ...] = ()
    fd_targets: tuple[tuple[int, str], ...] = ()
    """(fd, what it points to: a path, ``socket:[inode]``, ``pipe:[inode]``, ...)"""

    @classmethod
    def take(cls) -> ResourceSnapshot:
        fds = -1
        listening = -1
        os_threads = -1
        socket_fds: list[int] = []
        targets: list[tuple[int, str]] = []
        try:
            names = os.listdir("/proc/self/fd")
            fds = len(names) - 1  # minus the fd listdir itself held open
            for name in names:
                try:
                    target = os.readlink(f"/proc/self/fd/{name}")
                except OSError:
                    continue  # the listdir fd, closed by now
                targets.append((int(name), target))
                if target.startswith("socket:["):
                    socket_fds.append(int(name))
            os_threads = len(os.listdir("/proc/self/task"))
            listening = sum(1 for fd in socket_fds if _is_listening(fd))
        except FileNotFoundError:
            pass
        threads = threading.enumerate()
        return cls(
            fds=fds,
            threads=len(threads),
            os_threads=os_threads,
            listening_sockets=listening,
            thread_names=tuple(sorted(t.name for t in threads)),
            fd_targets=tuple(sorted(targets)),
        )

    def diff(self, later: ResourceSnapshot) -> dict[str, tuple[int, int]]:
        """``{what: (before, after)}`` for every count that grew from ``self`` to ``later``."""
        out: dict[str, tuple[int, int]] = {}
        for name in ("fds", "threads", "os_threads", "listening_sockets"):
            before, after = getattr(self, name), getattr(later, name)
            if after > before:
                out[name] = (before, after)
        return out

    def new_fds(self, later: ResourceSnapshot) -> list[tuple[int, str]]:
        """File descriptors open in ``later`` that were not open (to the same thing) in ``self``."""
        old = set(self.fd_targets)
        return [item for item in later.fd_targets if item not in old]

    @classmethod
    def wait_until_back_to(
        cls, baseline: ResourceSnapshot, timeout: float = 2.0
    ) -> dict[str, tuple[int, int]]:
        """Poll until no count is above ``baseline`` (threads and fds of clients closed
        asynchronously take a moment to go); return what is still above after ``timeout``.
        Runs the garbage collector first: a client object caught in a reference cycle keeps its
        socket until it is collected, which is not a leak."""
        if not baseline.diff(cls.take()):
            return {}
        gc.collect()
        deadline = time.monotonic() + timeout
        while True:
            grown = baseline.diff(cls.take())
            if not grown or time.monotonic() >= deadline:
                return grown
            time.sleep(0.005)
