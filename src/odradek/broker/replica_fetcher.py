"""``ReplicaFetcher``: a follower's copy loop towards one leader broker (Kafka's
``ReplicaFetcherThread`` / ``AbstractFetcherThread``, as one asyncio task). Its requests go
through the broker's ``InterBrokerClient`` on the (leader id, ``fetcher-<fetcher id>``)
connection, client id ``broker-<id>-fetcher-<fetcher id>`` as Kafka's.

The replica manager runs ``num.replica.fetchers`` fetchers per leader broker; a partition goes to
fetcher :func:`fetcher_id` (Kafka's ``AbstractFetcherManager.getFetcherId``). Each partition is
either *truncating* or *fetching*:

* **Truncating** (a new leader epoch, KIP-101/279): the follower asks OffsetsForLeaderEpoch
  (v4, ``replica_id`` = own id, ``current_leader_epoch`` = the epoch from LeaderAndIsr,
  ``leader_epoch`` = the latest epoch of its own log) and truncates to
  ``truncation_offset``: the leader's end offset for that epoch, never past the follower's own
  end of the same epoch; if the leader answers an older epoch the follower does not hold, the
  follower cuts to its end of the largest epoch below and asks again. A log without epochs
  truncates to its high watermark. Then the partition fetches.
* **Fetching**: Fetch v12 (its body written by ``protocol.fetch_request_encoder``, the
  answer decoded by kio) with ``replica_id`` = own id, ``fetch_offset`` = the log end,
  ``last_fetched_epoch`` = the log's latest epoch. A ``diverging_epoch`` in the answer is
  truncated the same way (back to truncating if not settled); records are appended as they
  are (``PartitionLog.append_as_follower``: offsets and epochs kept); then the high watermark
  becomes min(leader's HW, own LEO), never lower than before, and the log start offset follows
  the leader's up to the HW. The producer state follows the appends and truncations
  (``Partition.append_as_follower`` / ``truncate_to``), so it is ready when the partition
  next leads.

Errors: a failed request (``InterBrokerRequestError``: connection, timeout, bad answer; the
client drops the connection) or a top-level Fetch error → the round is tried again after
50 ms, doubling up to ``replica.fetch.backoff.ms`` (reset by a round that succeeds; the
client's own reconnect backoff, 50 ms up to 1 s, runs under it); a partition error (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH,
...) delays that partition by the backoff until a LeaderAndIsr replaces it;
OFFSET_OUT_OF_RANGE below the leader's log start restarts the log there, otherwise truncates
again. Timeouts: OffsetsForLeaderEpoch ``replica.socket.timeout.ms``, Fetch that plus
``replica.fetch.wait.max.ms``. Bounded: one request in flight, a response larger than
``bound`` bytes closes the connection. ``remove_partitions`` (StopReplica, becoming leader) takes effect at once: a
response for a removed or replaced partition is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_v4

from odradek.broker.inter_broker_client import InterBrokerClient, InterBrokerRequestError, Node
from odradek.broker.partition import Partition
from odradek.clock import Clock
from odradek.coordinator.records import java_string_hash
from odradek.protocol.fetch_request_encoder import (
    FETCH_API_KEY,
    REPLICA_FETCH_VERSION,
    ReplicaFetchPartition,
    encode_replica_fetch_body,
)
from odradek.protocol.messages import decode_response
from odradek.protocol.messages import make_entity as make
from odradek.protocol.network_client import OutboundRequest
from odradek.storage import PartitionLog
from odradek.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)

__all__ = ["FetcherConfig", "ReplicaFetcher", "fetcher_id", "truncation_offset"]

log = logging.getLogger("odradek.replication")

_NONE = ErrorCode.none
_OUT_OF_RANGE = ErrorCode.offset_out_of_range


def _decode_fetch_response(version: int, body: memoryview) -> Any:
    return decode_response(FETCH_API_KEY, version, body)


class _ReplicationSettings(Protocol):
    """The ``ReplicationConfig`` fields a fetcher reads (replica_manager.py holds the defaults)."""

    @property
    def replica_fetch_wait_max_ms(self) -> int: ...
    @property
    def replica_fetch_min_bytes(self) -> int: ...
    @property
    def replica_fetch_max_bytes(self) -> int: ...
    @property
    def replica_fetch_response_max_bytes(self) -> int: ...
    @property
    def replica_fetch_backoff_ms(self) -> int: ...
    @property
    def replica_socket_timeout_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """A fetcher's settings, from the broker's ``replica.fetch.*`` / ``replica.socket.timeout.ms``
    (``ReplicationConfig`` in replica_manager.py, which holds Kafka's defaults)."""

    max_wait_ms: int
    min_bytes: int
    partition_max_bytes: int
    response_max_bytes: int
    backoff_ms: int
    socket_timeout_ms: int

    @classmethod
    def from_replication(cls, r: _ReplicationSettings) -> FetcherConfig:
        return cls(
            max_wait_ms=r.replica_fetch_wait_max_ms,
            min_bytes=r.replica_fetch_min_bytes,
            partition_max_bytes=r.replica_fetch_max_bytes,
            response_max_bytes=r.replica_fetch_response_max_bytes,
            backoff_ms=r.replica_fetch_backoff_ms,
            socket_timeout_ms=r.replica_socket_timeout_ms,
        )

    @property
    def bound(self) -> int:
        """The largest response frame accepted (a leader may exceed the limits by one batch)."""
        return 2 * self.response_max_bytes + 64 * 1024 * 1024


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Which of ``num_fetchers`` fetchers towards a leader copies ``topic``-``partition``:
    ``Utils.abs(31 * topic.hashCode() + partition) % num_fetchers`` in Java's int32 arithmetic
    (Kafka's ``AbstractFetcherManager.getFetcherId``), the same in every process and run.
    Consecutive partitions of a topic alternate between two fetchers."""
    if num_fetchers <= 1:
        return 0
    n = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    if n & 0x80000000:
        n -= 1 << 32
    n = 0 if n == -(1 << 31) else abs(n)  # Utils.abs: Integer.MIN_VALUE -> 0
    return n % num_fetchers


def truncation_offset(
    plog: PartitionLog, leader_epoch: int, leader_end_offset: int
) -> tuple[int, bool]:
    """Where a follower truncates given the leader's (epoch, end offset) for the follower's
    latest epoch (OffsetsForLeaderEpoch, or a Fetch's diverging epoch), and whether that
    settles it (Kafka's ``getOffsetTruncationState``):

    * the leader knows no such epoch (end offset -1) → the follower's high watermark;
    * the follower holds no epoch ≤ the leader's → min(leader end, start of its first epoch):
      nothing it wrote in its (newer) epochs is on the leader (Kafka keeps up to the leader's
      end here, which keeps a diverged record when the leader never had the follower's epoch);
    * the follower's largest epoch ≤ the leader's is older (it never saw the leader's epoch)
      → its end of that older epoch, not settled (ask again with the new latest epoch);
    * else min(leader end, own end of that epoch, own LEO).
    """
    leo = plog.log_end_offset
    if leader_end_offset < 0 or leader_epoch < 0:
        return min(plog.high_watermark, leo), True
    own_epoch, own_end = plog.end_offset_for_epoch(leader_epoch)
    if own_epoch < 0:  # all our epochs are newer than the leader's: none of it is the leader's
        entries = plog.leader_epoch_entries()
        first_start = entries[0][1] if entries else leo
        return min(leader_end_offset, first_start, leo), True
    if own_epoch != leader_epoch:
        return min(own_end, leo), False
    return min(own_end, leader_end_offset, leo), True


def latest_epoch(plog: PartitionLog) -> int:
    entries = plog.leader_epoch_entries()
    return entries[-1][0] if entries else -1


class _FetchError(Exception):
    """A Fetch answered with a top-level error: the round is tried again after the backoff."""


class _FetchState:
    """One followed partition: the Partition, the leader epoch LeaderAndIsr gave, the phase."""

    __slots__ = ("delayed_until", "leader_epoch", "partition", "truncating")

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.truncating = True
        self.delayed_until = 0.0


class ReplicaFetcher:
    """Copies the partitions this broker follows from one leader. See the module docstring."""

    def __init__(
        self,
        node_id: int,
        leader_id: int,
        host: str,
        port: int,
        config: FetcherConfig,
        clock: Clock,
        fetcher_id: int = 0,
        client: InterBrokerClient | None = None,
    ) -> None:
        """``client``: the broker's inter-broker client; without one the fetcher opens a client
        of its own (closed with the fetcher)."""
        self.node_id = node_id
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.address = (host, port)
        self.node = Node(leader_id, host, port)
        self.config = config
        self.clock = clock
        self._own_client = client is None
        self.client = client if client is not None else InterBrokerClient(node_id, clock=clock)
        self.purpose = f"fetcher-{fetcher_id}"
        self.on_storage_error: Callable[[str, int, str], None] | None = None
        """Told when a follower append raises an ``OSError`` (its log dir goes offline)."""
        self._states: dict[tuple[str, int], _FetchState] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.client_id = f"broker-{node_id}-{self.purpose}"
        self.rounds = 0
        """Completed fetch rounds (for tests and metrics)."""

    # -- partitions ----------------------------------------------------------------------------

    def add_partition(self, partition: Partition) -> None:
        """Follow ``partition`` (its state just set by LeaderAndIsr): truncate first, then fetch."""
        self._states[(partition.topic, partition.partition)] = _FetchState(partition)
        self._wake.set()
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove_partitions(self, keys: Iterable[tuple[str, int]]) -> None:
        for key in keys:
            self._states.pop(key, None)

    def partitions(self) -> list[Partition]:
        return [s.partition for s in self._states.values()]

    def partition_count(self) -> int:
        return len(self._states)

    def close(self) -> None:
        self._closed = True
        self._states.clear()
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
        self._disconnect()

    async def wait_closed(self) -> None:
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._own_client:
            await self.client.close()

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.05
        limit = max(0.05, self.config.backoff_ms / 1000)
        while not self._closed:
            if not self._states:
                self._wake.clear()
                await self._wake.wait()
                continue
            now = self.clock.monotonic()
            ready = [s for s in self._states.values() if s.delayed_until <= now]
            if not ready:
                wait = min(s.delayed_until for s in self._states.values()) - now
                await self._wait_wake(wait)
                continue
            try:
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(truncating)
                fetching = [s for s in ready if not s.truncating and self._current(s)]
                if fetching:
                    await self._fetch(fetching)
                self.rounds += 1
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except (InterBrokerRequestError, _FetchError) as exc:
                log.info(
                    "fetcher %s to broker %d %s:%d: %s; retrying in %.2fs",
                    self.client_id,
                    self.leader_id,
                    *self.address,
                    exc,
                    backoff,
                )
                if isinstance(exc, _FetchError):  # the client dropped a failed connection itself
                    self._disconnect()
                await self._wait_wake(backoff)
                backoff = min(limit, backoff * 2)
            except Exception:
                log.exception("fetcher %s failed; retrying", self.client_id)
                self._disconnect()
                await self._wait_wake(limit)
        self._disconnect()

    async def _wait_wake(self, seconds: float) -> None:
        """Wait ``seconds`` or until a partition is added."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, seconds))

    def _current(self, state: _FetchState) -> bool:
        p = state.partition
        return self._states.get((p.topic, p.partition)) is state

    def _delay(self, state: _FetchState, code: Any) -> None:
        p = state.partition
        log.info(
            "%s-%d: fetch from broker %d: %s; backing off",
            p.topic,
            p.partition,
            self.leader_id,
            code,
        )
        state.delayed_until = self.clock.monotonic() + self.config.backoff_ms / 1000

    # -- connection ----------------------------------------------------------------------------

    def _disconnect(self) -> None:
        """Close this fetcher's connection (the next request opens a new one)."""
        self.client.close_connection(self.leader_id, self.purpose)

    async def _call(self, entity: Any, timeout_ms: int) -> Any:
        return await self.client.send(
            self.node,
            self.purpose,
            entity,
            timeout_ms=timeout_ms,
            client_id=self.client_id,
            max_response_bytes=self.config.bound,
        )

    # -- truncation ----------------------------------------------------------------------------

    async def _truncate(self, states: list[_FetchState]) -> None:
        ask: list[_FetchState] = []
        for st in states:
            if latest_epoch(st.partition.log) < 0:  # no epochs: back to the high watermark
                plog = st.partition.log
                self._truncate_to(st, min(plog.high_watermark, plog.log_end_offset))
                st.truncating = False
            else:
                ask.append(st)
        if not ask:
            return
        topics: dict[str, list[Any]] = {}
        for st in ask:
            p = st.partition
            topics.setdefault(p.topic, []).append(
                make(
                    ofle_v4.OffsetForLeaderPartition,
                    partition=p.partition,
                    current_leader_epoch=st.leader_epoch,
                    leader_epoch=latest_epoch(p.log),
                )
            )
        request = make(
            ofle_v4.OffsetForLeaderEpochRequest,
            replica_id=self.node_id,
            topics=tuple(
                make(ofle_v4.OffsetForLeaderTopic, topic=t, partitions=tuple(ps))
                for t, ps in topics.items()
            ),
        )
        response = await self._call(request, self.config.socket_timeout_ms)
        for t in response.topics:
            for r in t.partitions:
                s = self._states.get((t.topic, int(r.partition)))
                if s is None or s not in ask:
                    continue
                if r.error_code is not _NONE:
                    self._delay(s, r.error_code)
                    continue
                asked = latest_epoch(s.partition.log)
                target, done = truncation_offset(
                    s.partition.log, int(r.leader_epoch), int(r.end_offset)
                )
                self._truncate_to(s, target)
                # settled, or no progress possible (the latest epoch did not go back)
                s.truncating = not done and latest_epoch(s.partition.log) < asked

    def _truncate_to(self, state: _FetchState, offset: int) -> None:
        p = state.partition
        plog = p.log
        if offset >= plog.log_end_offset:
            p.truncate_to(offset)  # only leader-epoch entries starting at the log end go
            return
        log.info(
            "%s-%d: truncating from %d to %d (leader %d, epoch %d)",
            p.topic,
            p.partition,
            plog.log_end_offset,
            offset,
            self.leader_id,
            state.leader_epoch,
        )
        p.truncate_to(offset)

    # -- fetching ------------------------------------------------------------------------------

    async def _fetch(self, states: list[_FetchState]) -> None:
        cfg = self.config
        topics: dict[str, list[ReplicaFetchPartition]] = {}
        sent: dict[tuple[str, int], tuple[_FetchState, int]] = {}
        for s in states:
            p = s.partition
            plog = p.log
            end = plog.log_end_offset
            topics.setdefault(p.topic, []).append(
                (
                    p.partition,
                    s.leader_epoch,
                    end,
                    latest_epoch(plog),
                    plog.log_start_offset,
                    cfg.partition_max_bytes,
                )
            )
            sent[(p.topic, p.partition)] = (s, end)
        body = encode_replica_fetch_body(
            self.node_id,
            cfg.max_wait_ms,
            cfg.min_bytes,
            cfg.response_max_bytes,
            list(topics.items()),
        )
        request = OutboundRequest(
            FETCH_API_KEY,
            REPLICA_FETCH_VERSION,
            REPLICA_FETCH_VERSION,
            lambda _version: body,
            _decode_fetch_response,
            "FetchRequest",
        )
        response = await self._call(request, cfg.socket_timeout_ms + cfg.max_wait_ms)
        if response.error_code is not _NONE:
            raise _FetchError(f"fetch failed: {response.error_code}")
        for t in response.responses:
            for pd in t.partitions:
                entry = sent.get((t.topic, int(pd.partition_index)))
                if entry is None:
                    continue
                s, fetch_offset = entry
                if not self._current(s) or s.partition.log.log_end_offset != fetch_offset:
                    continue  # removed, replaced or truncated meanwhile
                self._apply(s, pd)

    def _apply(self, s: _FetchState, pd: Any) -> None:
        p = s.partition
        plog = p.log
        code = pd.error_code
        if code is _OUT_OF_RANGE:
            leader_start = int(pd.log_start_offset)
            if leader_start > plog.log_end_offset:
                log.info(
                    "%s-%d: behind the leader's log start %d: restarting the log there",
                    p.topic,
                    p.partition,
                    leader_start,
                )
                p.truncate_fully_and_start_at(leader_start)
            else:
                s.truncating = True
            return
        if code is not _NONE:
            self._delay(s, code)
            return
        diverging = pd.diverging_epoch
        if int(diverging.epoch) >= 0 or int(diverging.end_offset) >= 0:
            asked = latest_epoch(plog)
            target, done = truncation_offset(plog, int(diverging.epoch), int(diverging.end_offset))
            self._truncate_to(s, target)
            if not done and latest_epoch(plog) < asked:
                s.truncating = True
            return
        records = pd.records
        if records:
            try:
                p.append_as_follower(records)
            except (CorruptRecordError, InvalidRecordError, UnexpectedAppendOffsetError) as exc:
                log.warning(
                    "%s-%d: cannot append the leader's batches: %s", p.topic, p.partition, exc
                )
                s.truncating = True
                self._delay(s, "bad batches")
                return
            except OSError as exc:  # the log's dir failed: it goes offline, fetching stops
                log.error("%s-%d: follower append failed: %s", p.topic, p.partition, exc)
                self.remove_partitions([(p.topic, p.partition)])
                if self.on_storage_error is not None:
                    self.on_storage_error(p.topic, p.partition, f"follower append failed: {exc}")
                return
        hw = min(int(pd.high_watermark), plog.log_end_offset)
        if hw > plog.high_watermark:
            plog.update_high_watermark(hw)
            p.follower_high_watermark_moved()
        leader_start = int(pd.log_start_offset)
        if leader_start > plog.log_start_offset:
            with contextlib.suppress(OffsetOutOfRangeError):
                plog.increment_log_start_offset(min(leader_start, plog.high_watermark))
