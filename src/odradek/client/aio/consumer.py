"""AsyncConsumer: the asyncio consumer core.

Partitions come from ``assign()`` or from group membership (``subscribe()``, see ``_group``).
For each assigned partition the consumer keeps a *position* (next offset handed to the
application) and a *fetch position* (next offset to ask the broker for). A fetcher task per
leader keeps one Fetch in flight for every partition that has fewer than two undelivered fetch
results buffered, so the next Fetch travels while the application consumes the previous one.
Records are decoded lazily, in ``poll``, from the raw fetched bytes.

Positions that are unknown are resolved from the group's committed offset, else from
``auto.offset.reset`` (earliest / latest via ListOffsets; ``none`` raises).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from crc32c import crc32c

from .. import _protocol as proto
from .. import _records
from .._cluster import Cluster
from .._config import CONSUMER, parse_config
from .._signal import Signal
from ..errors import AuthenticationError, KafkaConnectionError, KafkaError, KafkaTimeoutError
from ..types import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ._group import GroupHost, GroupMembership
from ._offsets import commit_group_offsets, fetch_group_offsets, list_offsets
from ._txn import ConsumerGroupMetadata

try:
    from .. import _speedups  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # pragma: no cover
    _speedups = None

__all__ = ["AsyncConsumer", "ConsumerRebalanceListener"]

log = logging.getLogger("odradek.client.consumer")

EARLIEST = -2
LATEST = -1


class ConsumerRebalanceListener:
    """Override any of these; they may be plain functions or coroutines."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        return None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        return self.on_partitions_revoked(lost)


class _PartitionState:
    __slots__ = ("buffered", "epoch", "fetch_position", "high_watermark", "in_flight", "paused", "position", "reset")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_position: int | None = None
        self.paused = False
        self.in_flight = False
        self.buffered: deque[tuple[int, bytes, Any]] = deque()  # (fetch epoch, records, aborted)
        self.epoch = 0  # bumped by seek: results fetched for an older epoch are dropped
        self.high_watermark = -1
        self.reset: int | None = None  # pending reset strategy (EARLIEST/LATEST)


def _check_crcs(data: bytes) -> None:
    """CRC-32C of every whole batch (crc32c runs at >10 GB/s: a few us per fetched MB)."""
    view = memoryview(data)
    for pos, h in _records.iter_batch_headers(data):
        if crc32c(view[pos + 21 : pos + 12 + h[1]]) != h[4]:
            raise KafkaError(f"CRC mismatch in batch at offset {h[0]}", 2)


def _decode(topic: str, partition: int, data: bytes, min_offset: int, aborted: Any, read_committed: bool, check_crcs: bool) -> tuple[list[ConsumerRecord], int]:
    if _speedups is not None and not read_committed:
        if check_crcs:
            _check_crcs(data)
        return _speedups.decode_records(topic, partition, data, min_offset, ConsumerRecord, _records.decompress)  # type: ignore[no-any-return,unused-ignore]
    return _records.decode_records(topic, partition, data, min_offset=min_offset, aborted=aborted, read_committed=read_committed, check_crcs=check_crcs)


class AsyncConsumer:
    """Asyncio Kafka consumer. ``config`` uses the Java consumer's keys."""

    def __init__(self, config: dict[str, Any], *topics: str) -> None:
        self.config = parse_config(config, CONSUMER, "consumer")
        c = self.config
        self._cluster = Cluster(c)
        self._group_id: str | None = c["group.id"]
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._subscription: set[str] = set()
        self._listener: ConsumerRebalanceListener | None = None
        self._read_committed = c["isolation.level"] == "read_committed"
        self._max_poll_records: int = c["max.poll.records"]
        self._started = False
        self._closed = False
        self._data_ready: Signal | None = None
        self._wakeup: Signal | None = None
        self._fetcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ready_records: list[ConsumerRecord] = []
        self._ready_index = 0
        self._ready_next = 0  # next offset after the batches the ready records came from
        self._ready_tp: TopicPartition | None = None
        self._group: Any = None
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._initial_topics = list(topics)
        self._fetch_error: BaseException | None = None
        self._key_deserializer = c["key.deserializer"]
        self._value_deserializer = c["value.deserializer"]

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._data_ready = Signal()
        self._wakeup = Signal()
        await self._cluster.refresh([])
        self._fetcher = asyncio.ensure_future(self._fetch_loop())
        if self._group_id and self.config["enable.auto.commit"]:
            self._auto_commit_task = asyncio.ensure_future(self._auto_commit_loop())
        if self._initial_topics:
            self.subscribe(self._initial_topics)

    async def __aenter__(self) -> AsyncConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        try:
            if self._started and self._group_id and autocommit and self.config["enable.auto.commit"]:
                try:
                    await asyncio.wait_for(self.commit(), 5)
                except (TimeoutError, KafkaError) as exc:
                    log.debug("final commit failed: %s", exc)
            if self._group is not None:
                try:  # bounded: close() never hangs on a broker that does not answer
                    await asyncio.wait_for(self._group.leave(), 5)
                except (TimeoutError, KafkaError) as exc:
                    log.debug("leaving the group failed: %s", exc)
        finally:
            self._closed = True
            for t in [self._fetcher, self._auto_commit_task, *self._tasks]:
                if t is not None:
                    t.cancel()
            for t in [self._fetcher, self._auto_commit_task, *self._tasks]:
                if t is not None:
                    try:
                        await t
                    except (asyncio.CancelledError, Exception):
                        pass
            await self._cluster.close()

    def _check_started(self) -> None:
        if not self._started:
            raise KafkaError("consumer not started: await consumer.start() first")

    # -- assignment -------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Use exactly these partitions (no group membership)."""
        if self._subscription:
            raise KafkaError("assign() and subscribe() cannot be mixed: unsubscribe() first")
        self._set_assignment({TopicPartition(*tp) for tp in partitions})

    def _set_assignment(self, tps: set[TopicPartition]) -> None:
        for tp in list(self._states):
            if tp not in tps:
                del self._states[tp]
        for tp in tps:
            if tp not in self._states:
                self._states[tp] = _PartitionState()
        self._cluster.want_topics(tp.topic for tp in tps)
        if self._ready_tp is not None and self._ready_tp not in tps:
            self._ready_records = []
            self._ready_index = 0
        self._kick()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None) -> None:
        """Join ``group.id`` and consume the partitions the group assigns to this member."""
        if not self._group_id:
            raise KafkaError("subscribe() needs 'group.id' in the consumer config")
        topics = set(topics)
        if not topics:
            self.unsubscribe()
            return
        self._subscription = topics
        self._listener = listener
        self._cluster.want_topics(topics)
        if self._group is None:
            self._group = GroupMembership(
                GroupHost(
                    cluster=self._cluster,
                    config=self.config,
                    listener=lambda: self._listener,
                    set_assignment=self._set_assignment,
                    consumed_offsets=self._consumed_offsets,
                    commit=self.commit,
                )
            )
        self._group.start(topics)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def unsubscribe(self) -> None:
        if self._group is not None:
            self._spawn(self._group.leave())
            self._group = None
        self._subscription = set()
        self._set_assignment(set())

    # -- positions --------------------------------------------------------------------------
    def _state(self, tp: TopicPartition) -> _PartitionState:
        try:
            return self._states[TopicPartition(*tp)]
        except KeyError:
            raise KafkaError(f"partition {tp} is not assigned to this consumer") from None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self._state(tp)
        st.epoch += 1
        st.position = st.fetch_position = offset
        st.reset = None
        st.buffered.clear()
        self._drop_ready(tp)
        self._kick()

    def _drop_ready(self, tp: TopicPartition) -> None:
        if self._ready_tp == tp:
            self._ready_records = []
            self._ready_index = 0

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or list(self._states):
            self._reset(tp, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or list(self._states):
            self._reset(tp, LATEST)

    def _reset(self, tp: TopicPartition, strategy: int) -> None:
        st = self._state(tp)
        st.epoch += 1
        st.position = st.fetch_position = None
        st.reset = strategy
        st.buffered.clear()
        self._drop_ready(tp)
        self._kick()

    async def position(self, tp: TopicPartition) -> int:
        """Offset of the next record to be returned (resolving a pending reset)."""
        self._check_started()
        st = self._state(tp)
        if st.position is None:
            await self._resolve_positions([TopicPartition(*tp)])
        assert st.position is not None
        return st.position

    def highwater(self, tp: TopicPartition) -> int:
        return self._state(tp).high_watermark

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = True
            self._drop_ready(TopicPartition(*tp))

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False
        self._kick()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._states.items() if st.paused}

    async def _resolve_positions(self, tps: list[TopicPartition]) -> None:
        need = [tp for tp in tps if tp in self._states and self._states[tp].position is None]
        if not need:
            return
        if self._group_id:
            committed = {tp: c for tp, c in (await self.committed(need)).items() if c is not None}
            for tp, c in committed.items():
                st = self._states.get(tp)
                if st is not None and st.position is None and st.reset is None:
                    st.position = st.fetch_position = c.offset
            need = [tp for tp in need if tp in self._states and self._states[tp].position is None]
        if not need:
            return
        strategy_name = self.config["auto.offset.reset"]
        by_strategy: dict[int, list[TopicPartition]] = {}
        for tp in need:
            st = self._states[tp]
            strategy = st.reset
            if strategy is None:
                if strategy_name == "none":
                    raise KafkaError(f"no committed offset for {tp} and auto.offset.reset=none", 1)
                strategy = EARLIEST if strategy_name == "earliest" else LATEST
            by_strategy.setdefault(strategy, []).append(tp)
        epochs = {tp: self._states[tp].epoch for tp in need}
        for strategy, group in by_strategy.items():
            offsets = await self._list_offsets(dict.fromkeys(group, strategy))
            for tp, (offset, _ts) in offsets.items():
                st = self._states.get(tp)
                # a seek while ListOffsets was in flight wins (its epoch moved on)
                if st is not None and st.position is None and st.epoch == epochs.get(tp):
                    st.position = st.fetch_position = offset
                    st.reset = None

    async def _list_offsets(self, query: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        return await list_offsets(self._cluster, query, read_committed=self._read_committed)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        r = await self._list_offsets(dict.fromkeys((TopicPartition(*tp) for tp in partitions), EARLIEST))
        return {tp: o for tp, (o, _t) in r.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        r = await self._list_offsets(dict.fromkeys((TopicPartition(*tp) for tp in partitions), LATEST))
        return {tp: o for tp, (o, _t) in r.items()}

    async def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Earliest offset whose timestamp >= the given ms timestamp (None when there is none)."""
        r = await self._list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        return {tp: (OffsetAndTimestamp(o, t) if o >= 0 else None) for tp, (o, t) in r.items()}

    async def topics(self) -> dict[str, int]:
        await self._cluster.refresh(all_topics=True)
        return {t: len(p) for t, p in self._cluster.topics.items()}

    async def partitions_for_topic(self, topic: str) -> set[int]:
        await self._cluster.wait_for_topics([topic], self.config["request.timeout.ms"] / 1000)
        return {p.partition for p in self._cluster.topics[topic]}

    # -- commits ----------------------------------------------------------------------------
    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        if not self._group_id:
            raise KafkaError("committed() needs 'group.id'")
        return await fetch_group_offsets(self._cluster, self._group_id, list(partitions))

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(st.position) for tp, st in self._states.items() if st.position is not None}

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) for ``group.id`` and wait."""
        if not self._group_id:
            raise KafkaError("commit() needs 'group.id'")
        if offsets is None:
            offsets_md = self._consumed_offsets()
        else:
            offsets_md = {
                TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o)))
                for tp, o in offsets.items()
            }
        if not offsets_md:
            return
        generation, member = (-1, "")
        if self._group is not None:
            generation, member = self._group.generation_id, self._group.member_id
        await commit_group_offsets(self._cluster, self._group_id, offsets_md, generation, member, self.config["group.instance.id"])

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id, for a transactional producer's
        ``send_offsets_to_transaction`` (KIP-447: a zombie from an older generation is fenced)."""
        if self._group_id is None:
            raise KafkaError("consumer_group_metadata() needs a consumer with a group.id")
        if self._group is not None:
            return ConsumerGroupMetadata(self._group_id, self._group.generation_id, self._group.member_id, self.config["group.instance.id"])
        return ConsumerGroupMetadata(self._group_id, -1, "", self.config["group.instance.id"])

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
        callback: Callable[[Mapping[TopicPartition, OffsetAndMetadata | int] | None, BaseException | None], Any] | None = None,
    ) -> asyncio.Task[None]:
        if offsets is None:
            offsets = dict(self._consumed_offsets())

        async def run() -> None:
            exc: BaseException | None = None
            try:
                await self.commit(offsets)
            except KafkaError as e:
                exc = e
            if callback is not None:
                callback(offsets, exc)

        return self._spawn(run())

    async def _auto_commit_loop(self) -> None:
        interval = self.config["auto.commit.interval.ms"] / 1000
        last: dict[TopicPartition, OffsetAndMetadata] = {}
        while True:
            await asyncio.sleep(interval)
            current = self._consumed_offsets()
            if current and current != last and (self._group is None or self._group.stable):
                try:
                    await self.commit(current)
                    last = current
                except (KafkaError, OSError) as exc:
                    log.debug("auto commit failed: %s", exc)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        t: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    # -- fetching ---------------------------------------------------------------------------
    def _kick(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def _fetch_loop(self) -> None:
        assert self._wakeup is not None
        in_flight_nodes: set[int] = set()
        while not self._closed:
            self._wakeup.clear()
            try:
                unresolved = [tp for tp, st in self._states.items() if st.position is None]
                if unresolved:
                    await self._resolve_positions(unresolved)
                missing = {tp.topic for tp in self._states if self._cluster.leader_for(tp) < 0}
                if missing:
                    await self._cluster.wait_for_topics(missing, 5.0, auto_create=self.config["allow.auto.create.topics"])
                elif self._cluster.metadata_stale():  # metadata.max.age.ms
                    await self._cluster.refresh()
            except KafkaError as exc:
                if exc.retriable or isinstance(exc, KafkaTimeoutError):
                    log.debug("fetch preparation failed: %s", exc)
                    await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                    continue
                self._fetch_error = exc
                if self._data_ready is not None:
                    self._data_ready.set()
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                continue
            per_node: dict[int, list[TopicPartition]] = {}
            for tp, st in self._states.items():
                if st.paused or st.in_flight or st.fetch_position is None or len(st.buffered) >= 2:
                    continue
                leader = self._cluster.leader_for(tp)
                if leader < 0 or leader in in_flight_nodes:
                    continue
                per_node.setdefault(leader, []).append(tp)
            for node, tps in per_node.items():
                in_flight_nodes.add(node)
                for tp in tps:
                    self._states[tp].in_flight = True
                self._spawn(self._fetch(node, tps, in_flight_nodes))
            await self._wakeup.wait()

    async def _fetch(self, node: int, tps: list[TopicPartition], in_flight_nodes: set[int]) -> None:
        c = self.config
        try:
            # the assignment may have changed since this fetch was planned (assign(), a rebalance)
            live = [tp for tp in tps if tp in self._states]
            if not live:
                return
            epochs = {tp: self._states[tp].epoch for tp in live}
            conn = await self._cluster.connection(node)
            version = conn.version(1)
            mod = proto.request_module(1, version)
            topics: dict[str, list[Any]] = {}
            for tp in live:
                st = self._states.get(tp)
                if st is None or st.fetch_position is None:
                    continue
                topics.setdefault(tp.topic, []).append(
                    proto.nested(mod, "FetchPartition", partition=tp.partition, fetch_offset=st.fetch_position,
                                 partition_max_bytes=c["max.partition.fetch.bytes"], log_start_offset=-1,
                                 current_leader_epoch=-1)
                )
            if not topics:
                return
            req = proto.build(
                mod.FetchRequest,
                replica_id=-1,
                max_wait=c["fetch.max.wait.ms"],
                min_bytes=c["fetch.min.bytes"],
                max_bytes=c["fetch.max.bytes"],
                isolation_level=1 if self._read_committed else 0,
                session_id=0,
                session_epoch=-1,
                topics=[proto.nested(mod, "FetchTopic", topic=t, partitions=ps) for t, ps in topics.items()],
                forgotten_topics_data=[],
                rack_id="",
            )
            resp = await conn.request(req, timeout=c["request.timeout.ms"] / 1000 + c["fetch.max.wait.ms"] / 1000)
            err = int(getattr(resp, "error_code", 0))
            if err:
                raise KafkaError("fetch failed", err)
            got = False
            refresh = False
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(str(t.topic), int(p.partition_index))
                    pst = self._states.get(tp)
                    if pst is None or pst.epoch != epochs.get(tp):
                        continue
                    st = pst
                    perr = int(p.error_code)
                    if perr == 1:  # OFFSET_OUT_OF_RANGE
                        if c["auto.offset.reset"] == "none":
                            self._fetch_error = KafkaError(f"offset out of range for {tp}", 1)
                        else:
                            st.position = st.fetch_position = None
                            st.epoch += 1
                            st.buffered.clear()
                        continue
                    if perr:
                        if perr in (3, 5, 6, 74, 75, 56):
                            refresh = True
                            continue
                        self._fetch_error = KafkaError(f"fetch from {tp} failed", perr)
                        continue
                    st.high_watermark = int(p.high_watermark)
                    records = p.records
                    if records:
                        nxt = _next_fetch_offset(records, st.fetch_position or 0)
                        if nxt > (st.fetch_position or 0):
                            st.fetch_position = nxt
                        aborted = [(int(a.producer_id), int(a.first_offset)) for a in (p.aborted_transactions or ())]
                        st.buffered.append((st.epoch, records, aborted))
                        got = True
            if refresh:
                await self._cluster.refresh()
            if got and self._data_ready is not None:
                self._data_ready.set()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            log.debug("fetch from node %s failed: %s", node, exc)
            await asyncio.sleep(c["retry.backoff.ms"] / 1000)
            try:
                await self._cluster.refresh()
            except KafkaError:
                pass
        except KafkaError as exc:
            log.debug("fetch from node %s failed: %s", node, exc)
            if isinstance(exc, AuthenticationError):  # raised by the next poll, as Java's consumer
                self._fetch_error = exc
            await asyncio.sleep(c["retry.backoff.ms"] / 1000)
        finally:
            in_flight_nodes.discard(node)
            for tp in tps:
                done_st = self._states.get(tp)
                if done_st is not None:
                    done_st.in_flight = False
            self._kick()

    def _take_records(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            ready = self._ready_records
            if self._ready_index < len(ready):
                tp = self._ready_tp
                assert tp is not None
                st = self._states.get(tp)
                if st is None or st.paused:
                    self._ready_records = []
                    self._ready_index = 0
                    continue
                i = self._ready_index
                j = min(len(ready), i + max_records - len(out))
                if not out and i == 0 and j == len(ready):
                    out = ready
                else:
                    out.extend(ready[i:j])
                self._ready_index = j
                st.position = out[-1].offset + 1
                if j == len(ready) and self._ready_next > st.position:
                    st.position = self._ready_next  # past trailing control / aborted batches
                continue
            found = False
            for tp, st in self._states.items():
                if st.paused or not st.buffered:
                    continue
                epoch, data, aborted = st.buffered.popleft()
                self._kick()
                if epoch != st.epoch or st.position is None:
                    continue
                records, nxt = _decode(tp.topic, tp.partition, data, st.position, aborted, self._read_committed, self.config["check.crcs"])
                if self._key_deserializer or self._value_deserializer:
                    records = [self._deserialize(r) for r in records]
                if not records:
                    if nxt > st.position:
                        st.position = nxt
                    continue
                self._ready_records = records
                self._ready_index = 0
                self._ready_tp = tp
                self._ready_next = nxt
                found = True
                break
            if not found:
                break
        return out

    def _deserialize(self, r: ConsumerRecord) -> ConsumerRecord:
        kd, vd = self._key_deserializer, self._value_deserializer
        return r._replace(
            key=kd(r.key) if kd and r.key is not None else r.key,
            value=vd(r.value) if vd and r.value is not None else r.value,
        )

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to ``max.poll.records`` records, waiting up to ``timeout`` seconds for some."""
        self._check_started()
        assert self._data_ready is not None
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout
        while True:
            if self._fetch_error is not None:
                exc, self._fetch_error = self._fetch_error, None
                raise exc
            if self._group is not None:
                await self._group.maybe_rebalance()
            out = self._take_records(limit)
            if out:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            self._data_ready.clear()
            if any(st.buffered for st in self._states.values() if not st.paused):
                continue
            await self._data_ready.wait(left)

    getmany = poll

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            for r in await self.poll(1.0):
                yield r

    async def getone(self) -> ConsumerRecord:
        while True:
            recs = await self.poll(1.0, max_records=1)
            if recs:
                return recs[0]


def _next_fetch_offset(data: bytes, current: int) -> int:
    nxt = current
    for _pos, h in _records.iter_batch_headers(data):
        nxt = h[0] + h[6] + 1
    return nxt
