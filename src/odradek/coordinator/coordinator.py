"""GroupCoordinator: the I/O around ``GroupMetadataManager``.

It owns the internal topic ``__consumer_offsets`` (``offsets.topic.num.partitions``
partitions, compacted, created on the first group request, as Kafka does; each partition's
log is created when a group hashing to it first writes), decides which partition holds a group
(``partition_for``: abs(Java hashCode(group id)) % n), loads every partition at start by
replaying its records (groups of a partition not loaded yet answer
COORDINATOR_LOAD_IN_PROGRESS), persists the records each handler returns before answering,
and drives the timers (session timeouts, rebalance timeouts, the initial rebalance delay,
SyncGroup timeouts, offsets retention) from one asyncio task using the broker's clock.

Durability of commits. A commit is acknowledged after its records were written to the
partition log with one write call (in the page cache: it survives ``kill -9`` of the broker)
and replayed. That is Kafka's own contract for a single broker (Kafka relies on replication,
not fsync; ``log.flush.interval.messages`` defaults to never). The knob is Kafka's topic
config ``flush.messages`` on ``__consumer_offsets``: with ``flush.messages=1`` every commit
is also fsynced before it is acknowledged. Then commits that arrive together are grouped
(group commit): one append per partition and one fsync per log for all of them. In a
cluster (``follow_partition_leadership``) commits go through the same group commit and are
acknowledged once the partition's ISR has them (acks=all, ``PartitionWriter.wait_replicated``).

Snapshots. Storage does not compact ``__consumer_offsets``, so without help every commit
would be replayed at every start. When a partition has had many more records appended than
its live state holds (``snapshot_min_records``, ``snapshot_live_factor``), the coordinator
appends its live state again (each group's last GroupMetadataValue and its offsets: a
snapshot), fsyncs, and records the snapshot's first offset in
``<data dir>/coordinator-snapshot-checkpoint`` (JSON, written with fsync + rename). Loading
replays a partition from its latest snapshot (or from the log start offset when there is
none), which gives the same state as replaying everything. Disk space is reclaimed only once
storage can drop a log's prefix (compaction, or deleting records below an offset).

What it needs from the broker is a ``PartitionWriter`` (writer.py): ensure the internal topic,
read a partition's log, append a batch, flush, the leader's address, and a high-watermark
listener. Its settings come as a typed ``CoordinatorConfig``; time from an injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.clock import Clock
from odradek.coordinator.group_manager import (
    GroupMetadataManager,
    GroupSummary,
    JoinParams,
    OffsetCommitEntry,
    Outcome,
)
from odradek.coordinator.records import (
    OffsetAndMetadata,
    OffsetCommitRecord,
    Record,
    build_batch,
    decode_record,
    encode_offset_commit_key,
    encode_offset_commit_value,
    encode_record,
    partition_for,
)
from odradek.coordinator.state import Errors, GroupConfig, JoinResult, SyncResult, Waiter
from odradek.coordinator.writer import PartitionWriter
from odradek.protocol.records import RecordBatch, encode_records, finish_batch
from odradek.storage.checkpoint import write_atomic
from odradek.storage.scan import scan_to_end
from odradek.storage.transaction_index import ControlRecordType, parse_control_record

__all__ = ["OFFSETS_TOPIC", "CoordinatorConfig", "GroupCoordinator"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
SNAPSHOT_CHECKPOINT = "coordinator-snapshot-checkpoint"
_SNAPSHOT_BATCH = 2000
_READ_CHUNK = 4 << 20
_MAX_TIMER_SLEEP_S = 0.25


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The coordinator's settings (broker config keys in the comments)."""

    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_segment_bytes: int = 104857600  # offsets.topic.segment.bytes
    offsets_topic_compression_codec: int = 0  # offsets.topic.compression.codec (0 none .. 4 zstd)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    group: GroupConfig = field(default_factory=GroupConfig)
    checkpoint_dir: Path | None = None
    """Where ``coordinator-snapshot-checkpoint`` lives (None: in memory only)."""


class GroupCoordinator:
    """The group coordinator of one broker (this broker coordinates every group)."""

    def __init__(self, writer: PartitionWriter, settings: CoordinatorConfig, clock: Clock) -> None:
        self.writer = writer
        self.settings = settings
        self.clock = clock
        self.num_partitions = settings.offsets_topic_num_partitions
        self.retention_check_interval_ms = settings.offsets_retention_check_interval_ms
        self.config = settings.group
        self.manager = GroupMetadataManager(self.config)
        self._loaded: set[int] = set()
        self._running = False
        self._tasks: list[asyncio.Task[None]] = []
        self._wake: asyncio.Event | None = None
        self._writer_wake: asyncio.Event | None = None
        self._pending_writes: list[tuple[list[Record], asyncio.Future[None]]] = []
        self._loaded_event: asyncio.Event | None = None
        # Snapshots: a partition that has had more than snapshot_min_records appended since its
        # last snapshot, and more than snapshot_live_factor times the records of its live state,
        # gets its live state appended again; loading starts from the latest snapshot.
        self.snapshot_min_records = 10_000
        self.snapshot_live_factor = 2
        self._since_snapshot: dict[int, int] = {}
        self._next_snapshot_check: dict[int, int] = {}
        self._snapshot_offsets: dict[int, int] = {}
        self.loaded_from: dict[int, int] = {}
        self.snapshots_written = 0
        self._partition_cache: dict[str, int] = {}
        self._topic_ready = False
        self._key_cache: dict[tuple[str, str, int], bytes] = {}
        self.commits_persisted = 0
        self.fsyncs = 0
        # In a cluster (follow_partition_leadership): only the __consumer_offsets partitions
        # this broker leads are served; a partition is loaded when it becomes led here.
        self._partitioned = False
        self._loading: set[int] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._writer_wake = asyncio.Event()
        self._loaded_event = asyncio.Event()
        count = self.writer.partition_count(OFFSETS_TOPIC)
        self._running = True
        loop = asyncio.get_running_loop()
        if self._partitioned:
            # nothing is served until LeaderAndIsr makes this broker lead a partition
            if count is not None:
                self.num_partitions = count
            self._loaded = set()
            self._loaded_event.set()
        elif count is not None:
            self.num_partitions = count
            self._topic_ready = True
            self._tasks.append(loop.create_task(self._load_all(), name="coordinator-load"))
        else:
            # Created on first use, as Kafka does: creating 50 partition logs would cost a
            # first `odradek broker` start most of its one-second budget. Nothing to load.
            self._loaded = set(range(self.num_partitions))
            self._loaded_event.set()
        self._tasks.append(loop.create_task(self._timer_loop(), name="coordinator-timers"))
        self._tasks.append(loop.create_task(self._writer_loop(), name="coordinator-writer"))

    async def stop(self) -> None:
        self._running = False
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for _records, fut in self._pending_writes:
            if not fut.done():
                fut.set_exception(RuntimeError("coordinator stopped"))
        self._pending_writes.clear()
        for group in self.manager.groups.values():
            for m in list(group.members.values()):
                m.complete_join(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, member_id=m.member_id))
                m.complete_sync(SyncResult(Errors.COORDINATOR_NOT_AVAILABLE))
        for p in range(self.num_partitions):
            with contextlib.suppress(Exception):
                self.writer.flush(OFFSETS_TOPIC, p)

    async def wait_loaded(self) -> None:
        assert self._loaded_event is not None
        await self._loaded_event.wait()

    @property
    def is_loading(self) -> bool:
        if self._partitioned:
            return bool(self._loading)
        return len(self._loaded) < self.num_partitions

    # -- in a cluster: follow the leadership of __consumer_offsets -----------------------------

    def follow_partition_leadership(self) -> None:
        """Serve only the ``__consumer_offsets`` partitions this broker leads (call before
        ``start``): groups of other partitions get NOT_COORDINATOR, a partition is loaded from
        its log when it becomes led here (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and unloaded
        when it stops being led (Kafka's onElection / onResignation)."""
        self._partitioned = True

    def on_leadership_change(
        self, became_leader: Sequence[int], became_follower: Sequence[int]
    ) -> None:
        """``__consumer_offsets`` partitions that became led here, or stopped being led."""
        for p in became_follower:
            self._unload_partition(p)
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        for p in became_leader:
            if p in self._loaded or p in self._loading:
                self._unload_partition(p)  # a new leader epoch: load again from the log
            self._loading.add(p)
            task = loop.create_task(self._load_led_partition(p), name=f"coordinator-load-{p}")
            self._tasks.append(task)

    async def wait_partitions_loaded(self) -> None:
        """Wait until the partitions that became led here so far are loaded (tests, console)."""
        pending = [t for t in self._tasks if t.get_name().startswith("coordinator-load-")]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _load_led_partition(self, p: int) -> None:
        try:
            await self._load_partition(p)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, p)
        finally:
            self._loading.discard(p)
            current = asyncio.current_task()
            if current in self._tasks:
                self._tasks.remove(current)

    def _unload_partition(self, p: int) -> None:
        self._loaded.discard(p)
        self._loading.discard(p)
        for gid in [g for g in self.manager.groups if self.partition_for(g) == p]:
            group = self.manager.groups.pop(gid)
            for m in list(group.members.values()):
                m.complete_join(JoinResult(Errors.NOT_COORDINATOR, member_id=m.member_id))
                m.complete_sync(SyncResult(Errors.NOT_COORDINATOR))

    def _ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet (first group request)."""
        if self._topic_ready:
            return
        count = self.writer.partition_count(OFFSETS_TOPIC)
        if count is None:
            log.info("creating %s with %d partitions", OFFSETS_TOPIC, self.num_partitions)
            segment_bytes = self.settings.offsets_topic_segment_bytes
            count = self.writer.ensure_internal_topic(
                OFFSETS_TOPIC,
                self.num_partitions,
                {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)},
            )
        if count != self.num_partitions:
            raise RuntimeError(f"{OFFSETS_TOPIC} appeared with {count} partitions")
        self._topic_ready = True

    def partition_for(self, group_id: str) -> int:
        p = self._partition_cache.get(group_id)
        if p is None:
            if len(self._partition_cache) > 100_000:
                self._partition_cache.clear()
            p = self._partition_cache[group_id] = partition_for(group_id, self.num_partitions)
        return p

    def _group_error(self, group_id: str) -> Errors | None:
        """COORDINATOR_NOT_AVAILABLE when stopped, LOAD_IN_PROGRESS while the group's
        partition of __consumer_offsets is being loaded."""
        if not self._running:
            return Errors.COORDINATOR_NOT_AVAILABLE
        p = self.partition_for(group_id)
        if p not in self._loaded:
            if self._partitioned and p not in self._loading:
                return Errors.NOT_COORDINATOR
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if not self._topic_ready:
            self._ensure_topic()
        return None

    def coordinator_for(self, key: str) -> tuple[Errors, int, str, int]:
        """(error, node id, host, port) of the coordinator of group ``key``: the leader of its
        ``__consumer_offsets`` partition (this broker)."""
        if self._partitioned:  # the leader answers LOAD_IN_PROGRESS itself while loading
            error = Errors.NONE if self._running else Errors.COORDINATOR_NOT_AVAILABLE
            if self.writer.partition_count(OFFSETS_TOPIC) is None:
                return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        else:
            error = self._group_error(key) or Errors.NONE
        leader = self.writer.leader(OFFSETS_TOPIC, self.partition_for(key))
        if leader is None:
            return Errors.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        node_id, host, port = leader
        return error, node_id, host, port

    # -- loading ------------------------------------------------------------------------------

    def _checkpoint_path(self) -> Path | None:
        directory = self.settings.checkpoint_dir
        return None if directory is None else directory / SNAPSHOT_CHECKPOINT

    def _read_checkpoint(self) -> dict[int, int]:
        path = self._checkpoint_path()
        if path is None or not path.exists():
            return {}
        try:
            data = json.loads(path.read_text())
            return {int(p): int(o) for p, o in data["partitions"].items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring %s: %s", path, exc)
            return {}

    def _write_checkpoint(self) -> None:
        path = self._checkpoint_path()
        if path is None:
            return
        payload = json.dumps(
            {
                "version": 1,
                "partitions": {str(p): o for p, o in sorted(self._snapshot_offsets.items())},
            }
        )
        write_atomic(path, payload.encode())

    async def _load_all(self) -> None:
        assert self._loaded_event is not None
        self._snapshot_offsets = self._read_checkpoint()
        try:
            for p in range(self.num_partitions):
                await self._load_partition(p)
        finally:
            self._loaded_event.set()

    async def _load_partition(self, p: int) -> None:
        # a partition without a log (never used: logs are created on first append) is empty
        plog = self.writer.log(OFFSETS_TOPIC, p)
        touched: set[str] = set()
        if plog is not None:
            offset = plog.log_start_offset
            snapshot = self._snapshot_offsets.get(p)
            if snapshot is not None and offset <= snapshot <= plog.log_end_offset:
                offset = snapshot
            else:
                self._snapshot_offsets.pop(p, None)
            self.loaded_from[p] = offset
            self._since_snapshot[p] = plog.log_end_offset - offset
            count = 0
            for batches in scan_to_end(plog, offset, _READ_CHUNK):
                for batch in batches:
                    if batch.is_transactional:
                        count += self._load_transactional(p, batch, offset)
                    elif not batch.is_control:
                        for rec in batch.records():
                            if rec.offset < offset:
                                continue
                            try:
                                record = decode_record(rec.key, rec.value)
                            except (ValueError, UnicodeDecodeError) as exc:
                                log.warning(
                                    "__consumer_offsets-%d offset %d: %s", p, rec.offset, exc
                                )
                                continue
                            if record is not None:
                                self.manager.replay(record, loading=True)
                                touched.add(record.group_id)
                                count += 1
                    offset = batch.last_offset + 1
                await asyncio.sleep(0)
            if count:
                log.info(
                    "loaded %d records of %d groups from %s-%d",
                    count,
                    len(touched),
                    OFFSETS_TOPIC,
                    p,
                )
        self.manager.finish_loading(touched, self.clock.now_ms())
        self._loaded.add(p)

    def _load_transactional(self, p: int, batch: RecordBatch, offset: int) -> int:
        """Loading: a TxnOffsetCommit batch (pending offsets) or a transaction marker."""
        count = 0
        pid = batch.producer_id
        for rec in batch.records():
            if rec.offset < offset:
                continue
            try:
                if batch.is_control:
                    kind, _ = parse_control_record(rec.key, rec.value)
                    if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                        self.manager.complete_txn_offsets(p, pid, kind == ControlRecordType.COMMIT)
                    continue
                record = decode_record(rec.key, rec.value)
            except (ValueError, UnicodeDecodeError) as exc:
                log.warning("__consumer_offsets-%d offset %d: %s", p, rec.offset, exc)
                continue
            if isinstance(record, OffsetCommitRecord):
                self.manager.replay_txn_offset(p, pid, record, rec.offset)
                count += 1
        return count

    # -- persistence ----------------------------------------------------------------------------

    def _fsync_commits(self) -> bool:
        return str(self.writer.topic_configs(OFFSETS_TOPIC).get("flush.messages", "")) == "1"

    def _encode(self, r: Record) -> tuple[bytes, bytes | None]:
        if isinstance(r, OffsetCommitRecord) and r.value is not None:
            ck = (r.group_id, r.topic, r.partition)
            key = self._key_cache.get(ck)
            if key is None:
                if len(self._key_cache) > 100_000:
                    self._key_cache.clear()
                key = self._key_cache[ck] = encode_offset_commit_key(*ck)
            return key, encode_offset_commit_value(r.value)
        return encode_record(r)

    def _append(self, records: Sequence[Record]) -> set[int]:
        """Append records, one batch per partition, each with one write call."""
        now = self.clock.now_ms()
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for r in records:
            by_partition.setdefault(self.partition_for(r.group_id), []).append(self._encode(r))
        for p, pairs in by_partition.items():
            self.writer.append(
                OFFSETS_TOPIC,
                p,
                build_batch(pairs, now, self.settings.offsets_topic_compression_codec),
            )
            self._since_snapshot[p] = self._since_snapshot.get(p, 0) + len(pairs)
        return set(by_partition)

    def maybe_snapshot(self) -> list[int]:
        """Snapshot every partition whose log has outgrown its live state; returns them."""
        done = []
        for p, n in list(self._since_snapshot.items()):
            if n < max(self.snapshot_min_records, self._next_snapshot_check.get(p, 0)):
                continue
            gids = [gid for gid in self.manager.groups if self.partition_for(gid) == p]
            live = sum(1 + len(self.manager.groups[gid].offsets) for gid in gids)
            if n <= self.snapshot_live_factor * live:
                self._next_snapshot_check[p] = self.snapshot_live_factor * live + 1
                continue
            self._snapshot(p, gids)
            done.append(p)
        return done

    def _snapshot(self, p: int, group_ids: list[str]) -> None:
        plog = self.writer.log(OFFSETS_TOPIC, p)
        base = 0 if plog is None else plog.log_end_offset
        records = self.manager.snapshot(group_ids)
        now = self.clock.now_ms()
        for i in range(0, len(records), _SNAPSHOT_BATCH):
            pairs = [self._encode(r) for r in records[i : i + _SNAPSHOT_BATCH]]
            self.writer.append(
                OFFSETS_TOPIC,
                p,
                build_batch(pairs, now, self.settings.offsets_topic_compression_codec),
            )
        self.writer.flush(OFFSETS_TOPIC, p)
        self._snapshot_offsets[p] = base
        self._since_snapshot[p] = 0
        self._next_snapshot_check.pop(p, None)
        self._write_checkpoint()
        self.snapshots_written += 1
        log.info("%s-%d: snapshot of %d records at offset %d", OFFSETS_TOPIC, p, len(records), base)

    async def _persist(self, records: list[Record]) -> None:
        """Make ``records`` durable (see module docstring), then replay them."""
        if not records:
            return
        if not self._fsync_commits() and not self._partitioned:
            self._append(records)
            for r in records:
                self.manager.replay(r)
            return
        assert self._writer_wake is not None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending_writes.append((records, fut))
        self._writer_wake.set()
        await fut

    async def _writer_loop(self) -> None:
        """Group commit: everything queued since the last round -> one append + fsync per log."""
        assert self._writer_wake is not None
        while True:
            await self._writer_wake.wait()
            self._writer_wake.clear()
            pending, self._pending_writes = self._pending_writes, []
            if not pending:
                continue
            all_records = [r for records, _ in pending for r in records]
            try:
                partitions = self._append(all_records)
                if self._fsync_commits():
                    for p in partitions:
                        self.writer.flush(OFFSETS_TOPIC, p)
                        self.fsyncs += 1
                if self._partitioned:  # in a cluster: committed by the ISR (acks=all)
                    for p in partitions:
                        plog = self.writer.log(OFFSETS_TOPIC, p)
                        end = plog.log_end_offset if plog is not None else 0
                        if not await self.writer.wait_replicated(OFFSETS_TOPIC, p, end):
                            raise RuntimeError(f"{OFFSETS_TOPIC}-{p}: not replicated in time")
            except Exception as exc:
                log.exception("writing to %s failed", OFFSETS_TOPIC)
                for _, fut in pending:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for r in all_records:
                self.manager.replay(r)
            for _, fut in pending:
                if not fut.done():
                    fut.set_result(None)

    async def _apply(self, outcome: Outcome[Any]) -> Any:
        """Persist an outcome's records, then return its response (awaiting a parked one)."""
        if outcome.records:
            await self._persist(outcome.records)
        if outcome.waiter is not None:
            return await self._wait(outcome.waiter)
        return outcome.response

    async def _wait(self, waiter: Waiter[Any]) -> Any:
        if waiter.done:
            return waiter.result
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any) -> None:
            if not fut.done():
                fut.set_result(result)

        waiter.add_done_callback(done)
        return await fut

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # -- timers --------------------------------------------------------------------------------

    async def run_timers(self) -> None:
        """Fire due timers now (the timer task calls this; tests with a ManualClock may too)."""
        now = self.clock.now_ms()
        records = self.manager.tick(now)
        if records:
            await self._persist(records)

    async def expire_offsets(self) -> int:
        records = self.manager.expire_offsets(self.clock.now_ms())
        if records:
            await self._persist(records)
        return len(records)

    async def _timer_loop(self) -> None:
        assert self._wake is not None
        next_expiry = self.clock.monotonic() + self.retention_check_interval_ms / 1000
        while True:
            try:
                if not self.is_loading:
                    await self.run_timers()
                    self.maybe_snapshot()
                    if self.clock.monotonic() >= next_expiry:
                        next_expiry = (
                            self.clock.monotonic() + self.retention_check_interval_ms / 1000
                        )
                        await self.expire_offsets()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group coordinator timers failed")
            deadline = self.manager.next_deadline_ms()
            sleep = _MAX_TIMER_SLEEP_S
            if deadline is not None:
                sleep = min(max((deadline - self.clock.now_ms()) / 1000, 0.002), sleep)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), sleep)

    # -- the API ---------------------------------------------------------------------------------

    async def join_group(self, params: JoinParams) -> JoinResult:
        error = self._group_error(params.group_id)
        if error is not None:
            return JoinResult(error, member_id=params.member_id)
        outcome = self.manager.join_group(params, self.clock.now_ms())
        self._kick()
        result: JoinResult = await self._apply(outcome)
        return result

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Sequence[tuple[str, bytes]],
    ) -> SyncResult:
        error = self._group_error(group_id)
        if error is not None:
            return SyncResult(error)
        outcome = self.manager.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
            self.clock.now_ms(),
        )
        result: SyncResult = await self._apply(outcome)
        return result

    async def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> Errors:
        error = self._group_error(group_id)
        if error is not None:
            return error
        return self.manager.heartbeat(
            group_id, generation_id, member_id, group_instance_id, self.clock.now_ms()
        )

    async def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[Errors, list[Errors]]:
        error = self._group_error(group_id)
        if error is not None:
            return error, [error] * len(members)
        outcome = self.manager.leave_group(group_id, members, self.clock.now_ms())
        self._kick()
        errors: list[Errors] = await self._apply(outcome)
        return Errors.NONE, errors

    def _topic_partition_exists(self, topic: str, partition: int) -> bool:
        count = self.writer.partition_count(topic)
        return count is not None and 0 <= partition < count

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
    ) -> list[Errors]:
        error = self._group_error(group_id)
        if error is not None:
            return [error] * len(entries)
        exists = [self._topic_partition_exists(e.topic, e.partition) for e in entries]
        known = [e for e, ok in zip(entries, exists, strict=True) if ok]
        outcome = self.manager.commit_offsets(
            group_id, generation_id, member_id, group_instance_id, known, self.clock.now_ms()
        )
        errors: list[Errors] = await self._apply(outcome)
        self.commits_persisted += 1
        if len(known) == len(entries):
            return errors
        it = iter(errors)
        return [next(it) if ok else Errors.UNKNOWN_TOPIC_OR_PARTITION for ok in exists]

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        entries: Sequence[OffsetCommitEntry],
    ) -> list[Errors]:
        """TxnOffsetCommit (28): the offsets are appended to the group's partition as a
        transactional batch of the producer and stay pending (invisible to OffsetFetch) until
        the transaction's marker reaches that partition (``complete_txn_offsets``)."""
        error = self._group_error(group_id)
        if error is not None:
            return [error] * len(entries)
        exists = [self._topic_partition_exists(e.topic, e.partition) for e in entries]
        known = [e for e, ok in zip(entries, exists, strict=True) if ok]
        outcome = self.manager.txn_commit_offsets(
            group_id, generation_id, member_id, group_instance_id, known, self.clock.now_ms()
        )
        records = outcome.records
        if records:
            p = self.partition_for(group_id)
            now = self.clock.now_ms()
            data, count, max_ts = encode_records(
                ((k, v, (), now) for k, v in (self._encode(r) for r in records)), now
            )
            batch = finish_batch(
                data,
                count,
                now,
                max_ts,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                attributes=0x10,  # transactional
            )
            base = self.writer.append(OFFSETS_TOPIC, p, batch)
            if self._fsync_commits():
                self.writer.flush(OFFSETS_TOPIC, p)
            for i, r in enumerate(records):
                if isinstance(r, OffsetCommitRecord):
                    self.manager.replay_txn_offset(p, producer_id, r, base + i)
        errors = outcome.response
        assert errors is not None
        if len(known) == len(entries):
            return errors
        it = iter(errors)
        return [next(it) if ok else Errors.UNKNOWN_TOPIC_OR_PARTITION for ok in exists]

    def complete_txn_offsets(
        self, partition: int, producer_id: int, committed: bool, marker_offset: int
    ) -> None:
        """A transaction marker was appended to ``__consumer_offsets``-``partition`` (called
        by the broker's marker writer). A partition still loading replays it from the log."""
        if partition in self._loaded:
            self.manager.complete_txn_offsets(partition, producer_id, committed)

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        return self.manager.has_pending_txn_offset(group_id, topic, partition)

    def fetch_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[Errors, list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]]:
        error = self._group_error(group_id)
        if error is not None:
            return error, []
        return Errors.NONE, self.manager.fetch_offsets(group_id, topics)

    def list_groups(
        self, states_filter: Sequence[str] = (), types_filter: Sequence[str] = ()
    ) -> tuple[Errors, list[tuple[str, str, str, str]]]:
        if not self._running:
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        if self.is_loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, []
        return Errors.NONE, self.manager.list_groups(states_filter, types_filter)

    def describe_groups(self, group_ids: Sequence[str]) -> list[tuple[Errors, GroupSummary]]:
        out = []
        for gid in group_ids:
            error = self._group_error(gid)
            if error is not None:
                out.append((error, GroupSummary(gid, "", "", "", ())))
            else:
                out.append((Errors.NONE, self.manager.describe_group(gid)))
        return out

    async def delete_groups(self, group_ids: Sequence[str]) -> list[Errors]:
        errors: list[Errors | None] = [self._group_error(gid) for gid in group_ids]
        ready = [gid for gid, e in zip(group_ids, errors, strict=True) if e is None]
        outcome = self.manager.delete_groups(ready, self.clock.now_ms())
        results: list[Errors] = await self._apply(outcome)
        it = iter(results)
        return [e if e is not None else next(it) for e in errors]

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[Errors, list[Errors]]:
        error = self._group_error(group_id)
        if error is not None:
            return error, []
        outcome = self.manager.delete_offsets(group_id, partitions)
        result: tuple[Errors, list[Errors]] = await self._apply(outcome)
        return result
