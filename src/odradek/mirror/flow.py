"""One replication flow ``source->target``, on ``odradek.client.aio``.

A ``Flow`` runs these tasks on one event loop until ``stop()``:

* **copy** — a consumer assigned to every partition of every replicated source topic copies
  batches of records (key, value, headers, timestamp, partition) to the remote topics with
  ``send_batch`` (per-partition order is the consumer's order; the same partition number).
* **topics** — every ``refresh.topics.interval.seconds``: new source topics and partitions are
  created on the target (the source's partition count, ``replication.factor``, the source's
  non-default configs minus ``config.properties.exclude``) and assigned to the consumer; every
  ``sync.topic.configs.interval.seconds`` config changes are copied.
* **ACLs** — at start and every ``sync.topic.acls.interval.seconds``, the source's topic ACLs
  are created on the target as MM2 does (``odradek.mirror.acls``); a source without an
  authorizer (SECURITY_DISABLED) is said once and skipped.
* **offset syncs** — written to ``mm2-offset-syncs.<target>.internal`` on the source
  (``offset-syncs.topic.location = target``: on the target) as ``SyncEmitter`` decides.
* **checkpoints** — every ``emit.checkpoints.interval.seconds``, each selected source group's
  committed offsets, translated by the ``OffsetSyncStore`` (which reads the sync topic back),
  become ``Checkpoint`` records in ``<source>.checkpoints.internal`` on the target; with
  ``sync.group.offsets.enabled`` the translated offsets are also committed to the target's
  group when it has no active member, never moving it backwards.
* **heartbeats** — ``Heartbeat(source, target, now)`` in ``heartbeats`` on the target every
  ``emit.heartbeats.interval.seconds``.
* **progress** — one log line every ``log.progress.interval.seconds`` (records/s, lag, age of the
  newest record copied).

Source positions: the next source offset to copy for each partition is kept on the *target*, as
the committed offset of group ``__mirror.<source>-><target>`` for the remote topic's partition
(same number). Every process of the flow is a member of that group (subscribed to the remote
topics, never fetching): its assignment is the set of partitions the process copies, and a
process given a partition starts at the offset recorded for it (read with ``require_stable``).
With ``exactly.once.source.support = enabled`` each batch and its positions are one transaction
on the target (``transactional.id`` ``__mirror.<source>-><target>.<instance>``;
``send_offsets_to_transaction`` with the member's generation, so a process that lost the
partitions is refused, KIP-447), so on restart (after ``init_transactions`` fenced the previous
incarnation and aborted its open transaction) the positions read back are exactly those of the
records that are visible. Without it, positions are committed after the records are
acknowledged, so a crash repeats at most the records copied since the last commit.
Each position's commit metadata is ``hw=<source high watermark>`` as the consumer last saw it,
so a console on the target shows the flow's lag (``hw`` minus the position) without talking to
the source or to the mirror.

Invariant: ``_lock`` is held from the first poll of a batch to its positions being recorded, and
by every rebalance callback, so partitions never change hands in the middle of a batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.client import KafkaError, OffsetAndMetadata, TopicPartition
from odradek.client.aio import (
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    ConsumerRebalanceListener,
    NewTopic,
)
from odradek.client.avro import SchemaRegistryError
from odradek.client.errors import KafkaTimeoutError, ProducerFencedError

from .acls import ANY_TOPIC_ACL, target_acl_bindings
from .config import FlowConfig
from .offsets import OffsetSyncStore, SyncEmitter
from .records import Checkpoint, Heartbeat, OffsetSync, RecordFormatError
from .schemas import SchemaIdRewriter, UnknownSchemaId

__all__ = ["Flow", "FlowStats", "PartitionMetrics", "Window", "positions_group", "run_flows", "transactional_id"]

log = logging.getLogger("odradek.mirror")

SECURITY_DISABLED = 54  # Kafka's error codes: the cluster has no authorizer,
UNSUPPORTED_VERSION = 35  # or no version of the API this client speaks
TXN_MAX_RECORDS = 20_000  # records per transaction (or per positions commit without EOS) at most
TXN_MAX_SECONDS = 0.2  # how long a transaction gathers records at most
ALO_COMMIT_SECONDS = 1.0  # how often positions are committed without EOS
RETRY_BACKOFF_MAX = 30.0
DELETION_CHECK_SECONDS = 5.0


def positions_group(flow: FlowConfig) -> str:
    """The target group whose committed offsets are the flow's source positions."""
    return f"__mirror.{flow.source}->{flow.target}"


def transactional_id(flow: FlowConfig, task: int = 0) -> str:
    return f"__mirror.{flow.source}->{flow.target}.{task}"


@dataclass
class FlowStats:
    """Counters of one flow (read by the progress line and /metrics)."""

    records: int = 0
    bytes: int = 0
    transactions: int = 0
    aborted: int = 0
    errors: int = 0
    offset_syncs: int = 0
    checkpoints: int = 0
    heartbeats: int = 0
    group_offsets_synced: int = 0
    acls_synced: int = 0  # ACL bindings the target accepted (created or already there)
    schema_id_errors: int = 0  # framed keys/values whose id the source registry does not know
    newest_timestamp: int = -1
    last_checkpoint_ms: int = -1
    partitions: dict[TopicPartition, PartitionMetrics] = field(default_factory=dict)  # by remote partition
    checkpoint_latency_ms: dict[tuple[str, TopicPartition], float] = field(default_factory=dict)


@dataclass
class Window:
    """last / min / max / sum / count of a millisecond measure (MM2's -ms, -avg, -min, -max)."""

    last: float = 0.0
    min: float = float("inf")
    max: float = 0.0
    sum: float = 0.0
    count: int = 0

    def add(self, lo: float, hi: float, total: float, n: int, last: float) -> None:
        self.last = last
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)
        self.sum += total
        self.count += n

    @property
    def avg(self) -> float:
        return self.sum / self.count if self.count else 0.0


@dataclass
class PartitionMetrics:
    """MM2's MirrorSourceConnector metrics of one remote partition: record-count, byte-count,
    record-age-ms (record timestamp to poll), replication-latency-ms (record timestamp to the
    target's acknowledgement)."""

    record_count: int = 0
    byte_count: int = 0
    record_age_ms: Window = field(default_factory=Window)
    replication_latency_ms: Window = field(default_factory=Window)


def _client(cfg: Any, kind: str, extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(extra)
    out.update(cfg[kind])
    return out


class Flow:
    """One ``source->target`` flow. ``await run()`` until ``stop()``."""

    def __init__(self, cfg: FlowConfig, *, progress_interval: float = 5.0, instance: int = 0) -> None:
        self.cfg = cfg
        self.instance = instance
        self.policy = cfg.policy
        self.stats = FlowStats()
        self.progress_interval = progress_interval
        self._stop = asyncio.Event()
        self._group = positions_group(cfg)
        self._eos = cfg.exactly_once
        self._topics: dict[str, int] = {}  # replicated source topic -> partition count
        self._remote: dict[str, str] = {}  # source topic -> remote topic
        self._emitters: dict[TopicPartition, SyncEmitter] = {}
        self._store = OffsetSyncStore()
        self._sync_topic = self.policy.offset_syncs_topic(cfg.target)
        self._checkpoints_topic = self.policy.checkpoints_topic(cfg.source)
        self._last_checkpoints: dict[tuple[str, TopicPartition], tuple[int, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = asyncio.Event()  # set once copying has started
        self._polled_ms = 0.0
        self._lock = asyncio.Lock()  # held for a whole batch (gather + copy + positions) and by rebalances
        self._pending: dict[TopicPartition, int] = {}  # at least once: positions not yet committed
        self._source_hw: dict[TopicPartition, int] = {}  # by remote partition: the position's metadata
        self._abort_backoff = 0.0
        self.schemas: SchemaIdRewriter | None = None
        self._schema_backoff = 0.0
        self._acls_known: set[Any] = set()  # bindings the target accepted
        self._acls_refused: set[Any] = set()  # bindings the target refused (said once each)
        self._acls_off = False  # the source has no authorizer (said once)
        self._acls_target_off = False  # the target has no authorizer (said once)
        self._previous_member = ""  # member id of the last run's membership consumer
        if cfg.translates_schema_ids:
            assert cfg.source_registry and cfg.target_registry
            self.schemas = SchemaIdRewriter(cfg.source_registry, cfg.target_registry)

    @property
    def name(self) -> str:
        return self.cfg.name

    def stop(self) -> None:
        self._stop.set()

    # -- lifecycle ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect (retrying with backoff, one line per failure naming the cluster), then copy
        until ``stop()``; a failure after that starts the flow again from its recorded positions."""
        backoff = 0.5
        while not self._stop.is_set():
            try:
                await self._run_once()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: log one line, back off, start again
                self.stats.errors += 1
                log.error("flow %s: %s; retrying in %.1f s", self.name, _describe(exc), backoff)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), backoff)
                backoff = min(RETRY_BACKOFF_MAX, backoff * 2)

    async def _run_once(self) -> None:
        cfg = self.cfg
        src_bootstrap = cfg.source_client["admin"]["bootstrap.servers"]
        dst_bootstrap = cfg.target_client["admin"]["bootstrap.servers"]
        self.src_admin = AsyncAdmin(_client(cfg.source_client, "admin", {"client.id": f"mirror-{self.name}-admin"}))
        self.dst_admin = AsyncAdmin(_client(cfg.target_client, "admin", {"client.id": f"mirror-{self.name}-admin"}))
        self.consumer = AsyncConsumer(_client(cfg.source_client, "consumer", {
            "client.id": f"mirror-{self.name}", "enable.auto.commit": "false", "auto.offset.reset": "earliest",
            "max.poll.records": "10000", "fetch.max.wait.ms": "100",
            "allow.auto.create.topics": "false",  # a topic deleted on the source stays deleted
        }))
        producer_extra: dict[str, Any] = {"client.id": f"mirror-{self.name}", "acks": "all", "linger.ms": "0",
                                          "batch.size": "262144", "max.request.size": "10485760"}
        if self._eos:
            producer_extra["transactional.id"] = transactional_id(cfg, self.instance)
        self.producer = AsyncProducer(_client(cfg.target_client, "producer", producer_extra))
        # internal records: never in the copy transactions
        self.dst_internal = AsyncProducer(_client(cfg.target_client, "producer", {"client.id": f"mirror-{self.name}-internal", "linger.ms": "5"}))
        sync_side = cfg.source_client if cfg["offset-syncs.topic.location"] == "source" else cfg.target_client
        self.sync_producer = AsyncProducer(_client(sync_side, "producer", {"client.id": f"mirror-{self.name}-offset-syncs", "linger.ms": "5"}))
        self.sync_reader = AsyncConsumer(_client(sync_side, "consumer", {
            "client.id": f"mirror-{self.name}-offset-syncs-reader", "enable.auto.commit": "false",
            "auto.offset.reset": "earliest", "isolation.level": "read_uncommitted", "allow.auto.create.topics": "false"}))
        self.sync_admin = self.src_admin if sync_side is cfg.source_client else self.dst_admin
        # membership of the positions group on the target: which partitions this process copies
        self.members = AsyncConsumer(_client(cfg.target_client, "consumer", {
            "client.id": f"mirror-{self.name}-{self.instance}", "group.id": self._group, "enable.auto.commit": "false",
            "auto.offset.reset": "earliest", "partition.assignment.strategy": "range", "allow.auto.create.topics": "false",
            # a crashed process's partitions move on after 6 s (Kafka's group.min.session.timeout.ms)
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "2000"}))
        self._pending = {}
        self._emitters = {}
        # a flow started again finds its topics again (and so subscribes the membership consumer)
        self._topics = {}
        self._remote = {}
        clients: list[Any] = [self.src_admin, self.dst_admin, self.members, self.consumer, self.producer,
                              self.dst_internal, self.sync_producer, self.sync_reader]
        try:
            await _start(self.src_admin, cfg.source, src_bootstrap)
            await _start(self.dst_admin, cfg.target, dst_bootstrap)
            await self._forget_previous_member()
            for c in clients[2:]:
                await c.start()
            await self._create_internal_topics()
            if self._eos:
                await self.producer.init_transactions()
            await self._refresh_topics(initial=True)
            if cfg["sync.topic.acls.enabled"]:
                await self._guarded(self._sync_acls)
            self.sync_reader.assign([TopicPartition(self._sync_topic, 0)])
            self._tasks = [asyncio.ensure_future(t) for t in (
                self._periodic(cfg["refresh.topics.interval.seconds"], self._refresh_topics, cfg["refresh.topics.enabled"]),
                self._periodic(DELETION_CHECK_SECONDS, self._check_deleted, True),
                self._periodic(cfg["sync.topic.configs.interval.seconds"], self._sync_configs, cfg["sync.topic.configs.enabled"]),
                self._periodic(cfg["sync.topic.acls.interval.seconds"], self._sync_acls, cfg["sync.topic.acls.enabled"]),
                self._periodic(cfg["emit.heartbeats.interval.seconds"], self._heartbeat, cfg["emit.heartbeats.enabled"]),
                self._periodic(cfg["emit.checkpoints.interval.seconds"], self._checkpoint, cfg["emit.checkpoints.enabled"]),
                self._periodic(1.0, self._promote_syncs, True),
                self._periodic(self.progress_interval, self._progress, True),
                self._read_syncs(),
            )]
            self.ready.set()
            await self._copy()
            await self._leave()
        finally:
            for t in self._tasks:
                t.cancel()
            for t in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            self._tasks = []
            # (a run that failed before joining leaves the member of the run before it to remove)
            self._previous_member = self.members.consumer_group_metadata().member_id or self._previous_member
            await _close_all(clients)

    async def _periodic(self, interval: float, fn: Any, enabled: bool) -> None:
        if not enabled:
            return
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)
            if self._stop.is_set():
                return
            await self._guarded(fn)

    async def _guarded(self, fn: Any) -> None:
        """``await fn()``; a failure is counted and logged in one line."""
        try:
            await fn()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.stats.errors += 1
            log.warning("flow %s: %s failed: %s", self.name, getattr(fn, "__name__", fn), _describe(exc))

    # -- topics -----------------------------------------------------------------------------------
    async def _create_internal_topics(self) -> None:
        cfg = self.cfg
        compact = {"cleanup.policy": "compact"}
        await self.sync_admin.create_topics(
            [NewTopic(self._sync_topic, 1, cfg["offset-syncs.topic.replication.factor"], compact)], raise_on_exists=False)
        wanted = []
        if cfg["emit.heartbeats.enabled"]:
            wanted.append(NewTopic(self.policy.heartbeats_topic(), 1, cfg["heartbeats.topic.replication.factor"], compact))
        if cfg["emit.checkpoints.enabled"]:
            wanted.append(NewTopic(self._checkpoints_topic, 1, cfg["checkpoints.topic.replication.factor"], compact))
        if wanted:
            await self.dst_admin.create_topics(wanted, raise_on_exists=False)

    async def _refresh_topics(self, initial: bool = False) -> None:
        """Find new replicated topics and partitions; create them on the target; subscribe the
        membership consumer to the remote topics (the group assigns the partitions).
        A topic deleted on the source stops being copied (its remote topic is kept)."""
        topics = await self.src_admin.list_topics()
        selected = {n: d.partition_count for n, d in topics.items() if self.cfg.should_replicate_topic(n) and d.partition_count}
        # (a partition count never goes down: a smaller one is a topic being deleted)
        new = {n: c for n, c in selected.items() if c > self._topics.get(n, 0)}
        gone = [t for t in self._topics if t not in topics]
        for topic in gone:
            del self._topics[topic]
            log.warning("flow %s: topic %s was deleted on %s: no longer copied (%s kept on %s)", self.name, topic,
                        self.cfg.source, self._remote[topic], self.cfg.target)
        if gone and not new:
            self.members.subscribe({self._remote[t] for t in self._topics}, _Rebalance(self))
        if not new:
            return
        remote_existing = await self.dst_admin.list_topics()
        creates, grows = [], {}
        configs = await self._source_configs(list(new))
        for topic, count in sorted(new.items()):
            remote = self.policy.format_remote_topic(self.cfg.source, topic)
            have = remote_existing.get(remote)
            if have is None:
                creates.append(NewTopic(remote, count, self.cfg["replication.factor"], configs.get(topic)))
            elif have.partition_count < count:
                grows[remote] = count
        if creates:
            await self.dst_admin.create_topics(creates, raise_on_exists=False)
        if grows:
            await self.dst_admin.create_partitions(grows)
        for topic, count in new.items():
            remote = self.policy.format_remote_topic(self.cfg.source, topic)
            self._remote[topic] = remote
            old = self._topics.get(topic, 0)
            self._topics[topic] = count
            if not initial:
                log.info("flow %s: replicating %s -> %s (%d partitions%s)", self.name, topic, remote, count,
                         f", was {old}" if old else "")
        for topic, count in new.items():  # the group's assignment is computed from this metadata
            await self._members_see(self._remote[topic], count)
        self.members.subscribe({self._remote[t] for t in self._topics}, _Rebalance(self))

    async def _check_deleted(self) -> None:
        """A copied topic deleted on the source stalls the source consumer (it waits for the
        topic's metadata): look for one every few seconds, not only every refresh interval."""
        topics = await self.src_admin.list_topics()
        if any(t not in topics for t in self._topics):
            await self._refresh_topics()

    async def _source_configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        if not self.cfg["sync.topic.configs.enabled"] or not topics:
            return {}
        try:
            described = await self.src_admin.describe_configs(topics)
        except KafkaError as exc:  # a source without DescribeConfigs: topics are created with defaults
            if not getattr(self, "_configs_warned", False):
                log.warning("flow %s: topic configs of %s not readable (%s): not copied", self.name, self.cfg.source, _describe(exc))
                self._configs_warned = True
            return {}
        out: dict[str, dict[str, str]] = {}
        for topic, entries in described.items():
            out[topic] = {
                k: e.value for k, e in entries.items()
                if e.value is not None and not e.is_default and not e.read_only and not e.is_sensitive
                and e.source in (-1, 1) and self.cfg.config_selected(k)
            }
        return out

    async def _sync_configs(self) -> None:
        topics = list(self._topics)
        if not topics:
            return
        wanted = await self._source_configs(topics)
        remote_names = {self._remote[t]: t for t in topics}
        have = await self.dst_admin.describe_configs(list(remote_names))
        changes: dict[str, dict[str, str | None]] = {}
        for remote, entries in have.items():
            want = wanted.get(remote_names[remote], {})
            diff: dict[str, str | None] = {k: v for k, v in want.items() if entries.get(k) is None or entries[k].value != v}
            if diff:
                changes[remote] = diff
        if changes:
            await self.dst_admin.alter_configs(changes)
            log.info("flow %s: topic configs synced: %s", self.name, ", ".join(sorted(changes)))

    async def _sync_acls(self) -> None:
        """Create the source's topic ACLs on the target, translated as MM2 does (never removes
        any). Each refused binding is logged once with its topic; new ones once in all."""
        try:
            source = await self.src_admin.describe_acls(ANY_TOPIC_ACL)
        except KafkaError as exc:
            if exc.code in (SECURITY_DISABLED, UNSUPPORTED_VERSION):
                if not self._acls_off:
                    self._acls_off = True
                    why = "has no authorizer" if exc.code == SECURITY_DISABLED else "does not serve DescribeAcls v1+"
                    log.info("flow %s: %s %s: no topic ACLs to sync (sync.topic.acls.enabled = false says so)",
                             self.name, self.cfg.source, why)
                return
            raise
        self._acls_off = False
        wanted = target_acl_bindings(self.cfg, source)
        if not wanted:
            return
        results = await self.dst_admin.create_acls(wanted)
        if results and all(code == SECURITY_DISABLED for code, _m in results):
            self.stats.errors += len(results)
            if not self._acls_target_off:
                self._acls_target_off = True
                log.warning("flow %s: %s has no authorizer: %d topic ACLs of %s not created", self.name,
                            self.cfg.target, len(results), self.cfg.source)
            return
        self._acls_target_off = False
        added = []
        for b, (code, message) in zip(wanted, results, strict=True):
            if code == 0:
                self._acls_refused.discard(b)
                if b not in self._acls_known:
                    self._acls_known.add(b)
                    self.stats.acls_synced += 1
                    added.append(b)
                continue
            self.stats.errors += 1
            if b not in self._acls_refused:
                self._acls_refused.add(b)
                log.warning("flow %s: ACL on topic %s not created on %s: error %d%s", self.name, b.resource_name,
                            self.cfg.target, code, f" ({message})" if message else "")
        if added:
            log.info("flow %s: %d topic ACLs synced to %s (%s)", self.name, len(added), self.cfg.target,
                     ", ".join(sorted({b.resource_name for b in added})))

    async def _members_see(self, remote: str, count: int) -> None:
        deadline = time.monotonic() + 30
        while (await self.members.topics()).get(remote, 0) < count:  # topics() refreshes the metadata
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"{remote}: {count} partitions not in the target's metadata after 30 s")
            await asyncio.sleep(0.1)

    # -- sharing the flow: the positions group on the target ---------------------------------------
    async def _forget_previous_member(self) -> None:
        """A flow started again removes its last run's member from the positions group.

        That member could not leave when the target was down; a coordinator that restarted
        meanwhile reloads the group with it, and would hold the new member's join until its
        session (6 s) expired. Removing it is what its LeaveGroup would have done; a member that
        did leave is answered UNKNOWN_MEMBER_ID, and a failure here only means that wait."""
        member, self._previous_member = self._previous_member, ""
        if not member:
            return
        with contextlib.suppress(KafkaError):
            await self.dst_admin.remove_group_members(self._group, [member])

    async def assigned(self, remote_tps: set[TopicPartition]) -> None:
        """Partitions this process now copies: each starts at its position recorded on the target
        (waiting until no open transaction still records positions for it), else the earliest."""
        async with self._lock:
            self.members.pause(*remote_tps)  # the membership consumer never fetches
            by_remote = {r: s for s, r in self._remote.items()}
            pairs = {rtp: TopicPartition(by_remote[rtp.topic], rtp.partition) for rtp in remote_tps if rtp.topic in by_remote}
            committed = await self.dst_admin.list_group_offsets(self._group, list(pairs), require_stable=True)
            self.consumer.assign(self.consumer.assignment() | set(pairs.values()))
            for rtp, tp in pairs.items():
                c = committed.get(rtp)
                if c is not None and c.offset >= 0:
                    self.consumer.seek(tp, c.offset)
                else:
                    self.consumer.seek_to_beginning(tp)
                self._emitters[tp] = SyncEmitter(self.cfg["offset.lag.max"])
            if pairs:
                log.info("flow %s: copying %d partitions (%s)", self.name, len(self.consumer.assignment()),
                         _ranges(self.consumer.assignment()))

    async def revoked(self, remote_tps: set[TopicPartition], *, lost: bool = False) -> None:
        """Partitions handed to another process: the batch in flight is finished first (the lock),
        at-least-once positions are committed (unless ``lost``), then copying them stops."""
        async with self._lock:
            if not lost and not self._eos:
                mine = {rtp: o for rtp, o in self._pending.items() if rtp in remote_tps}
                if mine:
                    with contextlib.suppress(KafkaError):
                        await self.members.commit(self._positions(mine))
            for rtp in remote_tps:
                self._pending.pop(rtp, None)
            by_remote = {r: s for s, r in self._remote.items()}
            gone = {TopicPartition(by_remote[r.topic], r.partition) for r in remote_tps if r.topic in by_remote}
            self.consumer.assign(self.consumer.assignment() - gone)
            for tp in gone:
                self._emitters.pop(tp, None)

    async def _leave(self) -> None:
        """On stop: commit at-least-once positions, then leave the group (the others take over)."""
        async with self._lock:
            if self._pending:
                await self.members.commit(self._positions(self._pending))
                self._pending = {}

    # -- copying ----------------------------------------------------------------------------------
    async def _copy(self) -> None:
        last_commit = time.monotonic()
        while not self._stop.is_set():
            if self._abort_backoff or self._schema_backoff:  # outside the lock: rebalances go on meanwhile
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), max(self._abort_backoff, self._schema_backoff))
            async with self._lock:
                batch = await self._gather()
                if batch and self.schemas is not None and not await self._prepare_schemas(batch):
                    continue
                if batch:
                    positions = {TopicPartition(self._remote[tp.topic], tp.partition): recs[-1].offset + 1 for tp, recs in batch.items()}
                    for tp in batch:
                        with contextlib.suppress(Exception):
                            self._source_hw[TopicPartition(self._remote[tp.topic], tp.partition)] = self.consumer.highwater(tp)
                    if self._eos:
                        await self._copy_transaction(batch, positions)
                    else:
                        futures = await self._send(batch)
                        await self.producer.flush()
                        acked = [await f for f in futures]  # raises if a record was refused or timed out
                        self._pending.update(positions)  # positions of acknowledged records only
                        self._after_copy(batch, acked)
                if self._pending and (not batch or time.monotonic() - last_commit >= ALO_COMMIT_SECONDS):
                    await self._commit_positions()
                    last_commit = time.monotonic()
            if not batch:
                await asyncio.sleep(0)  # let a waiting rebalance take the lock

    async def _gather(self) -> dict[TopicPartition, list[Any]]:
        """Records for one transaction: up to TXN_MAX_RECORDS or TXN_MAX_SECONDS (exactly once:
        fewer, larger transactions); without transactions, what one poll returns."""
        out: dict[TopicPartition, list[Any]] = {}
        n = 0
        deadline = time.monotonic() + (TXN_MAX_SECONDS if self._eos else 0.0)
        while n < TXN_MAX_RECORDS and not self._stop.is_set():
            left = deadline - time.monotonic()
            if n and left <= 0:
                break
            if not self.consumer.assignment():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 0.2)
                return out
            recs = await self.consumer.poll(min(left, 0.5) if n else 0.2, max_records=TXN_MAX_RECORDS - n)
            if not recs:
                if n:
                    break
                return out
            if not n:
                self._polled_ms = time.time() * 1000
            for r in recs:
                out.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
            n += len(recs)
        return out

    async def _send(self, batch: dict[TopicPartition, list[Any]]) -> list[Any]:
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for tp, recs in batch.items():
            by_topic[tp.topic].extend(recs)
        futures = []
        for topic, recs in by_topic.items():
            await self._known_partitions(self._remote[topic], self._topics.get(topic, 0))
            if self.schemas is not None:
                values, keys, headers = self._rewrite_ids(recs)
            else:
                values, keys, headers = [r.value for r in recs], [r.key for r in recs], [r.headers or None for r in recs]
            futures.append(await self.producer.send_batch(
                self._remote[topic],
                values,
                keys=keys,
                partitions=[r.partition for r in recs],
                headers=headers,
                timestamps=[r.timestamp for r in recs],
            ))
        return futures

    async def _prepare_schemas(self, batch: dict[TopicPartition, list[Any]]) -> bool:
        """Map the batch's new schema ids before anything of it is written. A registry that
        fails (down, or the target refuses a schema) holds the batch back: logged, counted, the
        consumer rewound to it, retried after a backoff (0.5 s doubling, up to 30 s). False then."""
        assert self.schemas is not None
        try:
            await self.schemas.prepare(self.schemas.ids_of(r for recs in batch.values() for r in recs))
        except SchemaRegistryError as exc:
            self._schema_backoff = min(RETRY_BACKOFF_MAX, max(0.5, self._schema_backoff * 2))
            self.stats.errors += 1
            log.error("flow %s: %s; %d records of %s held back, retrying in %.1f s", self.name, exc,
                      sum(len(recs) for recs in batch.values()), _ranges(batch), self._schema_backoff)
            await self._rewind(batch)
            return False
        self._schema_backoff = 0.0
        return True

    def _rewrite_ids(self, recs: list[Any]) -> tuple[list[bytes | None], list[bytes | None], list[Any]]:
        """Values, keys and headers of ``recs`` with the target registry's schema ids. A framed
        id the source registry does not know is logged (topic/partition/offset), counted, and
        that key/value copied unchanged."""
        rw = self.schemas
        assert rw is not None
        values: list[bytes | None] = []
        keys: list[bytes | None] = []
        headers: list[Any] = []
        for r in recs:
            out = []
            for what, data in (("value", r.value), ("key", r.key)):
                try:
                    out.append(rw.rewrite(data))
                except UnknownSchemaId as exc:
                    out.append(data)
                    self._schema_error(r, what, exc)
            values.append(out[0])
            keys.append(out[1])
            try:
                headers.append(rw.rewrite_headers(r.headers) or None)
            except UnknownSchemaId as exc:
                headers.append(r.headers or None)
                self._schema_error(r, "id header", exc)
        return values, keys, headers

    def _schema_error(self, r: Any, what: str, exc: UnknownSchemaId) -> None:
        self.stats.schema_id_errors += 1
        self.stats.errors += 1
        log.error("flow %s: %s/%d offset %d: %s of the record: %s; copied with the source's id",
                  self.name, r.topic, r.partition, r.offset, what, exc)

    async def _known_partitions(self, remote: str, count: int) -> None:
        """Wait until the producer's metadata has ``count`` partitions of ``remote`` (they were
        just added); KafkaTimeoutError after 30 s."""
        deadline = time.monotonic() + 30
        while len(self.producer.partitions_for(remote) or ()) < count:
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"{remote}: {count} partitions not in the target's metadata after 30 s")
            await self.producer.refresh_metadata([remote])
            if len(self.producer.partitions_for(remote) or ()) < count:
                await asyncio.sleep(0.1)

    async def _copy_transaction(self, batch: dict[TopicPartition, list[Any]], positions: dict[TopicPartition, int]) -> None:
        """Copy ``batch`` and record ``positions`` in one transaction; on an abortable failure,
        abort and rewind the consumer to the recorded positions (the batch is copied again)."""
        self.producer.begin_transaction()
        try:
            futures = await self._send(batch)
            # with the member's generation: a process that lost these partitions is refused (KIP-447)
            await self.producer.send_offsets_to_transaction(self._positions(positions), self.members.consumer_group_metadata())
            await self.producer.commit_transaction()
        except ProducerFencedError:
            raise ProducerFencedError(
                f"transactional.id {transactional_id(self.cfg, self.instance)} is used by another mirror process: "
                "start each process with its own --instance") from None
        except KafkaError as exc:
            self.stats.aborted += 1
            self.stats.errors += 1
            log.error("flow %s: transaction aborted (%s) for %s; copying again", self.name, _describe(exc),
                      ", ".join(f"{tp.topic}-{tp.partition}" for tp in batch))
            with contextlib.suppress(KafkaError):
                await self.producer.abort_transaction()
            await self._rewind(batch)
            # the target may refuse for a while (authorization, record too large): back off
            self._abort_backoff = min(RETRY_BACKOFF_MAX, max(0.1, self._abort_backoff * 2))
            return
        self._abort_backoff = 0.0
        self.stats.transactions += 1
        self._after_copy(batch, [await f for f in futures])

    async def _rewind(self, batch: dict[TopicPartition, list[Any]]) -> None:
        mine = self.consumer.assignment()
        for tp, recs in batch.items():
            if tp in mine:
                self.consumer.seek(tp, recs[0].offset)

    async def _commit_positions(self) -> None:
        """At least once: commit the positions of acknowledged records, as this member."""
        await self.members.commit(self._positions(self._pending))
        self._pending = {}

    def _positions(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions to record, each with ``hw=<source high watermark>`` as metadata when known."""
        out = {}
        for rtp, o in positions.items():
            hw = self._source_hw.get(rtp, -1)
            out[rtp] = OffsetAndMetadata(o, f"hw={hw}" if hw >= 0 else "")
        return out

    def _after_copy(self, batch: dict[TopicPartition, list[Any]], metadata: list[list[Any]]) -> None:
        """Count the copied records and emit offset syncs for them."""
        acked_ms = time.time() * 1000
        polled_ms = self._polled_ms
        downstream: dict[TopicPartition, list[int]] = defaultdict(list)
        for mds in metadata:
            for md in mds:
                downstream[TopicPartition(md.topic, md.partition)].append(md.offset)
        # rows of one remote partition come back in the order they were sent: the batch's order
        stats = self.stats
        for tp, recs in batch.items():
            rtp = TopicPartition(self._remote[tp.topic], tp.partition)
            offs = downstream[rtp]
            emitter = self._emitters[tp]
            for r, down in zip(recs, offs, strict=True):
                if emitter.update(r.offset, down):
                    self._emit_sync(tp, r.offset, down)
            n = len(recs)
            nbytes = sum(len(r.value or b"") + len(r.key or b"") for r in recs)
            stats.records += n
            stats.bytes += nbytes
            stats.newest_timestamp = max(stats.newest_timestamp, recs[-1].timestamp)
            pm = stats.partitions.get(rtp)
            if pm is None:
                pm = stats.partitions[rtp] = PartitionMetrics()
            pm.record_count += n
            pm.byte_count += nbytes
            stamps = [r.timestamp for r in recs]
            lo, hi, total = min(stamps), max(stamps), sum(stamps)
            for window, at in ((pm.record_age_ms, polled_ms), (pm.replication_latency_ms, acked_ms)):
                window.add(at - hi, at - lo, at * n - total, n, at - stamps[-1])

    def _emit_sync(self, tp: TopicPartition, upstream: int, downstream: int) -> None:
        sync = OffsetSync(tp.topic, tp.partition, upstream, downstream)
        self.stats.offset_syncs += 1
        fut = asyncio.ensure_future(self.sync_producer.send(self._sync_topic, sync.value(), key=sync.key(), partition=0))
        fut.add_done_callback(_log_failure(self.name, "offset sync"))

    async def _promote_syncs(self) -> None:
        for tp, emitter in self._emitters.items():
            pair = emitter.promote()
            if pair is not None:
                self._emit_sync(tp, *pair)

    async def _read_syncs(self) -> None:
        """Read the offset-syncs topic into the store, forever; ``read_to_end`` once caught up
        with the end offset seen at start. A failure is logged and reading starts over."""
        while not self._stop.is_set():
            try:
                await self._read_syncs_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.stats.errors += 1
                log.warning("flow %s: reading %s failed: %s", self.name, self._sync_topic, _describe(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 1.0)

    async def _read_syncs_once(self) -> None:
        tp = TopicPartition(self._sync_topic, 0)
        end = (await self.sync_reader.end_offsets([tp]))[tp]
        while True:
            if not self._store.read_to_end and await self.sync_reader.position(tp) >= end:
                self._store.read_to_end = True
            for r in await self.sync_reader.poll(1.0):
                try:
                    s = OffsetSync.decode(r.key, r.value)
                except RecordFormatError as exc:
                    log.warning("flow %s: %s offset %d is not an offset sync: %s", self.name, self._sync_topic, r.offset, exc)
                    continue
                self._store.add(TopicPartition(s.topic, s.partition), s.upstream_offset, s.downstream_offset)

    # -- heartbeats and checkpoints ----------------------------------------------------------------
    async def _heartbeat(self) -> None:
        hb = Heartbeat(self.cfg.source, self.cfg.target, int(time.time() * 1000))
        await self.dst_internal.send(self.policy.heartbeats_topic(), hb.value(), key=hb.key(), partition=0)
        self.stats.heartbeats += 1

    async def _checkpoint(self) -> None:
        """Translate every selected source group's offsets; emit changed checkpoints; sync groups."""
        if not self._store.read_to_end:
            return
        started = time.monotonic()
        groups = [g for g, ptype, _state in await self.src_admin.list_groups()
                  if ptype in ("consumer", "") and self.cfg.group_selected(g) and not g.startswith("__mirror.")]
        floor: dict[TopicPartition, int] = {}
        emitted: list[Checkpoint] = []
        for group in groups:
            committed = await self.src_admin.list_group_offsets(group)
            for tp, om in committed.items():
                if om is None or om.offset < 0 or tp.topic not in self._remote:
                    continue
                floor[tp] = min(floor.get(tp, om.offset), om.offset)
                down = self._store.translate(tp, om.offset)
                if down is None:
                    continue
                rtp = TopicPartition(self._remote[tp.topic], tp.partition)
                key = (group, rtp)
                if self._last_checkpoints.get(key) == (om.offset, down):
                    continue
                cp = Checkpoint(group, rtp.topic, rtp.partition, om.offset, down, om.metadata or "")
                await self.dst_internal.send(self._checkpoints_topic, cp.value(), key=cp.key(), partition=0)
                self._last_checkpoints[key] = (om.offset, down)
                self.stats.checkpoint_latency_ms[key] = (time.monotonic() - started) * 1000
                emitted.append(cp)
        for tp, lowest in floor.items():
            self._store.retain_from(tp, lowest)
        if emitted:
            await self.dst_internal.flush()
            self.stats.checkpoints += len(emitted)
            self.stats.last_checkpoint_ms = int(time.time() * 1000)
        if self.cfg["sync.group.offsets.enabled"]:
            await self._sync_group_offsets()

    async def _sync_group_offsets(self) -> None:
        """Commit the latest checkpoints into the target's groups that have no active member,
        never moving a partition backwards."""
        by_group: dict[str, dict[TopicPartition, int]] = defaultdict(dict)
        for (group, rtp), (_up, down) in self._last_checkpoints.items():
            by_group[group][rtp] = down
        if not by_group:
            return
        described = await self.dst_admin.describe_groups(list(by_group))
        for group, offsets in by_group.items():
            d = described.get(group)
            if d is not None and d.members:
                continue  # active consumers own their offsets
            current = await self.dst_admin.list_group_offsets(group, list(offsets))
            move: dict[TopicPartition, int | OffsetAndMetadata] = {}
            for rtp, down in offsets.items():
                c = current.get(rtp)
                if c is None or c.offset < down:
                    move[rtp] = down
            if move:
                try:  # a member may have joined since: the commit is refused, the next round skips it
                    await self.dst_admin.alter_group_offsets(group, move)
                except KafkaError as exc:
                    self.stats.errors += 1
                    log.warning("flow %s: group %s: offsets not synced to %s: %s", self.name, group, self.cfg.target, _describe(exc))
                    continue
                self.stats.group_offsets_synced += len(move)
                log.info("flow %s: group %s: offsets of %d partitions synced to %s", self.name, group, len(move), self.cfg.target)

    # -- progress ---------------------------------------------------------------------------------
    async def _progress(self) -> None:
        now = time.monotonic()
        last_t, last_n = getattr(self, "_last_progress", (now - self.progress_interval, 0))
        rate = (self.stats.records - last_n) / max(1e-6, now - last_t)
        self._last_progress = (now, self.stats.records)
        lag = 0
        for tp in self.consumer.assignment():
            with contextlib.suppress(Exception):
                hw = self.consumer.highwater(tp)
                pos = await asyncio.wait_for(self.consumer.position(tp), 0.5)
                if hw >= 0:
                    lag += max(0, hw - pos)
        age = "-" if self.stats.newest_timestamp < 0 else f"{max(0, int(time.time() * 1000) - self.stats.newest_timestamp)} ms"
        log.info("flow %s: %.0f records/s, %d copied, lag %d, newest record age %s, %d partitions%s",
                 self.name, rate, self.stats.records, lag, age, len(self.consumer.assignment()),
                 f", {self.stats.errors} errors" if self.stats.errors else "")


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, flow: Flow) -> None:
        self.flow = flow

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.flow.assigned(assigned)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.flow.revoked(revoked)

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        await self.flow.revoked(lost, lost=True)


def _ranges(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(tp.partition)
    return ", ".join(f"{t} {','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))


async def _close_all(clients: list[Any], timeout: float = 5.0) -> None:
    """Close every client at once, within ``timeout`` in all (producers drop what they still hold:
    the positions recorded on the target say what was copied)."""
    async def close(c: Any) -> None:
        if isinstance(c, AsyncProducer):
            await c.close(timeout)
        elif isinstance(c, AsyncConsumer):
            await c.close(autocommit=False)
        else:
            await c.close()

    tasks = [asyncio.ensure_future(close(c)) for c in clients]
    _done, pending = await asyncio.wait(tasks, timeout=timeout + 1)
    for t in pending:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t


async def _start(admin: AsyncAdmin, alias: str, bootstrap: str) -> None:
    try:
        await admin.start()
        await admin.describe_cluster()
    except Exception as exc:
        raise ConnectionError(f"cluster {alias} ({bootstrap}) unreachable: {_describe(exc)}") from exc


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (KafkaError, ConnectionError)) else f"{type(exc).__name__}: {text}"


def _log_failure(flow: str, what: str) -> Any:
    def done(fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            log.warning("flow %s: %s not sent: %s", flow, what, _describe(exc))

    return done


async def run_flows(flows: Iterable[Flow], stop: asyncio.Event) -> None:
    """Run ``flows`` until ``stop`` is set, then stop them and wait for them to finish."""
    flows = list(flows)
    tasks = [asyncio.ensure_future(f.run()) for f in flows]
    await stop.wait()
    for f in flows:
        f.stop()
    await asyncio.gather(*tasks, return_exceptions=True)
