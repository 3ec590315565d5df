"""The broker: an asyncio server that speaks Kafka's wire protocol.

``Broker(config, clock=None)`` is embeddable: ``await broker.start()`` opens the metadata store,
the logs and the listener (``broker.bound_port`` is then the real port, also for port 0);
``await broker.stop()`` stops accepting, wakes parked requests, stops the coordinator,
snapshots producer state, flushes and checkpoints the logs and closes them.

Per connection (``KafkaConnection``, an asyncio Protocol):

* every received chunk goes through protocol.framing.FrameDecoder; all whole frames are handled at once;
* a frame size < 0 or > ``socket.request.max.bytes`` closes the connection; so does a request
  whose header or body does not decode, an unknown API key or an unsupported version (except
  ApiVersions, which gets a v0 UNSUPPORTED_VERSION answer) — never the broker;
* handlers are coroutines, but most finish without suspending: the connection drives them
  with ``coro.send(None)`` and only wraps the rare suspended one (a long-polling Fetch) in a
  Task. Responses go out in request order; everything answered while handling one chunk is
  written with a single ``transport.writelines``;
* a handler exception is logged; the API's ``error_response`` (``ApiSpec.extra``) answers with
  UNKNOWN_SERVER_ERROR when the API defines one, else the connection is closed;
* a client that does not read its responses is not read from either: above 4 MiB of unsent
  responses the transport pauses reading (pause_writing / resume_writing);
* FileRegion parts (record bytes in segment files) are read into bytes and written with the
  rest (measured cheaper on loopback); with ODRADEK_SENDFILE=1 they go out with ``os.sendfile``
  when the transport's buffer is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import os
import struct
from collections import deque
from pathlib import Path
from typing import Any

from odradek.broker.config import BrokerConfig, effective_topic_configs
from odradek.broker.metadata import MetadataStore, PartitionState, TopicMetadata
from odradek.broker.producer_state import ProducerStateManager
from odradek.broker.purgatory import Purgatory
from odradek.broker.registry import (
    ApiSpec,
    EncodedResponse,
    RequestContext,
    load_registry,
)
from odradek.clock import Clock, SystemClock
from odradek.protocol.errors import FrameTooLargeError, InvalidRequestError
from odradek.protocol.framing import FrameDecoder
from odradek.protocol.headers import encode_response_header, parse_request_header
from odradek.protocol.messages import RequestCodec, encode_body, request_codec

__all__ = ["Broker", "KafkaConnection", "PartitionHandle"]

log = logging.getLogger("odradek.broker")

_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_BATCH_HEAD = struct.Struct(">qi")
_PRODUCER_FIELDS = struct.Struct(
    ">qhii"
)  # producerId, producerEpoch, baseSequence, recordCount at 43
_LAST_DELTA = struct.Struct(">i")  # at 23
_ATTR = struct.Struct(">h")  # at 21
USE_SENDFILE = os.environ.get("ODRADEK_SENDFILE", "0") == "1" and hasattr(os, "sendfile")
"""os.sendfile for record bytes: off by default. Measured here (loopback, page cache, uvloop,
confluent-kafka consumer): broker CPU 0.10 s per million 100-byte records consumed with
sendfile vs 0.07 s reading the region into bytes and writing it with the rest of the response
(one writelines per chunk). ODRADEK_SENDFILE=1 turns it on (worth it when the data is not in
the page cache or the link is slower than the copy)."""
SENDFILE_MIN = 16384
"""Regions smaller than this are read and written with the rest (a syscall pair costs more)."""


class PartitionHandle:
    """The broker's view of one partition it leads: its log, config and producer state."""

    __slots__ = ("_producer_state", "broker", "config", "log", "partition", "state", "topic")

    def __init__(
        self,
        broker: Broker,
        topic: str,
        partition: int,
        log: Any,
        config: Any,
        state: PartitionState,
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.partition = partition
        self.log = log
        self.config = config
        self.state = state
        self._producer_state: ProducerStateManager | None = None

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def producer_state(self) -> ProducerStateManager:
        """Loaded lazily: last snapshot, then the batch headers from its offset to the log end."""
        ps = self._producer_state
        if ps is None:
            ps = self.broker._load_producer_state(self)
            self._producer_state = ps
        return ps

    def loaded_producer_state(self) -> ProducerStateManager | None:
        return self._producer_state


class Broker:
    """One broker: config, metadata, logs, coordinator, listener. See the module docstring."""

    def __init__(self, config: BrokerConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config if config is not None else BrokerConfig.default()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.node_id = self.config.node_id_effective
        self.registry: dict[int, ApiSpec] = load_registry()
        self.purgatory = Purgatory()
        self.metadata: MetadataStore = None  # type: ignore[assignment]  # set by start()
        self.log_manager: Any = None
        self.log_cleaner: Any = None
        self.group_coordinator: Any = None
        listener = self.config.listener
        self.host = listener.host or "0.0.0.0"
        self.port = listener.port
        self.bound_port = listener.port
        self._server: asyncio.AbstractServer | None = None
        self._connections: dict[int, KafkaConnection] = {}
        self._next_connection_id = 0
        self._partitions: dict[tuple[str, int], PartitionHandle] = {}
        self._routes: dict[tuple[int, int], Any] = {}
        """(api key, version) -> (ApiSpec, RequestCodec, kio reader?) or the reason to close."""
        self._tasks: list[asyncio.Task[None]] = []
        self._background: asyncio.Future[None] | None = None
        self._started = False
        self._stopping = False  # set for good by stop(): late connections are refused
        self.data_dir: Path | None = None if self.config.in_memory else self.config.data_dirs[0]
        self.next_producer_id = 0

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def advertised_address(self) -> tuple[str, int]:
        adv = self.config.advertised_listener
        host = adv.host
        if not host or host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        port = adv.port if self.config.advertised_listeners and adv.port else self.bound_port
        return host, port

    async def start(self) -> None:
        from odradek.storage import LogConfig, LogManager

        cfg = self.config
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self.metadata = MetadataStore(self.node_id, self.data_dir)
        self._load_producer_id_block()
        self._default_log_config = LogConfig(
            segment_bytes=cfg.log_segment_bytes,
            segment_ms=cfg.roll_ms,
            retention_ms=cfg.retention_ms,
            retention_bytes=cfg.log_retention_bytes,
            index_interval_bytes=cfg.log_index_interval_bytes,
            segment_index_bytes=cfg.log_index_size_max_bytes,
            max_message_bytes=cfg.message_max_bytes,
            flush_interval_messages=cfg.log_flush_interval_messages,
            flush_interval_ms=cfg.flush_interval_ms,
            cleanup_policy=cfg.log_cleanup_policy,
            message_timestamp_type=cfg.log_message_timestamp_type,
            delete_retention_ms=cfg.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=cfg.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=cfg.log_cleaner_max_compaction_lag_ms,
            min_cleanable_dirty_ratio=cfg.log_cleaner_min_cleanable_ratio,
        )
        topic_configs = {
            t.name: self.log_config_for(t) for t in self.metadata.topics() if t.configs
        }
        self.log_manager = LogManager(
            None if cfg.in_memory else cfg.data_dirs,
            self._default_log_config,
            self.clock,
            in_memory=cfg.in_memory,
            topic_configs=topic_configs,
            retention_check_interval_ms=cfg.log_retention_check_interval_ms,
            flush_check_interval_ms=max(1, min(1000, cfg.log_flush_scheduler_interval_ms)),
            checkpoint_interval_ms=max(1, cfg.log_flush_offset_checkpoint_interval_ms),
        )
        try:
            # open every partition log now (recovery happens here, not on the first request);
            # an internal topic's logs are created on first use, so only those on disk open
            for topic in self.metadata.topics():
                for p in topic.partitions:
                    self.partition(topic.name, p.partition, create=not topic.internal)
            loop = asyncio.get_running_loop()
            # bind first (the port is known, e.g. for FindCoordinator), serve once the
            # coordinator has loaded its state
            self._server = await loop.create_server(
                lambda: KafkaConnection(self),
                host=self.host or None,
                port=self.port,
                reuse_address=True,
                backlog=1024,
                start_serving=False,
            )
            sockets = self._server.sockets
            if sockets:
                self.bound_port = sockets[0].getsockname()[1]
            await self._start_coordinator()
            await self._server.start_serving()
        except BaseException:
            if self._server is not None:
                self._server.close()
                self._server = None
            self.log_manager.close()
            self.metadata.close()
            raise
        self._tasks.append(loop.create_task(self._maintenance_loop()))
        self._start_log_cleaner(loop)
        self._started = True
        log.info("broker %s listening on %s:%s", self.node_id, self.host, self.bound_port)

    def _start_log_cleaner(self, loop: asyncio.AbstractEventLoop) -> None:
        """log.cleaner.*: compaction threads that swap segments through this loop."""
        from odradek.storage.cleaner import CleanerConfig, LogCleaner

        self.log_cleaner = LogCleaner(
            self.log_manager,
            CleanerConfig.from_broker_config({k: self.config.get(k) for k in CleanerConfig.KEYS}),
            self.clock,
            loop=loop,
        )
        if self.config.log_cleaner_threads > 0:
            self.log_cleaner.start()

    async def _start_coordinator(self) -> None:
        try:
            from odradek.coordinator import GroupCoordinator
        except ImportError:
            log.info("group coordinator not available; group APIs are not served")
            return
        try:
            self.group_coordinator = GroupCoordinator(self)
            await self.group_coordinator.start()
        except Exception:
            log.exception("group coordinator failed to start; group APIs are not served")
            self.group_coordinator = None

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._stopping = True
        if self._server is not None:
            self._server.close()
        self.purgatory.close()
        # abort, not close: a client that stopped reading must not keep its socket (and this
        # stop) waiting for its write buffer to drain
        for conn in list(self._connections.values()):
            conn.abort(None)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.log_cleaner is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.log_cleaner.shutdown)
        if self._background is not None:
            with contextlib.suppress(Exception):
                await self._background  # a checkpoint or snapshot still being written
            self._background = None
        if self.group_coordinator is not None:
            try:
                await self.group_coordinator.stop()
            except Exception:
                log.exception("group coordinator failed to stop cleanly")
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
        self._snapshot_producer_states(force=True)
        try:
            for plog in self.log_manager.all_logs():
                try:
                    plog.flush()
                except Exception:
                    log.exception("flush of %s-%d failed", plog.topic, plog.partition)
        finally:
            self.log_manager.close()
            self.metadata.close()
        log.info("broker %s stopped", self.node_id)

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- background tasks --------------------------------------------------------------------

    async def _maintenance_loop(self) -> None:
        """Log maintenance on LogManager's schedule: the flush policy and retention run on the
        event loop (cheap unless due); checkpoints (three fsynced files per log dir, 3-8 ms
        measured) and producer-state snapshots are written by a worker thread so that they do
        not stall requests."""
        lm = self.log_manager
        clock = self.clock
        interval = max(
            0.01,
            min(
                1.0,
                self.config.log_retention_check_interval_ms / 1000.0,
                lm.checkpoint_interval_ms / 1000.0,
            ),
        )
        now = clock.now_ms()
        next_flush = now + lm.flush_check_interval_ms
        next_retention = now + lm.retention_check_interval_ms
        next_checkpoint = now + lm.checkpoint_interval_ms
        snapshot_every_ms = 30_000  # or the checkpoint interval when shorter
        next_snapshot = now + min(snapshot_every_ms, lm.checkpoint_interval_ms)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = clock.now_ms()
            try:
                if now >= next_flush:
                    next_flush = now + lm.flush_check_interval_ms
                    lm.run_flush(now)
                if now >= next_retention:
                    next_retention = now + lm.retention_check_interval_ms
                    lm.run_retention(now)
                    for handle in self._partitions.values():
                        ps = handle.loaded_producer_state()
                        if ps is not None:
                            ps.truncate_before(handle.log.log_start_offset)
                if now >= next_checkpoint:
                    next_checkpoint = now + lm.checkpoint_interval_ms
                    self._background = loop.run_in_executor(None, self._checkpoint_quietly)
                    await asyncio.shield(self._background)
                if now >= next_snapshot:
                    next_snapshot = now + min(snapshot_every_ms, lm.checkpoint_interval_ms)
                    payloads = self._producer_state_payloads()
                    if payloads:
                        self._background = loop.run_in_executor(None, _write_payloads, payloads)
                        await asyncio.shield(self._background)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log maintenance failed")

    def _checkpoint_quietly(self) -> None:
        try:
            self.log_manager.checkpoint()
        except RuntimeError:
            # a partition was created while the worker thread iterated: next time
            log.debug("checkpoint skipped (logs changed meanwhile)")

    # -- partitions and topics ---------------------------------------------------------------

    def log_config_for(self, topic: TopicMetadata) -> Any:
        from odradek.storage import LogConfig

        if not topic.configs:
            return self._default_log_config
        return LogConfig.from_topic_config(topic.configs, self._default_log_config)

    def partition(
        self, topic: str, partition: int, *, create: bool = True
    ) -> PartitionHandle | None:
        """The handle of a partition this broker leads, or None if it does not exist. Its log
        is opened, or created empty when it has none yet (an internal topic's partitions get
        their logs on first use); with ``create=False`` a partition without a log gives None."""
        handle = self._partitions.get((topic, partition))
        if handle is not None:
            return handle
        meta = self.metadata.topic(topic)
        if meta is None or partition < 0 or partition >= meta.num_partitions:
            return None
        if not create and self.log_manager.get(topic, partition) is None:
            return None
        config = self.log_config_for(meta)
        plog = self.log_manager.get_or_create(topic, partition, config)
        handle = PartitionHandle(self, topic, partition, plog, config, meta.partitions[partition])
        self._partitions[(topic, partition)] = handle
        return handle

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
    ) -> TopicMetadata:
        """Create a topic and its partition logs (raises TopicExistsError). An ``internal``
        topic's logs are created lazily, each on its first use (``partition()``): the group
        coordinator creates ``__consumer_offsets`` (50 partitions) on the first group request
        and needs only the partition that group hashes to, and creating 50 directories and
        segments at once would block the event loop for 50-250 ms."""
        topic = self.metadata.create_topic(name, num_partitions, configs or {}, internal=internal)
        if not internal:
            for p in range(num_partitions):
                self.partition(name, p)
        return topic

    async def auto_create_topic(self, name: str) -> TopicMetadata | None:
        """Auto-create ``name`` with num.partitions partitions when auto.create.topics.enable."""
        if not self.config.auto_create_topics_enable:
            return None
        existing = self.metadata.topic(name)
        if existing is not None:
            return existing
        if name == "__consumer_offsets":
            return None
        log.info("auto-creating topic %r with %d partitions", name, self.config.num_partitions)
        return self.create_topic(name, self.config.num_partitions)

    def delete_topic(self, name: str) -> None:
        topic = self.metadata.delete_topic(name)
        for key in [k for k in self._partitions if k[0] == name]:
            handle = self._partitions.pop(key)
            self.purgatory.notify(name, key[1])
            del handle
        self.log_manager.delete_topic(name)
        if self.data_dir is not None:
            for p in range(topic.num_partitions):
                with contextlib.suppress(FileNotFoundError):
                    self._producer_state_path(name, p).unlink()

    def add_partitions(self, name: str, total: int) -> TopicMetadata:
        topic = self.metadata.add_partitions(name, total)
        for p in range(total):
            self.partition(name, p)
        return topic

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        """Replace a topic's overrides and apply them to its live logs."""
        topic = self.metadata.alter_configs(name, configs)
        config = self.log_config_for(topic)
        self.log_manager.update_config(name, config)
        for (t, _p), handle in self._partitions.items():
            if t == name:
                handle.config = config
        return topic

    def topic_configs(self, topic: TopicMetadata) -> dict[str, str]:
        return effective_topic_configs(self.config, topic.configs)

    def topic_configs_from(self, overrides: dict[str, str]) -> dict[str, str]:
        """Every topic config: ``overrides`` over the broker defaults."""
        return effective_topic_configs(self.config, overrides)

    def check_log_config(self, overrides: dict[str, str]) -> None:
        """Raise ValueError (storage's InvalidConfigError) if the overrides make a bad LogConfig."""
        from odradek.storage import LogConfig

        LogConfig.from_topic_config(overrides, self._default_log_config)

    # -- producer ids and producer state ----------------------------------------------------

    def _producer_id_path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / "odradek-producer-ids.json"

    def _load_producer_id_block(self) -> None:
        path = self._producer_id_path()
        if path is None or not path.exists():
            self.next_producer_id = 0
            self._producer_id_limit = 0
            return
        data = json.loads(path.read_text())
        self.next_producer_id = int(data["next"])
        self._producer_id_limit = self.next_producer_id

    def allocate_producer_id(self) -> int:
        """A new producer id; ids are reserved on disk in blocks of 1000 so they never repeat."""
        pid = self.next_producer_id
        self.next_producer_id += 1
        if self.next_producer_id > getattr(self, "_producer_id_limit", 0):
            self._producer_id_limit = self.next_producer_id + 1000
            path = self._producer_id_path()
            if path is not None:
                _atomic_write(path, json.dumps({"next": self._producer_id_limit}).encode())
        return pid

    def _producer_state_path(self, topic: str, partition: int) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "odradek-producer-state" / f"{topic}-{partition}.json"

    def _load_producer_state(self, handle: PartitionHandle) -> ProducerStateManager:
        state: ProducerStateManager | None = None
        plog = handle.log
        start = plog.log_start_offset
        if self.data_dir is not None:
            path = self._producer_state_path(handle.topic, handle.partition)
            if path.exists():
                try:
                    state = ProducerStateManager.from_snapshot(json.loads(path.read_text()))
                except Exception:
                    log.warning("ignoring unreadable producer state snapshot %s", path)
                    state = None
            if state is not None and not (start <= state.offset <= plog.log_end_offset):
                state = None
        if state is None:
            state = ProducerStateManager()
            state.offset = start
        _replay_producer_state(state, plog)
        state.dirty = True
        return state

    def _producer_state_payloads(self, force: bool = False) -> list[tuple[Path, bytes]]:
        """(path, JSON) of every producer state changed since its last snapshot (on the loop,
        so each is consistent: it covers every batch up to the log end offset)."""
        if self.data_dir is None:
            return []
        out: list[tuple[Path, bytes]] = []
        for handle in list(self._partitions.values()):
            ps = handle.loaded_producer_state()
            if ps is None or not (ps.dirty or force):
                continue
            ps.offset = max(ps.offset, handle.log.log_end_offset)
            path = self._producer_state_path(handle.topic, handle.partition)
            out.append((path, json.dumps(ps.snapshot()).encode()))
            ps.dirty = False
        return out

    def _snapshot_producer_states(self, force: bool = False) -> None:
        _write_payloads(self._producer_state_payloads(force))

    # -- connections -------------------------------------------------------------------------

    def _register(self, conn: KafkaConnection) -> int:
        self._next_connection_id += 1
        self._connections[self._next_connection_id] = conn
        return self._next_connection_id

    def _unregister(self, conn_id: int) -> None:
        self._connections.pop(conn_id, None)

    @property
    def connection_count(self) -> int:
        return len(self._connections)


def _replay_producer_state(state: ProducerStateManager, plog: Any) -> None:
    """Apply the batch headers in [state.offset, LEO) of ``plog`` to ``state``."""
    offset = state.offset
    end = plog.log_end_offset
    while offset < end:
        result = plog.read(offset, 1 << 20)
        records = result.records
        data = records.read() if hasattr(records, "read") else bytes(records)
        if not data:
            break
        pos = 0
        n = len(data)
        progressed = False
        while n - pos >= 61:
            base_offset, length = _BATCH_HEAD.unpack_from(data, pos)
            size = length + 12
            if pos + size > n:
                break
            (last_delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
            (attrs,) = _ATTR.unpack_from(data, pos + 21)
            pid, epoch, base_seq, _count = _PRODUCER_FIELDS.unpack_from(data, pos + 43)
            last = base_offset + last_delta
            if last >= offset:
                if attrs & 0x20:  # control batches carry no sequence
                    pid = base_seq = -1
                last_seq = (base_seq + last_delta) % (2**31) if base_seq >= 0 else -1
                state.update(pid, epoch, base_seq, last_seq, base_offset, last)
                offset = last + 1
                progressed = True
            pos += size
        if not progressed:
            break
    state.offset = max(state.offset, offset)


def _write_payloads(payloads: list[tuple[Path, bytes]]) -> None:
    for path, payload in payloads:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, payload, fsync=False)
        except OSError:
            log.exception("producer state snapshot %s failed", path)


def _atomic_write(path: Path, payload: bytes, fsync: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, payload)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


# -- connections ---------------------------------------------------------------------------------


class _Slot:
    """One response in a connection's ordered queue."""

    __slots__ = ("done", "parts")

    def __init__(self) -> None:
        self.done = False
        self.parts: list[Any] | None = None  # None: no response (acks=0) or connection closing


class KafkaConnection(asyncio.Protocol):
    """One client connection. See the module docstring for the rules."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.registry = broker.registry
        self.splitter = FrameDecoder(broker.config.socket_request_max_bytes)
        self.transport: asyncio.Transport | None = None
        self.connection_id = 0
        self.client_host = ""
        self._pending: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._sock_fd = -1
        self._paused = False

    # asyncio callbacks -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.broker._stopping:
            # accepted in the same loop turn as stop(): stop() has already aborted the
            # connections it knew of, so this one would never be closed
            self._closing = True
            transport.abort()  # type: ignore[attr-defined]
            return
        self.connection_id = self.broker._register(self)
        peer = transport.get_extra_info("peername")
        self.client_host = peer[0] if peer else ""
        with contextlib.suppress(Exception):
            transport.set_write_buffer_limits(high=4 * 1024 * 1024)  # type: ignore[attr-defined]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                self._sock_fd = sock.fileno()
            except Exception:
                self._sock_fd = -1

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self.broker._unregister(self.connection_id)
        for task in list(self._tasks):
            task.cancel()
        self._pending.clear()

    def pause_writing(self) -> None:
        # the client does not read its responses fast enough: stop reading its requests
        self._paused = True
        if self.transport is not None and not self._closing:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        if self.transport is not None and not self._closing:
            self.transport.resume_reading()

    def abort(self, reason: str | None) -> None:
        """Close at once, dropping unsent responses; ``reason`` is logged (None: shutdown)."""
        if reason is not None:
            log.warning(
                "closing connection %d from %s: %s", self.connection_id, self.client_host, reason
            )
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            frames = self.splitter.feed(data)
        except FrameTooLargeError as exc:
            self.abort(str(exc))
            return
        if not frames:
            return
        out: list[Any] = []
        for frame in frames:
            try:
                self._handle_frame(frame, out)
            except Exception:
                log.exception(
                    "unexpected error handling a request on connection %d", self.connection_id
                )
                self.abort("internal error")
                return
            if self._closing:
                break
        if out and not self._closing:
            self._write(out)

    # request handling --------------------------------------------------------------------

    def _route(self, api_key: int, version: int) -> tuple[ApiSpec, RequestCodec, bool] | str:
        """(spec, decoding info, whether the reader is kio's) for a request, or why the
        connection must be closed."""
        spec = self.registry.get(api_key)
        if spec is None:
            return f"unknown api key {api_key}"
        if version > spec.max_version or version < spec.oldest_served:
            return f"unsupported version {version} of api key {api_key} ({spec.name})"
        info = request_codec(api_key, version)
        if info is None:
            return f"cannot decode version {version} of api key {api_key} ({spec.name})"
        decoder = spec.extra.get("decoder")
        if decoder is not None:  # the API's own body decoder (frame, pos, version)
            return spec, info._replace(reader=functools.partial(decoder, version=version)), False
        return spec, info, True

    def _handle_frame(self, frame: memoryview, out: list[Any]) -> None:
        n = len(frame)
        if n < 10:
            self.abort(f"request header too short ({n} bytes)")
            return
        api_key, version, correlation_id = _HEADER.unpack_from(frame, 0)
        routes = self.broker._routes
        route = routes.get((api_key, version))
        if route is None:
            route = self._route(api_key, version)
            if isinstance(route, str) and api_key == 18 and api_key in self.registry:
                from odradek.broker.apis.api_versions import unsupported_version_body

                body = unsupported_version_body(self.registry)
                self._emit(out, [_I32.pack(len(body) + 4) + _I32.pack(correlation_id), body])
                return
            if len(routes) < 4096 and self.registry is self.broker.registry:
                routes[(api_key, version)] = route
        if isinstance(route, str):
            self.abort(route)
            return
        spec, info, kio_reader = route
        if kio_reader and not frame.readonly:  # kio decodes read-only buffers only
            frame = frame.toreadonly()
        try:
            header, pos = parse_request_header(frame, info.header_version)
        except InvalidRequestError as exc:
            self.abort(f"bad request header: {exc}")
            return
        try:
            request, _size = info.reader(frame, pos)
        except Exception as exc:
            self.abort(f"malformed {spec.name} v{version} request: {exc!r}")
            return
        ctx = RequestContext(self.broker, header, self.client_host, self.connection_id)
        coro: Any = spec.handler(ctx, request)
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            try:
                parts = self._encode(spec, info, correlation_id, stop.value, request)
            except Exception:
                log.exception("%s v%d response encoding failed", spec.name, version)
                parts = self._error(spec, info, correlation_id, request)
            self._emit(out, parts)
            return
        except Exception:
            log.exception("%s v%d handler failed", spec.name, version)
            self._emit(out, self._error(spec, info, correlation_id, request))
            return
        # the handler suspended: finish it in a task, answer in order
        slot = _Slot()
        self._pending.append(slot)
        task = asyncio.get_running_loop().create_task(_finish(coro, yielded))
        self._tasks.add(task)
        task.add_done_callback(
            lambda t: self._task_done(t, slot, spec, info, correlation_id, request)
        )

    def _task_done(
        self,
        task: asyncio.Task[Any],
        slot: _Slot,
        spec: ApiSpec,
        info: RequestCodec,
        correlation_id: int,
        request: Any,
    ) -> None:
        self._tasks.discard(task)
        if self._closing:
            return
        if task.cancelled():
            slot.parts = None
        else:
            exc = task.exception()
            if exc is not None:
                log.error("%s handler failed", spec.name, exc_info=exc)
                slot.parts = self._error(spec, info, correlation_id, request)
            else:
                try:
                    slot.parts = self._encode(spec, info, correlation_id, task.result(), request)
                except Exception:
                    log.exception("%s response encoding failed", spec.name)
                    slot.parts = self._error(spec, info, correlation_id, request)
        slot.done = True
        if self._closing:
            return
        out: list[Any] = []
        pending = self._pending
        while pending and pending[0].done:
            s = pending.popleft()
            if s.parts is _CLOSE:
                self.abort("handler failed without an error response")
                return
            if s.parts:
                out.extend(s.parts)
        if out:
            self._write(out)

    def _emit(self, out: list[Any], parts: list[Any] | None) -> None:
        if parts is _CLOSE:
            if self._pending:
                slot = _Slot()
                slot.parts = _CLOSE
                slot.done = True
                self._pending.append(slot)
            else:
                if out:
                    self._write(out)
                    out.clear()
                self.abort("handler failed without an error response")
            return
        if self._pending:
            slot = _Slot()
            slot.parts = parts
            slot.done = True
            self._pending.append(slot)
        elif parts:
            out.extend(parts)

    def _encode(
        self,
        spec: ApiSpec,
        info: RequestCodec,
        correlation_id: int,
        response: Any,
        request: Any,
    ) -> list[Any] | None:
        if response is None:
            return None
        header = encode_response_header(correlation_id, info.response_header_version)
        if isinstance(response, EncodedResponse):
            return [_I32.pack(len(header) + response.size) + header, *response.parts]
        body = encode_body(response)
        return [_I32.pack(len(header) + len(body)) + header + body]

    def _error(
        self, spec: ApiSpec, info: RequestCodec, correlation_id: int, request: Any
    ) -> list[Any]:
        make_error = spec.extra.get("error_response")
        if make_error is not None:
            try:
                from kio.schema.errors import ErrorCode

                response = make_error(request, ErrorCode.unknown_server_error)
                parts = self._encode(spec, info, correlation_id, response, request)
                if parts is not None:
                    return parts
            except Exception:
                log.exception("%s error response failed", spec.name)
        return _CLOSE

    # writing -----------------------------------------------------------------------------

    def _write(self, parts: list[Any]) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        chunk: list[Any] = []
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                chunk.append(part)
                continue
            # a FileRegion
            length = part.length
            if length == 0:
                continue
            if USE_SENDFILE and length >= SENDFILE_MIN and self._sock_fd >= 0:
                if chunk:
                    transport.writelines(chunk)
                    chunk = []
                if transport.get_write_buffer_size() == 0:
                    sent = self._sendfile(part.fd, part.position, length)
                    if sent < length:
                        chunk.append(os.pread(part.fd, length - sent, part.position + sent))
                    continue
            chunk.append(part.read())
        if chunk:
            transport.writelines(chunk)

    def _sendfile(self, fd: int, position: int, length: int) -> int:
        sent = 0
        while sent < length:
            try:
                n = os.sendfile(self._sock_fd, fd, position + sent, length - sent)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                if exc.errno == errno.EINTR:
                    continue
                break
            if n == 0:
                break
            sent += n
        return sent


_CLOSE: Any = ["__close__"]


async def _finish(coro: Any, yielded: Any) -> Any:
    """Continue a handler coroutine that suspended on ``yielded`` (as a Task would)."""
    try:
        while True:
            if yielded is None:
                await asyncio.sleep(0)
            else:
                yielded._asyncio_future_blocking = False
                await asyncio.wait((yielded,))
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                return stop.value
    except BaseException:
        coro.close()
        raise
