"""Group coordinator benchmarks: rebalance time after a member leaves, and synchronous commits/s.

    .venv/bin/python bench/groups.py            # full run (~1 min)
    .venv/bin/python bench/groups.py --quick    # fewer rounds

The broker is a separate ``odradek broker`` process (odradek.testing.process.BrokerProcess, file
storage in a temporary directory). Group members are protocol-level clients written here
(kio-encoded JoinGroup v5 / SyncGroup v3 / Heartbeat v3 / LeaveGroup v3 / OffsetCommit v7 over
asyncio streams, one connection per member, as real clients do).

1. Rebalance: N members form a Stable group (two-step join, leader assigns, everyone syncs).
   Then one member sends LeaveGroup; the others rejoin at once (as they would on their next
   heartbeat, which answers REBALANCE_IN_PROGRESS), the leader assigns, all sync. Measured:
   leave sent -> every remaining member has its assignment (Stable), and last JoinGroup sent ->
   Stable (the issue's target: within one heartbeat interval, librdkafka's default 3 s).
   Also, with heartbeat-driven detection (members heartbeat every 100 ms and rejoin on
   REBALANCE_IN_PROGRESS): leave -> Stable.
2. Commits: one member of a Stable group commits one partition's offset synchronously, one
   request at a time, for a fixed time: (a) the protocol client, (b) confluent-kafka
   ``Consumer.commit(asynchronous=False)``; each with __consumer_offsets ``flush.messages``
   unset (acknowledged once written to the log) and ``flush.messages=1`` (fsync before the
   acknowledgement), plus 16 concurrent committers with fsync to show the group commit.

Every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from odradek.testing.process import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cpu_seconds

MS = datetime.timedelta(milliseconds=1)
SESSION_MS = 30_000


def _schema(module: str, *names: str) -> tuple[Any, ...]:
    import importlib

    mod = importlib.import_module(f"kio.schema.{module}")
    return tuple(getattr(mod, n) for n in names)


(JoinGroupRequest, JoinGroupRequestProtocol) = _schema(
    "join_group.v5.request", "JoinGroupRequest", "JoinGroupRequestProtocol"
)
(SyncGroupRequest, SyncGroupRequestAssignment) = _schema(
    "sync_group.v3.request", "SyncGroupRequest", "SyncGroupRequestAssignment"
)
(HeartbeatRequest,) = _schema("heartbeat.v3.request", "HeartbeatRequest")
(LeaveGroupRequest, MemberIdentity) = _schema(
    "leave_group.v3.request", "LeaveGroupRequest", "MemberIdentity"
)
(OffsetCommitRequest, OffsetCommitRequestTopic, OffsetCommitRequestPartition) = _schema(
    "offset_commit.v7.request",
    "OffsetCommitRequest",
    "OffsetCommitRequestTopic",
    "OffsetCommitRequestPartition",
)


class Conn:
    """One connection, one request in flight (like a group member's coordinator connection)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0
        self._writers: dict[type, Any] = {}

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        r, w = await asyncio.open_connection(host, port)
        return cls(r, w)

    def encode(self, req: Any) -> bytes:
        self.correlation_id += 1
        buf = io.BytesIO()
        entity_writer(RequestHeader)(
            buf,
            RequestHeader(
                request_api_key=req.__api_key__,
                request_api_version=req.__version__,
                correlation_id=self.correlation_id,
                client_id="bench",
            ),
        )
        entity_writer(type(req))(buf, req)
        body = buf.getvalue()
        return struct.pack(">i", len(body)) + body

    async def request(self, req: Any) -> Any:
        self.writer.write(self.encode(req))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        data = await self.reader.readexactly(size)
        value, _ = entity_reader(load_response_schema(req.__api_key__, req.__version__))(data, 4)
        return value

    async def request_raw(self, frame: bytes, response_type: Any) -> Any:
        self.writer.write(frame)
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        data = await self.reader.readexactly(size)
        return entity_reader(response_type)(data, 4)[0]

    def close(self) -> None:
        self.writer.close()


class ProtoMember:
    def __init__(self, conn: Conn, group: str, index: int) -> None:
        self.conn, self.group, self.index = conn, group, index
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[str] = []
        self.assignment = b""

    async def join(self) -> None:
        while True:
            r = await self.conn.request(
                JoinGroupRequest(
                    group_id=self.group,
                    session_timeout=SESSION_MS * MS,
                    rebalance_timeout=60_000 * MS,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(
                        JoinGroupRequestProtocol(
                            name="range", metadata=b"\x00\x00\x00\x00\x00\x00"
                        ),
                    ),
                )
            )
            if r.error_code == 79:
                self.member_id = r.member_id
                continue
            if r.error_code == 27:
                continue
            assert r.error_code == 0, r
            self.member_id, self.generation, self.leader = r.member_id, r.generation_id, r.leader
            self.members = [m.member_id for m in r.members]
            return

    async def sync(self) -> int:
        assignments: tuple[Any, ...] = ()
        if self.member_id == self.leader:
            assignments = tuple(
                SyncGroupRequestAssignment(member_id=m, assignment=f"p{i}".encode())
                for i, m in enumerate(self.members)
            )
        r = await self.conn.request(
            SyncGroupRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
                assignments=assignments,
            )
        )
        self.assignment = r.assignment
        return int(r.error_code)

    async def heartbeat(self) -> int:
        r = await self.conn.request(
            HeartbeatRequest(
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
            )
        )
        return int(r.error_code)

    async def leave(self) -> None:
        r = await self.conn.request(
            LeaveGroupRequest(
                group_id=self.group,
                members=(MemberIdentity(member_id=self.member_id, group_instance_id=None),),
            )
        )
        assert r.error_code == 0, r


async def _form_group(host: str, port: int, group: str, n: int) -> list[ProtoMember]:
    """n members reach one Stable generation: join, sync, then heartbeat (rejoining on
    REBALANCE_IN_PROGRESS) until every member holds an assignment of the same generation."""
    members = [ProtoMember(await Conn.open(host, port), group, i) for i in range(n)]
    synced: dict[int, int] = {}

    def stable() -> bool:
        return len(synced) == n and len(set(synced.values())) == 1

    async def run(m: ProtoMember) -> None:
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline:
            synced.pop(m.index, None)
            await m.join()
            if await m.sync() != 0:
                continue
            synced[m.index] = m.generation
            while not stable() and time.perf_counter() < deadline:
                await asyncio.sleep(0.02)
                if not stable() and await m.heartbeat() == 27:
                    break
            if stable():
                return
        raise RuntimeError("the group did not become Stable")

    await asyncio.gather(*(run(m) for m in members))
    return members


async def _rejoin_and_sync(members: list[ProtoMember]) -> float:
    """Everyone rejoins and syncs; returns the time the last JoinGroup was sent."""
    last_join = 0.0

    async def one(m: ProtoMember) -> None:
        nonlocal last_join
        last_join = max(last_join, time.perf_counter())
        await m.join()

    await asyncio.gather(*(one(m) for m in members))
    errors = await asyncio.gather(*(m.sync() for m in members))
    assert all(e == 0 for e in errors), errors
    return last_join


async def bench_rebalance(host: str, port: int, n: int, rounds: int) -> dict[str, float]:
    leave_to_stable, last_join_to_stable, heartbeat_driven = [], [], []
    for r in range(rounds):
        members = await _form_group(host, port, f"rb-{n}-{r}-{time.time_ns()}", n)
        leaver, rest = members[0], members[1:]
        t0 = time.perf_counter()
        await leaver.leave()
        last_join = await _rejoin_and_sync(rest)
        t1 = time.perf_counter()
        leave_to_stable.append(t1 - t0)
        last_join_to_stable.append(t1 - last_join)
        # heartbeat-driven: another member leaves; the others learn it from a heartbeat (100 ms)
        if len(rest) >= 2:
            leaver2, rest2 = rest[0], rest[1:]
            t0 = time.perf_counter()
            await leaver2.leave()

            async def follow(m: ProtoMember) -> None:
                deadline = time.perf_counter() + 10
                while time.perf_counter() < deadline:
                    await asyncio.sleep(0.1)
                    if await m.heartbeat() == 27:
                        await m.join()
                        assert await m.sync() == 0
                        return
                raise RuntimeError("no rebalance seen")

            await asyncio.gather(*(follow(m) for m in rest2))
            heartbeat_driven.append(time.perf_counter() - t0)
        for m in members:
            m.conn.close()
    out = {
        "leave_to_stable_ms": statistics.median(leave_to_stable) * 1000,
        "last_join_to_stable_ms": statistics.median(last_join_to_stable) * 1000,
    }
    if heartbeat_driven:
        out["heartbeat_driven_ms"] = statistics.median(heartbeat_driven) * 1000
    return out


async def bench_commits_protocol(
    host: str, port: int, seconds: float, committers: int = 1
) -> float:
    """Synchronous commits/s: each committer sends one OffsetCommit (one partition) and waits
    for the answer. The request is encoded once; each round patches the correlation id and the
    offset, and reads only the partition error code (the last two bytes of the answer), so the
    client costs a few microseconds and the number measures the broker."""
    members = await _form_group(host, port, f"commit-{committers}-{time.time_ns()}", committers)
    sentinel = 0x0123456789ABCDEF
    counts = [0] * committers

    async def run(i: int, m: ProtoMember) -> None:
        req = OffsetCommitRequest(
            group_id=m.group,
            generation_id_or_member_epoch=m.generation,
            member_id=m.member_id,
            group_instance_id=None,
            topics=(
                OffsetCommitRequestTopic(
                    name="bench",
                    partitions=(
                        OffsetCommitRequestPartition(
                            partition_index=i % 4,
                            committed_offset=sentinel,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        )
        frame = bytearray(m.conn.encode(req))
        at = frame.index(struct.pack(">q", sentinel))
        reader, writer = m.conn.reader, m.conn.writer
        deadline = time.perf_counter() + seconds
        offset = 0
        while offset < 10_000_000:
            if offset % 64 == 0 and time.perf_counter() > deadline:
                break
            offset += 1
            struct.pack_into(">i", frame, 8, offset)  # correlation id
            struct.pack_into(">q", frame, at, offset)
            writer.write(frame)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            answer = await reader.readexactly(size)
            if answer[-2:] != b"\x00\x00":
                raise RuntimeError(f"commit failed: error {struct.unpack('>h', answer[-2:])[0]}")
            counts[i] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(run(i, m) for i, m in enumerate(members)))
    elapsed = time.perf_counter() - t0
    for m in members:
        m.conn.close()
    return sum(counts) / elapsed


def bench_commits_confluent(bootstrap: str, seconds: float) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ck-commit-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["bench"])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.1)
    assert c.assignment(), "no assignment"
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end and n < 10_000_000:
        n += 1
        c.commit(offsets=[TopicPartition("bench", 0, n)], asynchronous=False)
    elapsed = time.perf_counter() - t0
    c.close()
    return n / elapsed


def set_offsets_fsync(bootstrap: str, on: bool) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "compact"}
    if on:
        configs["flush.messages"] = "1"
    resource = ConfigResource("topic", "__consumer_offsets", set_config=configs)
    for f in admin.alter_configs([resource]).values():  # a full replace: incremental needs v1+
        f.result(15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", default="2,10,50")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--commit-seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="1 round, 2 s of commits")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.commit_seconds = 1, 2.0
    sizes = [int(x) for x in args.members.split(",")]
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 50,
    }
    with BrokerProcess(settings) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("bench", 4, 1)])["bench"].result(15)

        print(
            f"broker pid {broker.pid}, {broker.bootstrap_servers}; python {sys.version.split()[0]}"
        )
        print(f"\nRebalance after one member leaves (median of {args.rounds} rounds)")
        print(
            f"{'members':>8} {'leave->Stable ms':>17} {'last join->Stable ms':>21} {'heartbeat-driven ms':>20}"
        )
        for n in sizes:
            r = asyncio.run(bench_rebalance(host, int(port), n, args.rounds))
            print(
                f"{n:>8} {r['leave_to_stable_ms']:>17.2f} {r['last_join_to_stable_ms']:>21.2f} "
                f"{r.get('heartbeat_driven_ms', float('nan')):>20.1f}"
            )

        print(f"\nSynchronous offset commits per second ({args.commit_seconds:.0f} s each)")
        print(f"{'client':<34} {'durability':<26} {'commits/s':>10} {'broker CPU us/commit':>21}")
        assert broker.pid is not None
        pid = broker.pid

        def measured(label: str, durability: str, run: Callable[[], float]) -> None:
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            rate = run()
            cpu, elapsed = cpu_seconds(pid) - cpu0, time.perf_counter() - t0
            per_commit = cpu / max(rate * elapsed, 1) * 1e6
            print(f"{label:<34} {durability:<26} {rate:>10.0f} {per_commit:>21.1f}")

        secs = args.commit_seconds
        for fsync in (False, True):
            set_offsets_fsync(broker.bootstrap_servers, fsync)
            label = "flush.messages=1 (fsync)" if fsync else "write (page cache)"
            measured(
                "protocol client, 1 committer",
                label,
                lambda: asyncio.run(bench_commits_protocol(host, int(port), secs)),
            )
            measured(
                "confluent-kafka commit(sync)",
                label,
                lambda: bench_commits_confluent(broker.bootstrap_servers, secs),
            )
            measured(
                "protocol client, 16 committers",
                label,
                lambda: asyncio.run(bench_commits_protocol(host, int(port), secs, committers=16)),
            )
        set_offsets_fsync(broker.bootstrap_servers, False)


if __name__ == "__main__":
    main()
