"""Consumer group membership (classic protocol) and the partition assignors.

Protocol type "consumer"; member metadata is Kafka's ConsumerProtocolSubscription (we write v1:
version i16, topics [string], user_data nullable bytes, owned_partitions [(topic, [int32])]) and
assignments are ConsumerProtocolAssignment (v0/v1: version i16, [(topic, [int32])], user_data),
so Java, librdkafka and Python clients can share a group with us.

Assignors: ``range`` and ``roundrobin`` (eager: every partition is revoked before rejoining)
and ``cooperative-sticky`` (incremental: only moved partitions are revoked; a partition that
changes owner is left unassigned for one round and handed over in a follow-up rebalance).
The eager protocol is used unless every configured assignor is cooperative, as in Java.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .. import _protocol as proto
from .._cluster import Cluster
from .._signal import Signal
from ..errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from ..types import OffsetAndMetadata, TopicPartition

__all__ = [
    "GroupHost",
    "GroupMembership",
    "RebalanceListener",
    "assign_cooperative_sticky",
    "assign_range",
    "assign_roundrobin",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

log = logging.getLogger("odradek.client.group")


# -- ConsumerProtocol encoding ---------------------------------------------------------------
def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _tp_array(tps: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for t in sorted(by_topic):
        ps = sorted(by_topic[t])
        out.append(_str(t) + struct.pack(f">i{len(ps)}i", len(ps), *ps))
    return b"".join(out)


def encode_subscription(topics: Iterable[str], owned: Iterable[TopicPartition] = (), user_data: bytes | None = None, version: int = 1) -> bytes:
    topics = sorted(topics)
    out = [struct.pack(">hi", version, len(topics))]
    out += [_str(t) for t in topics]
    out.append(struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)
    if version >= 1:
        out.append(_tp_array(owned))
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.p = 0

    def i16(self) -> int:
        (v,) = struct.unpack_from(">h", self.d, self.p)
        self.p += 2
        return int(v)

    def i32(self) -> int:
        (v,) = struct.unpack_from(">i", self.d, self.p)
        self.p += 4
        return int(v)

    def string(self) -> str:
        n = self.i16()
        s = self.d[self.p : self.p + n].decode()
        self.p += n
        return s

    def nbytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        b = self.d[self.p : self.p + n]
        self.p += n
        return b

    def tp_array(self) -> list[TopicPartition]:
        out = []
        for _ in range(self.i32()):
            t = self.string()
            out += [TopicPartition(t, self.i32()) for _ in range(self.i32())]
        return out

    @property
    def more(self) -> bool:
        return self.p < len(self.d)


def decode_subscription(data: bytes) -> tuple[list[str], list[TopicPartition], bytes | None]:
    r = _Reader(data)
    version = r.i16()
    topics = [r.string() for _ in range(r.i32())]
    user_data = r.nbytes()
    owned = r.tp_array() if version >= 1 and r.more else []
    return topics, owned, user_data


def encode_assignment(tps: Iterable[TopicPartition], user_data: bytes | None = None, version: int = 1) -> bytes:
    ud = struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return struct.pack(">h", version) + _tp_array(tps) + ud


def decode_assignment(data: bytes) -> list[TopicPartition]:
    if not data:
        return []
    r = _Reader(data)
    r.i16()
    return r.tp_array()


# -- assignors ---------------------------------------------------------------------------------
Members = dict[str, tuple[list[str], list[TopicPartition]]]  # member -> (topics, owned)


def assign_range(members: Members, partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Java's RangeAssignor: per topic, consecutive ranges over members sorted by id."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic, n in sorted(partitions.items()):
        subs = sorted(m for m, (topics, _o) in members.items() if topic in topics)
        if not subs:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            out[m] += [TopicPartition(topic, p) for p in range(start, start + count)]
            start += count
    return out


def assign_roundrobin(members: Members, partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Java's RoundRobinAssignor: all partitions sorted, dealt to subscribed members in turn."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    order = sorted(members)
    i = 0
    for topic, n in sorted(partitions.items()):
        for p in range(n):
            for _ in range(len(order)):
                m = order[i % len(order)]
                i += 1
                if topic in members[m][0]:
                    out[m].append(TopicPartition(topic, p))
                    break
    return out


def assign_cooperative_sticky(members: Members, partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Balanced and sticky; partitions that change owner are withheld for one round."""
    all_tps = [TopicPartition(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
    valid = set(all_tps)
    subscribed = {m: set(topics) for m, (topics, _o) in members.items()}
    owner: dict[TopicPartition, str] = {}
    for m, (_t, owned) in sorted(members.items()):
        for tp in owned:
            if tp in valid and tp.topic in subscribed[m] and tp not in owner:
                owner[tp] = m
    target: dict[str, list[TopicPartition]] = {m: [] for m in members}
    eligible_counts = {m: sum(1 for tp in all_tps if tp.topic in subscribed[m]) for m in members}
    total = len(all_tps)
    n_members = max(1, len(members))
    quota = -(-total // n_members)  # ceil
    for tp, m in owner.items():
        if len(target[m]) < quota:
            target[m].append(tp)
    assigned = {tp for tps in target.values() for tp in tps}
    for tp in all_tps:
        if tp in assigned:
            continue
        cands = [m for m in sorted(members) if tp.topic in subscribed[m]]
        if not cands:
            continue
        m = min(cands, key=lambda x: (len(target[x]), eligible_counts[x], x))
        target[m].append(tp)
    # cooperative: do not hand a partition to a new owner while its previous owner still has it
    for m, tps in target.items():
        target[m] = [tp for tp in tps if owner.get(tp, m) == m]
    return target


ASSIGNORS = {"range": assign_range, "roundrobin": assign_roundrobin, "cooperative-sticky": assign_cooperative_sticky}


# -- membership -----------------------------------------------------------------------------
class RebalanceListener(Protocol):
    """The callbacks a member calls around a rebalance (plain functions or coroutines)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any: ...

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any: ...


@dataclass(frozen=True)
class GroupHost:
    """What the membership needs from the consumer it joins the group for, and nothing more.

    ``listener()`` is read at each rebalance (``subscribe`` may replace it); ``set_assignment``
    hands the consumer its new partitions; ``consumed_offsets`` and ``commit`` serve the commit
    made before partitions are revoked when ``enable.auto.commit`` is on.
    """

    cluster: Cluster
    config: Mapping[str, Any]
    listener: Callable[[], RebalanceListener | None]
    set_assignment: Callable[[set[TopicPartition]], None]
    consumed_offsets: Callable[[], Mapping[TopicPartition, OffsetAndMetadata]]
    commit: Callable[[Mapping[TopicPartition, OffsetAndMetadata]], Awaitable[None]]


class GroupMembership:
    def __init__(self, host: GroupHost) -> None:
        self.host = host
        self.cluster = host.cluster
        c = host.config
        self.group_id: str = c["group.id"]
        self.instance_id: str | None = c["group.instance.id"]
        self.assignors: list[str] = c["partition.assignment.strategy"]
        self.cooperative = all(a == "cooperative-sticky" for a in self.assignors)
        self.session_timeout_ms: int = c["session.timeout.ms"]
        self.rebalance_timeout_ms: int = c["max.poll.interval.ms"]
        self.heartbeat_interval = c["heartbeat.interval.ms"] / 1000
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.topics: set[str] = set()
        self.need_rejoin = True
        self.stable = False
        self.assigned: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None
        self._rejoin = Signal()
        self._error: BaseException | None = None
        self.joined = Signal()

    def start(self, topics: set[str]) -> None:
        self.topics = set(topics)
        self.request_rejoin()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def request_rejoin(self) -> None:
        self.need_rejoin = True
        self.stable = False
        self._rejoin.set()

    async def maybe_rebalance(self) -> None:
        if self._error is not None:
            exc, self._error = self._error, None
            raise exc

    async def _call(self, fn: Any, tps: set[TopicPartition]) -> None:
        if fn is None or not tps:
            return
        try:
            r = fn(set(tps))
            if inspect.isawaitable(r):
                await r
        except Exception:
            log.exception("rebalance listener raised")

    async def _run(self) -> None:
        backoff = self.host.config["retry.backoff.ms"] / 1000
        while True:
            try:
                if self.need_rejoin:
                    await self._join_and_sync()
                    continue
                self._rejoin.clear()
                if await self._rejoin.wait(self.heartbeat_interval):
                    continue
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.debug("group %s: %s", self.group_id, exc)
                self.cluster.coordinators.pop((0, self.group_id), None)
                await asyncio.sleep(backoff)
            except KafkaError as exc:
                if exc.code in (14, 15, 16):
                    self.cluster.coordinators.pop((0, self.group_id), None)
                elif not exc.retriable:
                    self._error = exc
                log.debug("group %s: %s", self.group_id, exc)
                await asyncio.sleep(backoff)

    async def _conn(self) -> Any:
        node = await self.cluster.coordinator(self.group_id)
        return await self.cluster.connection(node)

    async def _join_and_sync(self) -> None:
        listener = self.host.listener()
        if not self.cooperative and self.assigned:
            await self._commit_before_revoke()
            await self._call(listener and listener.on_partitions_revoked, self.assigned)
            self.assigned = set()
            self.host.set_assignment(set())
        self.stable = False
        conn = await self._conn()
        version = conn.version(11)
        mod = proto.request_module(11, version)
        owned = sorted(self.assigned) if self.cooperative else []
        meta = encode_subscription(self.topics, owned)
        req = proto.build(
            mod.JoinGroupRequest,
            group_id=self.group_id,
            session_timeout=self.session_timeout_ms,
            rebalance_timeout=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocols=[proto.nested(mod, "JoinGroupRequestProtocol", name=a, metadata=meta) for a in self.assignors],
            reason=None,
        )
        timeout = self.rebalance_timeout_ms / 1000 + 5
        resp = await conn.request(req, timeout=timeout)
        err = int(resp.error_code)
        if err == 79:  # MEMBER_ID_REQUIRED
            self.member_id = str(resp.member_id)
            return
        if err in (25,):  # UNKNOWN_MEMBER_ID
            self.member_id = ""
            return
        if err == 27:
            return
        if err:
            raise KafkaError(f"JoinGroup {self.group_id!r} failed", err)
        self.member_id = str(resp.member_id)
        generation = int(resp.generation_id)
        protocol = str(resp.protocol_name)
        assignments: list[Any] = []
        smod = proto.request_module(14, conn.version(14))
        if str(resp.leader) == self.member_id:
            members: Members = {}
            for m in resp.members:
                topics, mowned, _ud = decode_subscription(bytes(m.metadata))
                members[str(m.member_id)] = (topics, mowned)
            all_topics = sorted({t for topics, _o in members.values() for t in topics})
            try:
                await self.cluster.wait_for_topics(all_topics, 5.0)
            except KafkaError:
                pass
            counts = {t: len(self.cluster.topics[t]) for t in all_topics if t in self.cluster.topics}
            result = ASSIGNORS[protocol](members, counts)
            assignments = [proto.nested(smod, "SyncGroupRequestAssignment", member_id=m, assignment=encode_assignment(tps)) for m, tps in result.items()]
        sreq = proto.build(
            smod.SyncGroupRequest,
            group_id=self.group_id,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=protocol,
            assignments=assignments,
        )
        sresp = await conn.request(sreq, timeout=timeout)
        serr = int(sresp.error_code)
        if serr in (27, 22, 25):
            if serr == 25:
                self.member_id = ""
            return
        if serr:
            raise KafkaError(f"SyncGroup {self.group_id!r} failed", serr)
        self.generation_id = generation
        self.protocol = protocol
        new = set(decode_assignment(bytes(sresp.assignment)))
        old = self.assigned
        self.need_rejoin = False
        if self.cooperative:
            revoked = old - new
            if revoked:
                await self._commit_before_revoke(revoked)
                await self._call(listener and listener.on_partitions_revoked, revoked)
                self.need_rejoin = True  # let the group hand the revoked partitions over
            self.assigned = new
            self.host.set_assignment(new)
            await self._call(listener and listener.on_partitions_assigned, new - old)
        else:
            self.assigned = new
            self.host.set_assignment(new)
            await self._call(listener and listener.on_partitions_assigned, new)
        self.stable = not self.need_rejoin
        self.joined.set()

    async def _commit_before_revoke(self, tps: set[TopicPartition] | None = None) -> None:
        host = self.host
        if not host.config["enable.auto.commit"] or self.generation_id < 0:
            return
        offsets = {tp: om for tp, om in host.consumed_offsets().items() if tps is None or tp in tps}
        if offsets:
            try:
                await host.commit(offsets)
            except KafkaError as exc:
                log.debug("commit before revoke failed: %s", exc)

    async def _heartbeat(self) -> None:
        conn = await self._conn()
        mod = proto.request_module(12, conn.version(12))
        resp = await conn.request(
            proto.build(mod.HeartbeatRequest, group_id=self.group_id, generation_id=self.generation_id,
                        member_id=self.member_id, group_instance_id=self.instance_id)
        )
        err = int(resp.error_code)
        if err == 27:
            self.request_rejoin()
        elif err in (22, 25):  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID: partitions are lost
            if err == 25:
                self.member_id = ""
            lost, self.assigned = self.assigned, set()
            self.host.set_assignment(set())
            listener = self.host.listener()
            await self._call(listener and listener.on_partitions_lost, lost)
            self.request_rejoin()
        elif err:
            raise KafkaError("Heartbeat failed", err)

    async def leave(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self.assigned:
            listener = self.host.listener()
            await self._call(listener and listener.on_partitions_revoked, self.assigned)
            self.assigned = set()
        if not self.member_id or self.instance_id:
            return
        try:
            conn = await asyncio.wait_for(self._conn(), 5)
            mod = proto.request_module(13, conn.version(13))
            await conn.request(
                proto.build(mod.LeaveGroupRequest, group_id=self.group_id, member_id=self.member_id,
                            members=[proto.nested(mod, "MemberIdentity", member_id=self.member_id, group_instance_id=None, reason=None)]),
                timeout=5,
            )
        except (TimeoutError, KafkaError, OSError) as exc:
            log.debug("LeaveGroup failed: %s", exc)
        self.member_id = ""
        self.generation_id = -1


_ = time  # (kept for future session-timeout checks)
