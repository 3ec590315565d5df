"""A tiny old-protocol broker for kafka-python with ``api_version=(0, 9)`` / ``(0, 10)``, and
the script that captures its request frames into tests/protocol/golden/legacy/ (not a test).

Run:  .venv/bin/python tests/protocol/capture_legacy_golden.py

:class:`OldBroker` listens on 127.0.0.1 (ephemeral port), one thread per connection, and
answers Metadata v0 itself and Produce v0-v2, ListOffsets v0 and Fetch v0-v3 through
odradek.protocol.legacy_versions: produced message sets become v2 batches (kept in memory,
offsets stamped as the log would), fetches down-convert them again. So a run exercises the
legacy codecs end to end against a client nobody here wrote. Every (api key, version,
compression) frame seen first is kept in ``frames``; the capture script writes them as
``kp<api_version>_<codec>__<api>_v<version>.bin`` (the frame without its size prefix) and a
``manifest.json`` with the records that were sent.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kio.index import load_response_schema

from odradek.protocol.fetch_response import FetchPartitionResponse, encode_fetch_response
from odradek.protocol.headers import parse_request_header
from odradek.protocol.legacy_versions import LazyDownConversion, build_entity, legacy_codec
from odradek.protocol.messages import encode_body
from odradek.protocol.records import iter_batches, stamp_batch

GOLDEN = Path(__file__).parent / "golden" / "legacy"
TOPIC = "legacy"
MESSAGES = [(b"key-%d" % i, b"value-%d|" % i * 40) for i in range(3)]
API_NAMES = {0: "produce", 1: "fetch", 2: "list_offsets", 3: "metadata"}

_SIZE = struct.Struct(">i")


class OldBroker:
    """One topic with one partition; the log is a list of v2 batches."""

    def __init__(self) -> None:
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.log: list[bytes] = []
        self.next_offset = 0
        self.frames: dict[tuple[int, int], bytes] = {}
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> OldBroker:
        self.acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.acceptor.join(5)
        for t in self.threads:
            t.join(5)
        self.server.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        buf = b""
        with conn:
            while not self.stopping.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while len(buf) >= 4:
                    (size,) = _SIZE.unpack_from(buf)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4 : 4 + size], buf[4 + size :]
                    try:
                        reply = self._handle(frame)
                    except BaseException as exc:  # surfaced by the test
                        self.errors.append(exc)
                        return
                    if reply is not None:
                        try:
                            conn.sendall(reply)
                        except OSError:  # the client went away
                            return

    def _handle(self, frame: bytes) -> bytes | None:
        header, pos = parse_request_header(frame, 1)
        key, version = header.api_key, header.api_version
        with self.lock:
            self.frames.setdefault((key, version), frame)
        if key == 3:
            body = self._metadata(version)
        elif key == 18:  # ApiVersions: what this broker answers, in the v0 layout; a client
            # asking a later version gets UNSUPPORTED_VERSION (35) and asks v0 (as from Kafka)
            ranges = {0: (0, 2), 1: (0, 3), 2: (0, 0), 3: (0, 1), 10: (0, 0), 18: (0, 0)}
            body = struct.pack(">hi", 35 if version else 0, len(ranges)) + b"".join(
                struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in ranges.items()
            )
        elif key == 10:  # FindCoordinator v0 (librdkafka's consumer asks): none here
            body = struct.pack(">hih", 15, -1, 0) + struct.pack(">i", -1)
        else:
            codec = legacy_codec(key, version)
            if codec is None:
                raise AssertionError(f"unexpected api key {key} v{version}")
            legacy, _ = codec.decode(frame, pos)
            response = self._answer(key, legacy.request)
            if response is None:
                return None
            parts, size = codec.encode_response(response, legacy)
            body = b"".join(
                b"".join(p.chunks()) if isinstance(p, LazyDownConversion) else p for p in parts
            )
            assert len(body) == size
        return _SIZE.pack(len(body) + 4) + struct.pack(">i", header.correlation_id) + body

    def _metadata(self, version: int) -> bytes:
        partition = {
            "error_code": 0,
            "partition_index": 0,
            "leader_id": 0,
            "replica_nodes": [0],
            "isr_nodes": [0],
        }
        values = {
            "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port, "rack": None}],
            "controller_id": 0,
            "topics": [
                {"error_code": 0, "name": TOPIC, "is_internal": False, "partitions": [partition]}
            ],
        }
        return encode_body(build_entity(load_response_schema(3, version), values))

    def _answer(self, key: int, request: Any) -> Any:
        if key == 0:
            results = []
            for topic in request.topic_data:
                for p in topic.partition_data:
                    if p.records is None:
                        results.append({"index": p.index, "error_code": 87, "base_offset": -1})
                        continue
                    base = self._append(bytes(p.records))
                    results.append({"index": p.index, "error_code": 0, "base_offset": base})
            if request.acks == 0:
                return None
            return build_entity(
                load_response_schema(0, 3),
                {
                    "responses": [{"name": TOPIC, "partition_responses": results}],
                    "throttle_time": 0,
                },
            )
        if key == 2:
            parts = []
            for t in request.topics:
                for p in t.partitions:
                    offset = 0 if p.timestamp == -2 else self.next_offset
                    parts.append(
                        {"partition_index": p.partition_index, "error_code": 0, "offset": offset}
                    )
            return build_entity(
                load_response_schema(2, 1), {"topics": [{"name": TOPIC, "partitions": parts}]}
            )
        if key == 1:
            topics = []
            for t in request.topics:
                fetched: list[FetchPartitionResponse] = []
                for p in t.partitions:
                    data = b"".join(b for b in self.log if _last_offset(b) >= p.fetch_offset)
                    if not data and request.max_wait.total_seconds() > 0:
                        time.sleep(min(request.max_wait.total_seconds(), 0.05))
                    hw = self.next_offset
                    fetched.append(
                        FetchPartitionResponse(p.partition, 0, hw, hw, records=data or None)
                    )
                topics.append((t.topic, fetched))
            return encode_fetch_response(4, topics)
        raise AssertionError(key)

    def _append(self, batch: bytes) -> int:
        with self.lock:
            buf = bytearray(batch)
            base = self.next_offset
            for b in iter_batches(buf):
                stamp_batch(buf, b.offset, self.next_offset, 0)
                self.next_offset += b.record_count
            self.log.append(bytes(buf))
            return base


def _last_offset(batch: bytes) -> int:
    return next(iter_batches(batch)).last_offset


def run_client(port: int, api_version: tuple[int, int], codec: str | None) -> list[Any]:
    """Produce MESSAGES with kafka-python at ``api_version``, then consume them back."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bootstrap = f"127.0.0.1:{port}"
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        compression_type=codec,
        linger_ms=50,
        acks=1,
        retries=0,
        request_timeout_ms=5000,
        max_block_ms=5000,
    )
    try:
        futures = [
            producer.send(TOPIC, key=k, value=v, timestamp_ms=1_700_000_000_000 + i)
            for i, (k, v) in enumerate(MESSAGES)
        ]
        producer.flush(10)
        for f in futures:
            f.get(10)
    finally:
        producer.close(5)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        request_timeout_ms=5000,
        consumer_timeout_ms=3000,
    )
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list[Any] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
            if len(got) >= len(MESSAGES):
                break
        return got
    finally:
        consumer.close()


def run_librdkafka(port: int, magic0: bool, codec: str) -> list[Any]:
    """Produce MESSAGES with librdkafka (confluent-kafka) and consume them back: ``magic0``
    without ApiVersions, as to a 0.9 broker (Produce v1, Fetch v1), else with ApiVersions
    (this broker's ranges: Produce v2, Fetch v3, magic 1)."""
    import confluent_kafka as ck

    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if magic0:
        conf.update({"api.version.request": False, "broker.version.fallback": "0.9.0"})
    producer = ck.Producer({**conf, "compression.codec": codec, "linger.ms": 50})
    for i, (k, v) in enumerate(MESSAGES):
        producer.produce(TOPIC, value=v, key=k, partition=0, timestamp=1_700_000_000_000 + i)
    left = producer.flush(10)
    assert left == 0, f"{left} messages not delivered"
    consumer = ck.Consumer(
        {**conf, "group.id": "legacy", "enable.auto.commit": False, "log_level": 3}
    )
    try:
        consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 10
        while len(got) < len(MESSAGES) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
        return got
    finally:
        consumer.close()
        del producer


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "topic": TOPIC,
        "messages": [[k.hex(), v.hex()] for k, v in MESSAGES],
        "frames": {},
    }
    for api_version in ((0, 9), (0, 10)):
        for codec in (None, "gzip", "snappy", "lz4"):
            with OldBroker() as broker:
                try:
                    got = run_client(broker.port, api_version, codec)
                except Exception:
                    print(broker.errors, sorted(broker.frames))
                    raise
                assert not broker.errors, broker.errors
                assert [(r.key, r.value) for r in got] == MESSAGES, (got, broker.errors)
                run = f"kp{api_version[0]}{api_version[1]}_{codec or 'none'}"
                for (key, version), frame in sorted(broker.frames.items()):
                    if key not in (0, 1, 2):
                        continue
                    name = f"{run}__{API_NAMES[key]}_v{version}.bin"
                    (GOLDEN / name).write_bytes(frame)
                    manifest["frames"][name] = {
                        "api_version": list(api_version),
                        "codec": codec,
                        "key": key,
                        "version": version,
                    }
                    print(name, len(frame))
    for magic0 in (True, False):
        for codec in ("none", "gzip", "snappy", "lz4"):
            with OldBroker() as broker:
                got = run_librdkafka(broker.port, magic0, codec)
                assert not broker.errors, broker.errors
                assert [(m.key(), m.value()) for m in got] == MESSAGES, got
                run = f"rdkafka{'09' if magic0 else '010'}_{codec}"
                for (key, version), frame in sorted(broker.frames.items()):
                    if key not in (0, 1, 2):
                        continue
                    name = f"{run}__{API_NAMES[key]}_v{version}.bin"
                    (GOLDEN / name).write_bytes(frame)
                    api_version = [0, 9] if magic0 else [0, 10]
                    manifest["frames"][name] = {
                        "api_version": api_version,
                        "codec": None if codec == "none" else codec,
                        "key": key,
                        "version": version,
                    }
                    print(name, len(frame))
    (GOLDEN / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
    sys.exit(0)
