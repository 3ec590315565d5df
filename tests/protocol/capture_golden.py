"""Capture request frames from real Kafka clients into tests/protocol/golden/ (not a test).

Run:  .venv/bin/python tests/protocol/capture_golden.py

A tiny in-process fake broker listens on 127.0.0.1 (ephemeral port), answers just enough
(ApiVersions, Metadata, Produce, InitProducerId, FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, OffsetFetch, OffsetCommit, ListOffsets, Fetch, LeaveGroup) for confluent-kafka,
kafka-python, aiokafka and kcat to produce three records and consume them in a group, and
stores the first frame of every (run, api key, version) as ``<run>__<api>_v<version>.bin``
(the frame without its size prefix). ``manifest.json`` lists them with the header fields and,
for Produce, the records that were sent. ApiVersions is advertised up to v3, so a client that
starts higher (kafka-python asks v4) gets the v0-format UNSUPPORTED_VERSION answer and retries:
that path is exercised too.

The fake broker uses odradek.protocol for everything it parses and writes, so a run also
checks the codec end to end against the clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import json
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from odradek.protocol.errors import ProtocolError, UnsupportedVersionError
from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response
from odradek.protocol.headers import encode_response_header, response_header_version
from odradek.protocol.messages import (
    decode_request,
    encode_api_versions_error,
    encode_response,
    response_class,
)
from odradek.protocol.produce_response import ProducePartitionResponse, encode_produce_response
from odradek.protocol.records import iter_batches, stamp_batch

GOLDEN = Path(__file__).parent / "golden"
TOPIC = "golden"
GROUP = "golden-group"
MESSAGES = [(b"key-%d" % i, b"value-%d|" % i * 40, [("h", b"v%d" % i)]) for i in range(3)]
"""Values repeat so that every codec actually compresses (clients send small batches raw)."""

API_NAMES = {
    0: "produce",
    1: "fetch",
    2: "list_offsets",
    3: "metadata",
    8: "offset_commit",
    9: "offset_fetch",
    10: "find_coordinator",
    11: "join_group",
    12: "heartbeat",
    13: "leave_group",
    14: "sync_group",
    18: "api_versions",
    22: "init_producer_id",
}
ADVERTISED = {
    0: (0, 10),
    1: (0, 12),
    2: (0, 7),
    3: (0, 12),
    8: (0, 8),
    9: (0, 8),
    10: (0, 4),
    11: (0, 7),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    18: (0, 3),
    22: (0, 4),
}


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def mk(module: Any, class_name: str, /, **values: Any) -> Any:
    """Build kio class ``class_name`` of ``module`` from whichever of ``values`` it has."""
    cls = getattr(module, class_name)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            value = values[f.name]
            if f.name == "error_code" or f.name.endswith("_error_code"):
                value = ErrorCode(value)
            if f.name == "throttle_time":
                value = _ms(value)
            kwargs[f.name] = value
    return cls(**kwargs)


class FakeBroker:
    def __init__(self) -> None:
        self.run = "unset"
        self.port = 0
        self.captured: dict[tuple[str, int, int], bytes] = {}
        self.manifest: dict[str, dict[str, Any]] = {}
        self.logs: dict[tuple[str, int], list[bytes]] = {}  # (topic, partition) -> batches
        self.next_offset: dict[tuple[str, int], int] = {}
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: asyncio.AbstractServer | None = None

    # --- plumbing -----------------------------------------------------------------------

    def start(self) -> None:
        threading.Thread(target=self._thread, daemon=True).start()
        if not self.ready.wait(10):
            raise RuntimeError("fake broker did not start")

    def _thread(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        await self.server.serve_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                response = await self._handle(frame)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _save(self, frame: bytes, api_key: int, version: int, extra: dict[str, Any]) -> None:
        key = (self.run, api_key, version)
        if key in self.captured:
            return
        self.captured[key] = frame
        name = f"{self.run}__{API_NAMES.get(api_key, str(api_key))}_v{version}.bin"
        (GOLDEN / name).write_bytes(frame)
        self.manifest[name] = {"run": self.run, "api_key": api_key, "api_version": version, **extra}

    async def _handle(self, frame: bytes) -> bytes | None:
        try:
            header, request = decode_request(frame)
        except UnsupportedVersionError as exc:
            self._save(
                frame, exc.api_key, exc.version, {"unsupported": True, "client_id": exc.client_id}
            )
            if exc.api_key == 18 and exc.correlation_id is not None:
                return encode_api_versions_error(exc.correlation_id, [(18, *ADVERTISED[18])])
            raise
        except ProtocolError as exc:
            print(f"[{self.run}] cannot decode: {exc}", file=sys.stderr)
            raise
        api_key, version = header.api_key, header.api_version
        extra: dict[str, Any] = {
            "client_id": header.client_id,
            "correlation_id": header.correlation_id,
        }
        if api_key == 0:
            extra["records"] = self._records_of(request)
        self._save(frame, api_key, version, extra)
        handler = getattr(self, f"on_{API_NAMES.get(api_key, 'unknown')}", None)
        if handler is None:
            print(f"[{self.run}] no handler for api {api_key} v{version}", file=sys.stderr)
            return None
        result = await handler(request, version)
        if result is None:
            return None
        if isinstance(result, bytes):  # a body from a hand-written encoder
            head = encode_response_header(
                header.correlation_id, response_header_version(api_key, version)
            )
            return struct.pack(">i", len(head) + len(result)) + head + result
        return encode_response(result, header.correlation_id, api_key=api_key, api_version=version)

    @staticmethod
    def _records_of(request: Any) -> list[list[Any]]:
        out = []
        for topic in request.topic_data:
            for partition in topic.partition_data:
                for batch in iter_batches(partition.records or b""):
                    batch.validate()
                    for r in batch.records():
                        out.append(
                            [
                                None if r.key is None else r.key.decode(),
                                None if r.value is None else r.value.decode(),
                                [[k, None if v is None else v.decode()] for k, v in r.headers],
                                batch.compression.name,
                            ]
                        )
        return out

    def _module(self, api_key: int, version: int) -> Any:
        cls = response_class(api_key, version)
        assert cls is not None
        return sys.modules[cls.__module__]

    # --- handlers -----------------------------------------------------------------------

    async def on_api_versions(self, request: Any, version: int) -> Any:
        m = self._module(18, version)
        keys = tuple(
            mk(m, "ApiVersion", api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ADVERTISED.items())
        )
        return mk(m, "ApiVersionsResponse", error_code=0, api_keys=keys, throttle_time=0)

    async def on_metadata(self, request: Any, version: int) -> Any:
        m = self._module(3, version)
        names = [TOPIC] if request.topics is None else [t.name for t in request.topics]
        if not names:
            names = [TOPIC]
        topics = []
        for name in names:
            partition = mk(
                m,
                "MetadataResponsePartition",
                error_code=0,
                partition_index=0,
                leader_id=0,
                leader_epoch=0,
                replica_nodes=(0,),
                isr_nodes=(0,),
                offline_replicas=(),
            )
            topics.append(
                mk(
                    m,
                    "MetadataResponseTopic",
                    error_code=0 if name == TOPIC else 3,
                    name=name,
                    topic_id=__import__("uuid").UUID(int=1),
                    is_internal=False,
                    partitions=(partition,) if name == TOPIC else (),
                    topic_authorized_operations=-(2**31),
                )
            )
        broker = mk(
            m, "MetadataResponseBroker", node_id=0, host="127.0.0.1", port=self.port, rack=None
        )
        return mk(
            m,
            "MetadataResponse",
            throttle_time=0,
            brokers=(broker,),
            cluster_id="golden-cluster",
            controller_id=0,
            topics=tuple(topics),
            cluster_authorized_operations=-(2**31),
        )

    async def on_produce(self, request: Any, version: int) -> bytes | None:
        responses = []
        for topic in request.topic_data:
            partitions = []
            for partition in topic.partition_data:
                key = (topic.name, partition.index)
                data = bytearray(partition.records or b"")
                base = self.next_offset.get(key, 0)
                first = base
                for batch in iter_batches(data):
                    stamp_batch(data, batch.offset, base, 0)
                    base += batch.last_offset_delta + 1
                self.logs.setdefault(key, []).append(bytes(data))
                self.next_offset[key] = base
                partitions.append(ProducePartitionResponse(partition.index, 0, first, -1, 0))
            responses.append((topic.name, partitions))
        if request.acks == 0:
            return None
        return encode_produce_response(version, responses)

    async def on_init_producer_id(self, request: Any, version: int) -> Any:
        m = self._module(22, version)
        return mk(
            m,
            "InitProducerIdResponse",
            throttle_time=0,
            error_code=0,
            producer_id=1000,
            producer_epoch=0,
        )

    async def on_find_coordinator(self, request: Any, version: int) -> Any:
        m = self._module(10, version)
        if version >= 4:
            coordinators = tuple(
                mk(
                    m,
                    "Coordinator",
                    key=k,
                    node_id=0,
                    host="127.0.0.1",
                    port=self.port,
                    error_code=0,
                    error_message=None,
                )
                for k in request.coordinator_keys
            )
            return mk(m, "FindCoordinatorResponse", throttle_time=0, coordinators=coordinators)
        return mk(
            m,
            "FindCoordinatorResponse",
            throttle_time=0,
            error_code=0,
            error_message=None,
            node_id=0,
            host="127.0.0.1",
            port=self.port,
        )

    async def on_join_group(self, request: Any, version: int) -> Any:
        m = self._module(11, version)
        protocol = request.protocols[0]
        member_id = request.member_id or "member-1"
        member = mk(
            m,
            "JoinGroupResponseMember",
            member_id=member_id,
            group_instance_id=None,
            metadata=protocol.metadata,
        )
        return mk(
            m,
            "JoinGroupResponse",
            throttle_time=0,
            error_code=0,
            generation_id=1,
            protocol_type=request.protocol_type,
            protocol_name=protocol.name,
            leader=member_id,
            skip_assignment=False,
            member_id=member_id,
            members=(member,),
        )

    async def on_sync_group(self, request: Any, version: int) -> Any:
        m = self._module(14, version)
        assignment = b""
        for a in request.assignments:
            if a.member_id == request.member_id:
                assignment = a.assignment
        return mk(
            m,
            "SyncGroupResponse",
            throttle_time=0,
            error_code=0,
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignment=assignment,
        )

    async def on_heartbeat(self, request: Any, version: int) -> Any:
        return mk(self._module(12, version), "HeartbeatResponse", throttle_time=0, error_code=0)

    async def on_leave_group(self, request: Any, version: int) -> Any:
        m = self._module(13, version)
        members = tuple(
            mk(m, "MemberResponse", member_id=x.member_id, group_instance_id=None, error_code=0)
            for x in getattr(request, "members", ())
        )
        return mk(m, "LeaveGroupResponse", throttle_time=0, error_code=0, members=members)

    async def on_offset_fetch(self, request: Any, version: int) -> Any:
        m = self._module(9, version)

        def topics(requested: Any, cls: str, pcls: str) -> tuple[Any, ...]:
            items = requested if requested is not None else ()
            return tuple(
                mk(
                    m,
                    cls,
                    name=t.name,
                    partitions=tuple(
                        mk(
                            m,
                            pcls,
                            partition_index=p,
                            committed_offset=-1,
                            committed_leader_epoch=-1,
                            metadata="",
                            error_code=0,
                        )
                        for p in t.partition_indexes
                    ),
                )
                for t in items
            )

        if version >= 8:
            groups = tuple(
                mk(
                    m,
                    "OffsetFetchResponseGroup",
                    group_id=g.group_id,
                    topics=topics(
                        g.topics, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions"
                    ),
                    error_code=0,
                )
                for g in request.groups
            )
            return mk(m, "OffsetFetchResponse", throttle_time=0, groups=groups)
        return mk(
            m,
            "OffsetFetchResponse",
            throttle_time=0,
            topics=topics(
                request.topics, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition"
            ),
            error_code=0,
        )

    async def on_offset_commit(self, request: Any, version: int) -> Any:
        m = self._module(8, version)
        topics = tuple(
            mk(
                m,
                "OffsetCommitResponseTopic",
                name=t.name,
                partitions=tuple(
                    mk(
                        m,
                        "OffsetCommitResponsePartition",
                        partition_index=p.partition_index,
                        error_code=0,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
        return mk(m, "OffsetCommitResponse", throttle_time=0, topics=topics)

    async def on_list_offsets(self, request: Any, version: int) -> Any:
        m = self._module(2, version)
        topics = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                end = self.next_offset.get((t.name, p.partition_index), 0)
                offset = 0 if p.timestamp == -2 else end
                partitions.append(
                    mk(
                        m,
                        "ListOffsetsPartitionResponse",
                        partition_index=p.partition_index,
                        error_code=0,
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=0,
                    )
                )
            topics.append(
                mk(m, "ListOffsetsTopicResponse", name=t.name, partitions=tuple(partitions))
            )
        return mk(m, "ListOffsetsResponse", throttle_time=0, topics=tuple(topics))

    async def on_fetch(self, request: Any, version: int) -> bytes:
        responses = []
        any_records = False
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                key = (t.topic, p.partition)
                hw = self.next_offset.get(key, 0)
                chunks = []
                for data in self.logs.get(key, []):
                    for batch in iter_batches(data):
                        if batch.last_offset >= p.fetch_offset:
                            chunks.append(bytes(batch.raw()))
                records = b"".join(chunks)
                any_records = any_records or bool(records)
                partitions.append(FetchPartitionResponse(p.partition, 0, hw, hw, 0, records))
            responses.append((t.topic, partitions))
        if not any_records:
            await asyncio.sleep(min(request.max_wait.total_seconds(), 0.1))
        parts, _size = encode_fetch_response(version, responses)
        return b"".join(bytes(x) for x in parts)


# --- client runs ------------------------------------------------------------------------


def run_confluent(broker: FakeBroker, codec: str, consume: bool) -> None:
    import confluent_kafka

    bootstrap = f"127.0.0.1:{broker.port}"
    if not consume:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "client.id": "golden-ck",
                "linger.ms": 50,
            }
        )
        for key, value, headers in MESSAGES:
            producer.produce(TOPIC, value=value, key=key, headers=headers)
        assert producer.flush(15) == 0, "confluent-kafka producer did not flush"
        return
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": "golden-ck",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 20
    while got < len(MESSAGES) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
    if got:
        consumer.commit(asynchronous=False)
    consumer.close()
    print(f"confluent-kafka consumed {got}")


def run_kafka_python(broker: FakeBroker, codec: str | None, consume: bool) -> None:
    import kafka

    bootstrap = f"127.0.0.1:{broker.port}"
    if not consume:
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap, compression_type=codec, client_id="golden-kp", linger_ms=50
        )
        for key, value, headers in MESSAGES:
            producer.send(TOPIC, value=value, key=key, headers=headers)
        producer.flush(15)
        producer.close(5)
        return
    consumer = kafka.KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=GROUP,
        client_id="golden-kp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    got = 0
    for _msg in consumer:
        got += 1
        if got == len(MESSAGES):
            break
    if got:
        consumer.commit()
    consumer.close()
    print(f"kafka-python consumed {got}")


def run_aiokafka(broker: FakeBroker, codec: str | None, consume: bool) -> None:
    import aiokafka

    bootstrap = f"127.0.0.1:{broker.port}"

    async def produce() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, compression_type=codec, client_id="golden-ak", linger_ms=50
        )
        await producer.start()
        try:
            for key, value, headers in MESSAGES:
                await producer.send(TOPIC, value=value, key=key, headers=headers)
            await producer.flush()
        finally:
            await producer.stop()

    async def consume_() -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            client_id="golden-ak",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got = 0
        try:
            deadline = time.monotonic() + 20
            while got < len(MESSAGES) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                got += sum(len(v) for v in batch.values())
            if got:
                await consumer.commit()
        finally:
            await consumer.stop()
        print(f"aiokafka consumed {got}")

    asyncio.run(asyncio.wait_for(consume_() if consume else produce(), 40))


def run_kcat(broker: FakeBroker, codec: str, consume: bool) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    if not consume:
        data = "".join(f"{k.decode()}:{v.decode()}\n" for k, v, _ in MESSAGES)
        subprocess.run(
            [
                "kcat",
                "-b",
                bootstrap,
                "-P",
                "-t",
                TOPIC,
                "-K:",
                "-z",
                codec,
                "-X",
                "client.id=golden-kcat",
            ],
            input=data.encode(),
            timeout=30,
            check=True,
        )
        return
    out = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            TOPIC,
            "-o",
            "beginning",
            "-e",
            "-c",
            str(len(MESSAGES)),
            "-X",
            "client.id=golden-kcat",
        ],
        capture_output=True,
        timeout=30,
        check=True,
    )
    print(f"kcat consumed {len(out.stdout.splitlines())}")


def main() -> None:
    if GOLDEN.exists():
        shutil.rmtree(GOLDEN)
    GOLDEN.mkdir()
    broker = FakeBroker()
    broker.start()
    runs = [
        ("ck_lz4", run_confluent, "lz4", False),
        ("ck_zstd", run_confluent, "zstd", False),
        ("ck_snappy", run_confluent, "snappy", False),
        ("ck", run_confluent, None, True),
        ("kp_none", run_kafka_python, None, False),
        ("kp_snappy", run_kafka_python, "snappy", False),
        ("kp_gzip", run_kafka_python, "gzip", False),
        ("kp", run_kafka_python, None, True),
        ("ak_none", run_aiokafka, None, False),
        ("ak_lz4", run_aiokafka, "lz4", False),
        ("ak", run_aiokafka, None, True),
        ("kcat_gzip", run_kcat, "gzip", False),
        ("kcat", run_kcat, None, True),
    ]
    if shutil.which("kcat") is None:
        runs = [r for r in runs if r[1] is not run_kcat]
    for name, fn, codec, consume in runs:
        broker.run = name
        print(f"--- {name}")
        try:
            fn(broker, codec, consume)
        except Exception as exc:
            print(f"[{name}] client failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        time.sleep(0.2)  # let trailing requests (LeaveGroup, etc.) arrive under this run's name
    (GOLDEN / "manifest.json").write_text(
        json.dumps(broker.manifest, indent=1, sort_keys=True) + "\n"
    )
    print(f"captured {len(broker.manifest)} frames into {GOLDEN}")
    with contextlib.suppress(Exception):
        assert broker.loop is not None and broker.server is not None
        broker.loop.call_soon_threadsafe(broker.server.close)


if __name__ == "__main__":
    main()
